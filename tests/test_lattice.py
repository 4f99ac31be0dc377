"""The lattice (physics/lattice.py) and the periodic settings: reciprocal vectors, bad
lattices refused, supercells, wrapping, k-shells of the electron gas, and the System of a
crystal and of the electron gas built from the settings."""

import itertools

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config
from ferminet_fast.physics import lattice, systems

pytestmark = pytest.mark.jax_range

TRICLINIC = [[4.0, 0.3, -0.2], [0.8, 3.6, 0.4], [-0.5, 0.7, 4.4]]


def test_reciprocal_vectors_and_volume():
  cell = lattice.make_lattice(TRICLINIC)
  np.testing.assert_allclose(cell.vectors @ cell.reciprocal.T, 2 * np.pi * np.eye(3),
                             atol=1e-12)
  a = np.asarray(TRICLINIC)
  assert cell.volume == pytest.approx(np.dot(a[0], np.cross(a[1], a[2])))


@pytest.mark.parametrize('vectors,message', [
    ([[1, 0, 0], [0, 1, 0], [1, 1, 0]], 'linearly dependent'),
    ([[1, 0, 0], [0, 0, 1], [0, 1, 0]], 'left-handed'),
    ([[1, 0, 0], [0, 1, 0]], 'three finite vectors'),
    ([[1, 0, 0], [0, 1, 0], [0, 0, float('nan')]], 'three finite vectors'),
])
def test_bad_lattices_are_refused(vectors, message):
  with pytest.raises(InputError, match=message):
    lattice.make_lattice(vectors)


def test_supercell_copies_the_atoms_to_each_cell():
  primitive = lattice.make_lattice(TRICLINIC)
  matrix = [[1, 1, 0], [-1, 1, 0], [0, 0, 2]]  # Not diagonal; 4 cells.
  cell, s = lattice.supercell(primitive, matrix)
  assert cell.volume == pytest.approx(4 * primitive.volume)
  symbols, positions = lattice.replicate(primitive, s, ('Li', 'H'),
                                         np.array([[0.1, 0.1, 0.1], [2.0, 1.8, 2.2]]))
  assert symbols == ('Li', 'H') * 4
  # Each copy differs from the original by a primitive lattice vector, and no two copies
  # coincide modulo the supercell.
  frac_prim = lattice.fractional(primitive, positions[0::2] - positions[0])
  np.testing.assert_allclose(frac_prim, np.round(frac_prim), atol=1e-9)
  lattice.check_nuclei(cell, symbols, positions)
  with pytest.raises(InputError, match='determinant'):
    lattice.supercell(primitive, (1, 0, 2))


def test_wrap_moves_positions_into_the_cell_by_lattice_vectors():
  cell = lattice.make_lattice(TRICLINIC)
  r = np.random.default_rng(0).normal(scale=20.0, size=(50, 3))
  wrapped = lattice.wrap(cell, r)
  s = lattice.fractional(cell, wrapped)
  assert np.all((s >= 0) & (s < 1))
  shift = lattice.fractional(cell, r - wrapped)
  np.testing.assert_allclose(shift, np.round(shift), atol=1e-9)


def test_nuclei_overlapping_after_wrapping_are_refused():
  cell = lattice.make_lattice(4.0 * np.eye(3))
  with pytest.raises(InputError, match='same position once wrapped'):
    lattice.check_nuclei(cell, ('H', 'H'), np.array([[0.5, 0, 0], [4.5, 4.0, -8.0]]))


def test_k_shells_of_the_simple_cubic_cell():
  """Plane waves of a cube fill shells of 1, 6, 12, 8, 6, 24 (|n|^2 = 0..5): the closed
  shells hold 1, 7, 19, 27, 33, 57 electrons of one spin."""
  cube = lattice.make_lattice(3.0 * np.eye(3))
  sizes = [len(lattice.k_shells(cube, n)) for n in (1, 2, 7, 8, 19, 20, 27, 28, 33, 34)]
  assert sizes == [1, 7, 7, 19, 19, 27, 27, 33, 33, 57]
  assert lattice.is_closed_shell(cube, 7) and not lattice.is_closed_shell(cube, 8)
  k = lattice.k_shells(cube, 7)
  np.testing.assert_allclose(np.sort(np.linalg.norm(k, axis=1)),
                             [0] + [2 * np.pi / 3.0] * 6)


def test_k_shells_at_a_twist():
  """At a twist the wavevectors are G + k_s: at (0, 0, 1/2) of a cube the lowest shell is the
  pair (0, 0, +-pi/L), then eight; at a general twist every shell is one wavevector, so
  `count` of them are returned, each a reciprocal-lattice vector away from k_s, sorted by
  length, and no shorter G + k_s is left out."""
  side = 3.0
  cube = lattice.make_lattice(side * np.eye(3))
  g = 2 * np.pi / side
  half = lattice.k_shells(cube, 1, (0, 0, 0.5))
  np.testing.assert_allclose(half, [[0, 0, -g / 2], [0, 0, g / 2]])
  assert len(lattice.k_shells(cube, 3, (0, 0, 0.5))) == 10
  assert lattice.is_closed_shell(cube, 2, (0, 0, 0.5))
  cell = lattice.make_lattice([[3.0, 0.2, 0.0], [0.1, 2.8, 0.3], [0.0, -0.2, 3.3]])
  twist = np.array([0.1, 0.27, -0.31])
  k = lattice.k_shells(cell, 7, twist)
  assert k.shape == (7, 3)
  n = (k - twist @ cell.reciprocal) @ np.linalg.inv(cell.reciprocal)
  np.testing.assert_allclose(n, np.round(n), atol=1e-9)
  length = np.linalg.norm(k, axis=1)
  assert np.all(np.diff(length) > 0)
  grid = np.array(list(itertools.product(range(-4, 5), repeat=3)))
  every = np.sort(np.linalg.norm((grid + twist) @ cell.reciprocal, axis=1))
  np.testing.assert_allclose(length, every[:7])


@pytest.mark.parametrize('cell', lattice.CELLS)
def test_electron_gas_cell_has_the_volume_of_rs(cell):
  box = lattice.electron_gas(2.0, cell, 14)
  assert box.volume == pytest.approx(14 * 4 * np.pi * 2.0**3 / 3)


def _heg(**overrides):
  return tiny_config('', **{'system.rs': 1.0, 'system.electrons': (7, 7),
                            'network.envelope': 'auto', **overrides})


def test_the_electron_gas_system():
  cfg = _heg()
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.periodic and system.electrons == (7, 7) and len(system.charges) == 0
  assert system.lattice.vectors[0, 0] == pytest.approx((14 * 4 * np.pi / 3) ** (1 / 3))
  assert 'electron gas' in systems.describe(system)


def test_a_crystal_system_from_its_primitive_cell_and_supercell():
  cfg = tiny_config('', **{'system.molecule': 'Li 0 0 0; H 2 0 0',
                           'system.lattice': ((0, 2, 2), (2, 0, 2), (2, 2, 0)),
                           'system.supercell': (2, 1, 1), 'network.envelope': 'planewave'})
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.symbols == ('Li', 'H') * 2 and system.electrons == (4, 4)
  assert system.lattice.volume == pytest.approx(2 * 16.0)
  assert system.exact_energy is None and 'periodic' in systems.describe(system)


@pytest.mark.parametrize('overrides,message', [
    ({'system.twist': (0.5, 0.0, 0.0), 'optim.optimizer': 'spring'},
     'does not support the complex wavefunction'),
    ({'system.periodic_dims': 2}, 'for crystals'),
    ({'system.periodic_dims': 1}, 'for crystals'),
    ({'network.envelope': 'isotropic'}, 'not for the electron gas'),
    ({'pretrain.iterations': 10}, 'needs none'),
    ({'system.states': 2}, 'not supported yet'),
])
def test_unsupported_periodic_settings_are_one_clear_error(overrides, message):
  with pytest.raises(InputError, match=message):
    config.validate(_heg(**overrides))


def test_a_crystal_at_a_twist_is_complex_and_refuses_spring():
  """A crystal takes any twist (a complex wavefunction, described as such); an optimizer that
  cannot train a complex wavefunction is one clear error there, as for the electron gas."""
  cfg = tiny_config('', **{'system.molecule': 'Li 0 0 0; H 2 0 0',
                           'system.lattice': ((0, 2, 2), (2, 0, 2), (2, 2, 0)),
                           'system.twist': (0.5, 0, 0), 'network.envelope': 'auto'})
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.complex and 'twist (0.5, 0, 0), complex' in systems.describe(system)
  cfg.optim.optimizer = 'spring'
  with pytest.raises(InputError, match='does not support the complex wavefunction'):
    config.validate(cfg)


def test_a_twist_is_the_gamma_point_when_its_components_are_integers():
  cfg = _heg(**{'system.twist': (1.0, 0.0, -2.0)})
  config.validate(cfg)
  assert not systems.make_system(cfg.system).complex
  twisted = systems.make_system(_heg(**{'system.twist': (0.25, 0, 0)}).system)
  assert twisted.complex and 'twist (0.25, 0, 0)' in systems.describe(twisted)


def test_bad_periodic_settings_are_refused():
  with pytest.raises(InputError, match='planewave.*is for periodic'):
    config.validate(tiny_config('He', **{'network.envelope': 'planewave'}))
  with pytest.raises(InputError, match='system.lattice'):
    config.validate(tiny_config('He', **{'system.lattice': ((1, 0), (0, 1))}))
  with pytest.raises(InputError, match='no atom'):
    systems.make_system(_heg(**{'system.atom': 'H'}).system)
  with pytest.raises(InputError, match='needs config.system.electrons'):
    systems.make_system(_heg(**{'system.electrons': ()}).system)
  crystal = tiny_config('', **{'system.molecule': 'H 0 0 0; H 1 1 1',
                               'system.lattice': ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
                               'network.envelope': 'auto'})
  with pytest.raises(InputError, match='same position once wrapped'):
    systems.make_system(crystal.system)
  crystal.network.envelope = 'full'
  with pytest.raises(InputError, match="'full' is not for a crystal"):
    config.validate(crystal)


SLAB = {'system.molecule': 'H 0 0 -0.7; H 0 0 0.7', 'system.units': 'bohr',
        'system.lattice': ((3.6, 0, 0), (0, 3.6, 0), (0, 0, 12.0)), 'system.periodic_dims': 2,
        'network.envelope': 'auto'}
CHAIN = {'system.molecule': 'H 0 0 0; H 1.8 0 0', 'system.units': 'bohr',
         'system.lattice': ((3.6, 0, 0), (0, 12.0, 0), (0, 0, 12.0)), 'system.periodic_dims': 1,
         'network.envelope': 'auto'}


def test_a_slab_system_is_periodic_in_its_plane():
  cfg = tiny_config('', **{**SLAB, 'system.supercell': (2, 1, 1)})
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.lattice.dims == 2 and system.electrons == (2, 2)
  assert 'slab' in systems.describe(system)
  wrapped = lattice.wrap(system.lattice, np.array([[-1.0, 8.0, 30.0]]))
  np.testing.assert_allclose(wrapped, [[6.2, 0.8, 30.0]])  # z is not wrapped.


def test_a_chain_system_is_periodic_along_its_axis():
  cfg = tiny_config('', **{**CHAIN, 'system.supercell': (3, 1, 1)})
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.lattice.dims == 1 and system.electrons == (3, 3)
  assert len(system.symbols) == 6 and 'chain' in systems.describe(system)
  wrapped = lattice.wrap(system.lattice, np.array([[-1.0, 30.0, -20.0]]))
  np.testing.assert_allclose(wrapped, [[9.8, 30.0, -20.0]])  # y and z are not wrapped.


@pytest.mark.parametrize('cell,overrides,message', [
    (SLAB, {'system.twist': (0.0, 0.0, 0.5)},
     'open along its third lattice vector, so the twist is 0'),
    (SLAB, {'system.charge': 1}, 'a slab must be neutral'),
    (SLAB, {'system.lattice': ((3.6, 0, 0), (0, 3.6, 0), (0.5, 0, 12.0))}, 'a3 along z'),
    (SLAB, {'system.supercell': (1, 1, 2)}, 'repeats only along a1 and a2'),
    (SLAB, {'system.lattice': ()}, 'needs a crystal'),
    (SLAB, {'network.envelope': 'planewave'}, 'slab needs'),
    (CHAIN, {'system.twist': (0.0, 0.5, 0.0)},
     'open along its second and third lattice vectors'),
    (CHAIN, {'system.charge': 1}, 'a chain must be neutral'),
    (CHAIN, {'system.lattice': ((3.6, 0, 0), (0.3, 12.0, 0), (0, 0, 12.0))}, 'a1 along x'),
    (CHAIN, {'system.supercell': (2, 2, 1)}, 'repeats only along a1'),
    (CHAIN, {'network.envelope': 'planewave'}, 'chain needs'),
])
def test_bad_slabs_and_chains_are_one_clear_error(cell, overrides, message):
  cfg = tiny_config('', **{**cell, **overrides})
  with pytest.raises(InputError, match=message):
    config.validate(cfg)
    systems.make_system(cfg.system)
