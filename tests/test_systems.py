"""Systems: elements, ground-state spins, geometry parsing and unit conversion, bad input."""

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, systems


@pytest.mark.parametrize('atom,electrons', [
    ('H', (1, 0)), ('He', (1, 1)), ('Li', (2, 1)), ('Be', (2, 2)), ('B', (3, 2)),
    ('C', (4, 2)), ('N', (5, 2)), ('O', (5, 3)), ('F', (5, 4)), ('Ne', (5, 5)),
])
def test_ground_state_spins(atom, electrons):
  system = systems.make_system(tiny_config(atom).system)
  assert system.electrons == electrons
  assert system.exact_energy == systems.EXACT_ATOM_ENERGY[atom]


def test_ion_and_explicit_spin():
  cfg = tiny_config('Li').system
  cfg.charge = 1
  system = systems.make_system(cfg)
  assert system.electrons == (1, 1) and system.exact_energy is None  # Li+ is He-like.
  cfg = tiny_config('C').system
  cfg.spin = 0
  assert systems.make_system(cfg).electrons == (3, 3)


def test_molecule_in_angstrom():
  cfg = tiny_config().system
  cfg.atom = ''
  cfg.molecule = 'H 0 0 0; H 0 0 0.74'
  cfg.units = 'angstrom'
  system = systems.make_system(cfg)
  np.testing.assert_allclose(system.positions[1, 2], 0.74 / 0.529177210903)
  assert system.electrons == (1, 1) and system.name == 'H2'
  np.testing.assert_allclose(system.nuclear_repulsion, 0.529177210903 / 0.74)


@pytest.mark.parametrize('changes,message', [
    ({'atom': 'Xx'}, 'unknown element'),
    ({'atom': 'he'}, "did you mean 'He'"),
    ({'atom': '', 'molecule': 'H 0 0 0; Q 0 0 1'}, "unknown element symbol 'Q'"),
    ({'atom': '', 'molecule': 'H 0 0; H 0 0 1'}, 'SYMBOL x y z'),
    ({'atom': '', 'molecule': 'H 0 0 0; H 0 0 a'}, 'not numbers'),
    ({'atom': '', 'molecule': 'H 0 0 0; H 0 0 0'}, 'same position'),
    ({'atom': ''}, 'exactly one of atom'),
    ({'molecule': 'H 0 0 0'}, 'exactly one of atom'),
    ({'electrons': (2, 2)}, 'holds 4 electrons'),
    ({'electrons': (1, 1), 'spin': 2}, 'has spin 0'),
    ({'spin': 1}, 'impossible'),
    ({'charge': 2}, 'leaves 0 electrons'),
    ({'electrons': (0, 2)}, 'majority spin'),
])
def test_bad_systems_name_the_problem(changes, message):
  cfg = tiny_config('He').system
  for k, v in changes.items():
    cfg[k] = v
  with pytest.raises(InputError, match=message):
    systems.make_system(cfg)
