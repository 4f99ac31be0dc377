"""The custom VMC gradient against an independent per-walker computation; clipping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import hamiltonian, loss, networks, systems


@pytest.mark.parametrize('clip_k', [0.0, 1.0])
def test_gradient_is_covariance_of_energy_and_log_psi_gradient(clip_k):
  with jax.enable_x64(True):
    _check_gradient(clip_k)


def _check_gradient(clip_k):
  cfg = tiny_config('He')
  system = systems.make_system(cfg.system)
  network = networks.make_network(cfg.network, system, jnp.float64)
  params = network.init(jax.random.PRNGKey(0))
  x = jax.random.normal(jax.random.PRNGKey(1), (32, 6), jnp.float64)
  local_energy = hamiltonian.make_local_energy(network.log_psi, system, 'jvp_loop')
  energy = loss.make_energy(network.log_psi, local_energy, 'median_absdev', clip_k)
  (e, aux), grad = jax.jit(jax.value_and_grad(energy, has_aux=True))(params, x)

  e_l = jax.jit(jax.vmap(local_energy, (None, 0)))(params, x)
  np.testing.assert_allclose(e, jnp.mean(e_l), rtol=1e-10)
  np.testing.assert_allclose(aux.variance, jnp.var(e_l), rtol=1e-10)
  weights = loss.clip_median_absdev(e_l, clip_k) if clip_k else e_l
  if clip_k:
    assert np.sum(np.asarray(weights) != np.asarray(e_l)) > 0  # Clipping was active.
  per_walker = jax.jit(jax.vmap(jax.grad(network.log_psi), (None, 0)))(params, x)
  centred = weights - jnp.mean(weights)
  expected = jax.tree.map(
      lambda g: 2 * jnp.tensordot(centred, g, axes=1) / x.shape[0], per_walker)
  for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize('method', sorted(loss.CLIPPING))
def test_clipping_keeps_the_bulk_and_bounds_outliers(method):
  e = jnp.concatenate([jnp.linspace(-1.0, 1.0, 99), jnp.array([1000.0])])
  clipped = loss.CLIPPING[method](e, 5.0)
  assert float(clipped.max()) < 1000.0
  bulk = np.abs(np.asarray(e)) < 0.5
  np.testing.assert_array_equal(np.asarray(clipped)[bulk], np.asarray(e)[bulk])
