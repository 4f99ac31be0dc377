"""Local energy: exact hydrogen, Laplacian methods against each other and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_network
from ferminet_fast import config
from ferminet_fast.physics import hamiltonian, systems

METHODS = sorted(hamiltonian.LAPLACIANS)  # folx comes with the test extra.
DENSE_METHODS = [m for m in METHODS if m != 'folx_sparse']


@pytest.mark.parametrize('method', METHODS)
def test_hydrogen_1s_local_energy_is_exact(method):
  """psi = exp(-r) is the hydrogen ground state: E_L = -0.5 Ha at every point."""
  cfg = config.default()
  cfg.system.atom = 'H'
  system = systems.make_system(cfg.system)
  log_psi = lambda params, x: -jnp.sum(jnp.linalg.norm(x.reshape(-1, 3), axis=-1))
  e_l = jax.jit(jax.vmap(hamiltonian.make_local_energy(log_psi, system, method),
                         in_axes=(None, 0)))
  x = jax.random.normal(jax.random.PRNGKey(0), (200, 3)) * 2.0
  np.testing.assert_allclose(e_l(None, x), -0.5, atol=2e-5)


@pytest.mark.parametrize('method', METHODS)
def test_helium_product_of_1s_orbitals(method):
  """psi = exp(-Z r1 - Z r2): E_L = -Z^2 + (Z - 2)(1/r1 + 1/r2) + 1/r12, analytically."""
  cfg = config.default()
  system = systems.make_system(cfg.system)  # He
  z = 1.6875
  log_psi = lambda params, x: -z * jnp.sum(jnp.linalg.norm(x.reshape(-1, 3), axis=-1))
  e_l = jax.jit(jax.vmap(hamiltonian.make_local_energy(log_psi, system, method),
                         in_axes=(None, 0)))
  x = jax.random.normal(jax.random.PRNGKey(1), (100, 6))
  r1, r2 = np.linalg.norm(x[:, :3], axis=1), np.linalg.norm(x[:, 3:], axis=1)
  r12 = np.linalg.norm(x[:, :3] - x[:, 3:], axis=1)
  expected = -z**2 + (z - 2) * (1 / r1 + 1 / r2) + 1 / r12
  np.testing.assert_allclose(e_l(None, x), expected, rtol=1e-4, atol=1e-4)


def _real_network(atom, **overrides):
  system, network, params = tiny_network(atom, jnp.float64, seed=3, **overrides)
  # Perturb the envelope and Jastrow away from their symmetric initial values.
  params = jax.tree.map(lambda p: p * (1 + 0.1 * jnp.sin(jnp.arange(p.size).reshape(p.shape))),
                        params)
  x = 0.8 * jax.random.normal(jax.random.PRNGKey(4), (3 * system.n_electrons,), jnp.float64)
  return network, params, x


# folx_sparse compiles for ~15 s per network here, so it is checked on the first case only.
@pytest.mark.parametrize('atom,overrides,methods', [
    ('Li', {}, METHODS),
    ('Be', {'network.full_det': False, 'network.envelope': 'full'}, DENSE_METHODS),
    ('He', {'network.network_type': 'psiformer', 'network.psiformer.layers': 1,
            'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4}, DENSE_METHODS),
])
def test_laplacian_methods_agree_with_finite_differences(atom, overrides, methods):
  with jax.enable_x64(True):
    network, params, x = _real_network(atom, **overrides)
    f = lambda y: network.log_psi(params, y)
    results = {m: jax.jit(hamiltonian.LAPLACIANS[m](f))(x) for m in methods}
    h = 1e-4
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    plus, minus = jax.jit(jax.vmap(f))(x + h * eye), jax.jit(jax.vmap(f))(x - h * eye)
    fd_lap = jnp.sum(plus - 2 * f(x) + minus) / h**2
    fd_grad = (plus - minus) / (2 * h)
    for m, (lap, grad) in results.items():
      np.testing.assert_allclose(lap, fd_lap, rtol=1e-5, err_msg=m)
      np.testing.assert_allclose(grad, fd_grad, rtol=1e-6, atol=1e-8, err_msg=m)
    laps = [float(r[0]) for r in results.values()]
    np.testing.assert_allclose(laps, laps[0], rtol=1e-10)


def test_potential_energy_of_a_known_configuration():
  system = systems.make_system(tiny_config('Li').system)
  x = jnp.array([1.0, 0, 0, 0, 2.0, 0, 0, 0, -4.0])
  # V_en = -3 (1 + 1/2 + 1/4); V_ee = 1/sqrt(5) + 1/sqrt(17) + 1/sqrt(20).
  expected = -3 * 1.75 + 1 / np.sqrt(5) + 1 / np.sqrt(17) + 1 / np.sqrt(20)
  v = hamiltonian.potential_energy(x, jnp.asarray(system.positions), jnp.asarray(system.charges),
                                   system.nuclear_repulsion)
  np.testing.assert_allclose(v, expected, rtol=1e-6)


def test_nuclear_repulsion_of_lih():
  cfg = tiny_config()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  np.testing.assert_allclose(systems.make_system(cfg.system).nuclear_repulsion, 3 / 3.015)
