"""Sets of geometries of one system: a list, a multi-frame .xyz file or a scan of one
distance, read into a Surface; every refusal names its key; the settings round trip."""

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config, plan
from ferminet_fast.physics import geometries, systems
from ferminet_fast.runtime import cli

pytestmark = pytest.mark.jax_range

ANGSTROM = 0.529177210903  # Bohr radius in angstrom.
LIH = 'Li 0 0 0; H 0 0 3.015'


def molecule_config(**overrides):
  """A tiny config with no atom: `overrides` give the nuclei (dotted keys)."""
  return tiny_config('', **overrides)


def build(cfg):
  config.validate(cfg)
  return systems.make_system(cfg.system)


def test_a_list_of_geometries_in_either_unit():
  cfg = molecule_config(**{'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; H 0 0 2',
                                                 'H 0 0 0; H 0.5 0 2')})
  system = build(cfg)
  surface = system.surface
  assert surface.positions.shape == (3, 2, 3) and system.geometry_count == 3
  assert surface.coordinate is None and surface.label == ''
  np.testing.assert_array_equal(surface.positions[2, 1], [0.5, 0, 2])
  np.testing.assert_array_equal(system.positions, surface.positions[0])
  assert system.geometries.positions.shape == (3, 2, 3)
  assert system.symbols == ('H', 'H') and system.electrons == (1, 1) and system.name == 'H2'
  assert '3 geometries' in systems.describe(system)
  cfg.system.units = 'angstrom'
  np.testing.assert_allclose(build(cfg).surface.positions, surface.positions / ANGSTROM)


def test_one_geometry_has_no_surface():
  system = build(molecule_config(**{'system.molecule': LIH}))
  assert system.surface is None and system.geometry_count == 1
  np.testing.assert_array_equal(system.geometries.positions, system.positions[None])


def test_a_list_agrees_with_the_molecule_given_beside_it():
  system = build(molecule_config(**{'system.molecule': LIH,
                                    'system.geometries': ('Li 0 0 0; H 0 0 2',
                                                          'Li 0 0 0; H 0 0 4')}))
  np.testing.assert_array_equal(system.positions, [[0, 0, 0], [0, 0, 2]])


def write_frames(path, frames, blank_between=False):
  """An .xyz file of `frames`, each [(symbol, x, y, z)] in angstrom."""
  text = ''
  for k, frame in enumerate(frames):
    text += f'{len(frame)}\nframe {k}\n' + ''.join(
        f'{s} {x} {y} {z}\n' for s, x, y, z in frame) + ('\n' if blank_between else '')
  path.write_text(text)
  return str(path)


WATER = [('O', 0.0, 0.0, 0.1173), ('H', 0.0, 0.7572, -0.4692), ('H', 0.0, -0.7572, -0.4692)]


@pytest.mark.parametrize('blank_between', [False, True])
def test_a_multi_frame_xyz_file(tmp_path, blank_between):
  frames = [WATER, [(s, x, y * 1.1, z) for s, x, y, z in WATER],
            [(s, x, y * 1.2, z) for s, x, y, z in WATER]]
  path = write_frames(tmp_path / 'water.xyz', frames, blank_between)
  system = build(molecule_config(**{'system.geometries': path}))
  expected = np.array([[p[1:] for p in f] for f in frames]) / ANGSTROM
  np.testing.assert_allclose(system.surface.positions, expected)
  assert system.symbols == ('O', 'H', 'H') and system.electrons == (5, 5)
  # As `molecule`, the same file gives its first frame, as a one-frame file did.
  single = build(molecule_config(**{'system.molecule': path}))
  assert single.surface is None
  np.testing.assert_allclose(single.positions, expected[0])


def scan_config(molecule=LIH, atoms=(0, 1), start=2.0, stop=6.0, points=5, **more):
  return molecule_config(**{'system.molecule': molecule, 'system.scan.atoms': atoms,
                            'system.scan.start': start, 'system.scan.stop': stop,
                            'system.scan.points': points, **more})


def test_a_scan_sets_the_distance_exactly_and_moves_one_atom():
  water = 'O 0 0 0.2; H 0.3 1.4 -0.9; H 0 -1.43 -0.89'
  system = build(scan_config(water, atoms=(0, 2), start=1.0, stop=3.0, points=5))
  surface = system.surface
  r = surface.positions
  assert r.shape == (5, 3, 3) and system.geometry_count == 5
  np.testing.assert_allclose(surface.coordinate, [1.0, 1.5, 2.0, 2.5, 3.0], rtol=0, atol=1e-14)
  np.testing.assert_allclose(np.linalg.norm(r[:, 2] - r[:, 0], axis=-1), surface.coordinate,
                             rtol=0, atol=1e-12)
  base = systems.parse_molecule(water, 'bohr')[1]
  np.testing.assert_array_equal(r[:, 0], np.repeat(base[None, 0], 5, axis=0))
  np.testing.assert_array_equal(r[:, 1], np.repeat(base[None, 1], 5, axis=0))
  axis = (base[2] - base[0]) / np.linalg.norm(base[2] - base[0])
  np.testing.assert_allclose((r[:, 2] - r[:, 0]) / surface.coordinate[:, None],
                             np.repeat(axis[None], 5, axis=0), atol=1e-12)
  assert surface.label == 'R(O0-H2) / bohr'
  np.testing.assert_array_equal(system.positions, r[0])


def test_a_scan_in_angstrom_and_inward():
  system = build(scan_config('H 0 0 0; H 0 0 0.74', start=2.0, stop=0.5, points=4,
                             **{'system.units': 'angstrom'}))
  np.testing.assert_allclose(system.surface.coordinate,
                             np.array([2.0, 1.5, 1.0, 0.5]) / ANGSTROM, rtol=1e-14)
  np.testing.assert_allclose(system.surface.positions[:, 1, 2], system.surface.coordinate)


def test_a_scan_of_one_point_and_its_description():
  assert build(scan_config(points=1)).surface.coordinate.tolist() == [2.0]
  cfg = cli.load_config_file('configs/h2_pes.py')
  system = build(cfg)
  assert '12 geometries, R(H0-H1) 0.5..6 bohr' in systems.describe(system)
  assert geometries.describe(system.surface) == '12 geometries, R(H0-H1) 0.5..6 bohr'


H2 = 'H 0 0 0; H 0 0 1.4'


@pytest.mark.parametrize('overrides,message', [
    ({'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; Li 0 0 3')},
     r'geometries\[1\] holds H Li but config.system.geometries\[0\] holds H H'),
    ({'system.geometries': ('Li 0 0 0; H 0 0 3', 'H 0 0 0; Li 0 0 3')},
     'same elements in the same order'),
    ({'system.molecule': LIH, 'system.geometries': ('H 0 0 0; H 0 0 1',)},
     'config.system.molecule holds Li H'),
    ({'system.geometries': ()}, 'config.system.geometries holds no geometry'),
    ({'system.geometries': ('H 0 0 0', 'H 0 0 1')}, 'one nucleus'),
    ({'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; H 0 0 0.05')},
     r'geometries: in geometry 1, nuclei 0 \(H\) and 1 \(H\) are 0.05 bohr apart'),
    ({'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; H 0 0 0')},
     r'geometries\[1\]: nuclei 1 \(H\) and 2 \(H\) are at the same position'),
    ({'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; H 0 0 a')},
     r'geometries\[1\]: coordinates .* are not numbers'),
    ({'system.geometries': 'h2.txt'}, 'config.system.geometries must be .* an .xyz file'),
    ({'system.geometries': 3}, 'config.system.geometries must be'),
    ({'system.geometries': 'missing.xyz'}, "geometries 'missing.xyz' cannot be read"),
    ({'system.molecule': H2, 'system.scan.atoms': (0, 1), 'system.scan.start': 1.0,
      'system.scan.stop': 2.0, 'system.scan.points': 3,
      'system.geometries': ('H 0 0 0; H 0 0 1',)}, 'geometries and config.system.scan are both'),
    ({'system.molecule': H2, 'system.geometries': ('H 0 0 0; H 0 0 1',),
      'system.lattice': ((5., 0, 0), (0, 5., 0), (0, 0, 5.)), 'network.envelope': 'auto'},
     'geometries: the geometries of a periodic system .* are scanned with its cell'),
    ({'system.rs': 2.0, 'system.electrons': (1, 1), 'system.geometries': ('H 0 0 0; H 0 0 1',),
      'network.envelope': 'auto'}, 'are scanned with its cell'),
    ({'system.geometries': ('H 0 0 0; H 0 0 1', 'H 0 0 0; H 0 0 2'), 'system.states': 2},
     'not supported with several states'),
    ({'system.atom': 'He', 'system.geometries': ('H 0 0 0; H 0 0 1',)},
     "config.system.atom = 'He' is a single atom, which has no geometry to vary"),
])
def test_bad_sets_of_geometries_name_the_problem(overrides, message):
  with pytest.raises(InputError, match=message):
    build(molecule_config(**overrides))


@pytest.mark.parametrize('changes,message', [
    ({'points': 0}, 'scan.points = 0: the scan is empty'),
    ({'points': -2}, 'scan.points must be an integer >= 0'),
    ({'atoms': (0,)}, r'scan.atoms must be \(\) \(no scan\) or a pair'),
    ({'atoms': (1, 1)}, 'scan.atoms must be'),
    ({'atoms': (0, 1, 2)}, 'scan.atoms must be'),
    ({'atoms': (-1, 0)}, 'scan.atoms must be'),
    ({'atoms': (0, 2)}, r'scan.atoms = \(0, 2\): config.system.molecule has 2 nuclei'),
    ({'start': -1.0}, 'scan.start must be > 0'),
    ({'stop': 0.0}, 'scan.stop must be > 0'),
    ({'stop': None}, 'scan.stop = None: the scan of atoms'),
    ({'start': 3.0, 'stop': 3.0}, 'start = stop = 3.0 gives the same geometry 5 times'),
    ({'start': 0.05}, r'scan: in geometry 0, nuclei 0 \(Li\) and 1 \(H\) are 0.05 bohr apart'),
    ({'molecule': ''}, 'scan needs config.system.molecule'),
    ({'atom': 'Li', 'molecule': ''}, 'scan: config.system.atom'),
])
def test_bad_scans_name_the_problem(changes, message):
  keyed = {('system.' if k in ('atom', 'molecule') else 'system.scan.') + k: v
           for k, v in changes.items()}
  cfg = scan_config()
  cli.set_values(cfg, keyed)
  with pytest.raises(InputError, match=message):
    build(cfg)


@pytest.mark.parametrize('key,value', [('points', 5), ('start', 1.0), ('stop', 2.0)])
def test_scan_values_without_atoms_are_refused(key, value):
  with pytest.raises(InputError, match=rf'scan.{key} = {value} is given but '
                     r'config.system.scan.atoms is \(\)'):
    build(molecule_config(**{'system.molecule': H2, f'system.scan.{key}': value}))


@pytest.mark.parametrize('text,message', [
    ('', 'holds no geometry'),
    ('2\nH2\nH 0 0 0\nH 0 0 0.74\n3\nH2 again\nH 0 0 0\nH 0 0 0.8\n', 'frame 1: says 3 atoms but '
     'has 2 atom lines'),
    ('2\nH2\nH 0 0 0\nH 0 0 0.74\nH 0 0 2\n2\nH2\nH 0 0 0\nH 0 0 1\n',
     'frame 1: line 5 must be the number of atoms'),
    ('two\nH2\nH 0 0 0\nH 0 0 0.74\n', 'frame 0: the first line must be the number of atoms'),
    ('2\nH2\nH 0 0 0\nH 0 0 0.74\n2\nH2\nH 0 0 0\nH 0 0 x\n', 'frame 1: coordinates .* not'),
    ('2\nH2\nH 0 0 0\nH 0 0 0.74\n2\nH2\nH 0 0 0\nQ 0 0 1\n', "unknown element symbol 'Q'"),
    ('2\nH2\nH 0 0 0\nH 0 0 0.74\n2\nH2\nH 0 0 0\nH 0 0 0.02\n',
     'in geometry 1, nuclei 0 .H. and 1 .H. are 0.0378 bohr apart'),
])
def test_bad_xyz_files_of_geometries_name_the_problem(tmp_path, text, message):
  path = tmp_path / 'scan.xyz'
  path.write_text(text)
  with pytest.raises(InputError, match=message):
    build(molecule_config(**{'system.geometries': str(path)}))


def test_an_xyz_file_that_is_not_text_is_named(tmp_path):
  path = tmp_path / 'scan.xyz'
  path.write_bytes(b'\xff\xfe\x00binary')
  with pytest.raises(InputError, match='is not a text file'):
    build(molecule_config(**{'system.geometries': str(path)}))


LIH_CRYSTAL = {'system.atom': '', 'system.molecule': 'Li 0 0 0; H 3.8 0 0',
               'system.lattice': ((0, 3.8, 3.8), (3.8, 0, 3.8), (3.8, 3.8, 0)),
               'network.envelope': 'auto', 'pretrain.iterations': 0}
CELL_SCAN = {'system.scan.cell': True, 'system.scan.start': 0.9, 'system.scan.stop': 1.1,
             'system.scan.points': 5}


def test_a_scan_of_a_cell_scales_the_crystal_and_its_nuclei():
  """A scan of a crystal's cell: geometry g is the cell as given times factor f_g, its
  nuclei too (the same fractional positions); the system's own cell is the first; the
  electron gas scans r_s."""
  system = build(molecule_config(**LIH_CRYSTAL, **CELL_SCAN))
  given = build(molecule_config(**LIH_CRYSTAL))
  factors = np.linspace(0.9, 1.1, 5)
  np.testing.assert_allclose(system.lattice.vectors, 0.9 * given.lattice.vectors)
  np.testing.assert_allclose(system.surface.scales, factors / 0.9)
  np.testing.assert_allclose(system.surface.coordinate, factors)
  np.testing.assert_allclose(system.geometries.positions,
                             factors[:, None, None] * given.positions[None])
  np.testing.assert_allclose(system.geometries.scale, factors / 0.9)
  assert system.surface.label == systems.CELL_FACTOR
  gas = build(molecule_config(**{'system.rs': 2.0, 'system.electrons': (7, 7),
                                 'network.envelope': 'auto', 'pretrain.iterations': 0},
                              **CELL_SCAN))
  np.testing.assert_allclose(gas.surface.coordinate, 2.0 * factors)
  assert gas.surface.label == systems.RS and gas.geometries.positions.shape == (5, 0, 3)
  assert gas.lattice.volume == pytest.approx(14 * 4 * np.pi * 1.8 ** 3 / 3)


@pytest.mark.parametrize('overrides,message', [
    ({'system.molecule': H2}, 'scan.cell = True scans a periodic system.s cell; this system '
     'has none'),
    ({**LIH_CRYSTAL, 'system.scan.atoms': (0, 1)}, r'atoms = \(0, 1\) and cell = True ask for two'),
    ({**LIH_CRYSTAL, 'system.scan.start': None}, 'the scan of the cell needs the factor of its '
     'cell it starts at'),
    ({**LIH_CRYSTAL, 'system.scan.points': 0}, 'the scan is empty'),
    ({**LIH_CRYSTAL, 'system.states': 2}, 'not supported with several states'),
])
def test_bad_scans_of_a_cell_name_the_problem(overrides, message):
  with pytest.raises(InputError, match=message):
    build(molecule_config(**{**CELL_SCAN, **overrides}))


def test_the_settings_round_trip():
  """Declared keys (three levels deep for the scan), set in a config, the command line,
  a saved config.json and the resume check; a dry run resolves them."""
  cfg = config.default()
  cfg.system.atom, cfg.system.molecule = '', H2
  cfg.system.scan.atoms, cfg.system.scan.points = (0, 1), 4
  cfg.system.scan.start, cfg.system.scan.stop = 1.0, 2.5
  config.validate(cfg)
  assert systems.make_system(cfg.system).geometry_count == 4
  for key in ('system.geometries', 'system.scan.atoms', 'system.scan.start',
              'system.scan.stop', 'system.scan.points'):
    assert config.SETTINGS[key].structural and config.SETTINGS[key].doc
  back = config.from_json(cfg.to_dict())
  assert back.system.scan.atoms == (0, 1) and back.system.scan.points == 4
  assert config.structural_differences(cfg.to_dict(), back.to_dict()) == []
  changed = config.from_json(cfg.to_dict())
  changed.system.scan.points = 12
  assert config.structural_differences(cfg.to_dict(), changed.to_dict()) == [
      'system.scan.points: 4 -> 12']
  resolved = cli.resolve(['train', '--config', 'configs/h2_pes.py',
                          '--config.system.scan.points=3', '--config.system.scan.stop=2'])
  assert resolved.system.scan.points == 3 and resolved.system.scan.stop == 2.0
  assert resolved.system.exact_energy is None
  assert systems.make_system(resolved.system).geometry_count == 3
  listed = cli.resolve(['train', "--config.system.geometries=('H 0 0 0; H 0 0 1', "
                        "'H 0 0 0; H 0 0 2')", '--dry-run'])
  assert listed.system.atom == '' and len(listed.system.geometries) == 2  # Clears the atom.
  assert 'scan:' in plan.dry_run(cli.load_config_file('configs/lih_pes.py'))
