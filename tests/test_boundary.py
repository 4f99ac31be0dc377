"""The boundary conditions: open and periodic ones are hashable values, wrapping with open
boundaries adds nothing to a traced program, and the system's behaviour comes from its
boundary."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ferminet_fast import config
from ferminet_fast.physics import boundary, coulomb, lattice, systems


def _cube(side=4.0):
  return lattice.make_lattice(side * np.eye(3))


def test_boundaries_are_hashable_values():
  assert boundary.Open() == boundary.OPEN and hash(boundary.Open()) == hash(boundary.OPEN)
  a = boundary.Periodic(_cube(), (0.0, 0.0, 0.0))
  b = boundary.Periodic(_cube(), (1.0, 0.0, 0.0))  # The same boundary conditions.
  assert a == b and hash(a) == hash(b) and len({a, b, boundary.OPEN}) == 2
  assert a != boundary.Periodic(_cube(), (0.25, 0.0, 0.0))
  assert a != boundary.Periodic(_cube(5.0)) and a != boundary.OPEN
  with pytest.raises(AttributeError):
    a.twist = (0.5, 0.0, 0.0)


def test_open_boundaries():
  b = boundary.OPEN
  assert not b.periodic and not b.complex and b.lattice is None and not b.twists
  x = jnp.ones((2, 6))
  assert not jax.make_jaxpr(b.wrap)(x).eqns  # The identity: no op.
  assert b.coulomb(2, 1, jnp.float32) is coulomb.molecular_coulomb
  assert b.kpoints(3).shape == (0, 3) and all(b.allows(n) for n in ('s2', 'dipole'))
  with pytest.raises(ValueError):
    b.uniform_positions(jax.random.PRNGKey(0), (2, 3), jnp.float32)


def test_periodic_boundaries():
  b = boundary.Periodic(_cube(), (0.25, 0.0, 0.0))
  assert b.periodic and b.complex and b.twists
  x = jnp.asarray([[5.0, -1.0, 2.0, 9.0, 0.5, -4.5]])
  np.testing.assert_allclose(b.wrap(x), [[1.0, 3.0, 2.0, 1.0, 0.5, 3.5]], atol=1e-6)
  r = b.uniform_positions(jax.random.PRNGKey(0), (8, 3), jnp.float32)
  assert r.shape == (8, 3, 3) and bool(jnp.all((r >= 0) & (r < 4.0)))
  np.testing.assert_allclose(b.twist_vector(), [2 * np.pi * 0.25 / 4.0, 0, 0])
  assert len(b.kpoints(1)) == 1 and b.allows('s2') and not b.allows('dipole')
  assert not boundary.Periodic(_cube()).complex


def test_systems_carry_their_boundary():
  cfg = config.default()
  cfg.system.atom = 'Li'
  assert systems.make_system(cfg.system).boundary == boundary.OPEN
  cfg = config.default()
  cfg.system.atom, cfg.system.rs, cfg.system.electrons = '', 1.0, (7, 7)
  cfg.system.twist = (0.5, 0.0, 0.0)
  gas = systems.make_system(cfg.system)
  assert isinstance(gas.boundary, boundary.Periodic) and gas.lattice is gas.boundary.lattice
  assert gas.periodic and gas.complex and gas.twist == (0.5, 0.0, 0.0)
