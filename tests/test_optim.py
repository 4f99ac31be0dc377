"""Optimizers: KFAC, SPRING and Adam all lower the energy of He; SPRING's walker-space
solve equals the parameter-space natural gradient; learning-rate defaults."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_network
from ferminet_fast import config, train
from ferminet_fast.optimizers import optim


@pytest.mark.parametrize('optimizer', ['adam', 'kfac', 'spring'])
def test_optimizer_lowers_helium_energy(tmp_path, optimizer):
  cfg = tiny_config('He', **{'optim.optimizer': optimizer, 'optim.iterations': 150,
                             'batch_size': 128, 'log.save_path': str(tmp_path / optimizer)})
  result = train.train(cfg, quiet=True)
  e = result.history['energy']
  assert np.all(np.isfinite(e))
  assert e[-50:].mean() < e[:10].mean() - 0.05, (e[:10].mean(), e[-50:].mean())
  assert e[-50:].mean() > -2.9037 - 0.02  # Variational: not far below the exact energy.


def test_learning_rate_defaults_follow_the_optimizer():
  cfg = config.default().optim
  cfg.optimizer = 'kfac'
  assert optim.lr_schedule(cfg)(0.0) == pytest.approx(0.05)
  assert optim.lr_schedule(cfg)(1e4) == pytest.approx(0.025)
  cfg.optimizer = 'adam'
  cfg.lr.rate = 0.003
  assert optim.lr_schedule(cfg)(1000.0) == pytest.approx(0.0015)


def test_spring_direction_is_the_damped_natural_gradient():
  """With momentum 0 (MinSR) the B x B solve must equal the P x P one,
  d = (O^T O + damping I)^-1 O^T eps, with O the centred per-walker d log|psi| / sqrt(B)
  (the 11^T / B term does not change it: eps and the centred O are orthogonal to 1)."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('He', jnp.float64, **{
        'network.ferminet.hidden_dims': ((6, 2),), 'network.determinants': 1})
    cfg = config.default().optim
    cfg.optimizer, cfg.spring.momentum, cfg.spring.damping = 'spring', 0.0, 1e-3
    cfg.spring.norm_constraint, cfg.lr.rate = 1e10, 1.0  # Return the bare direction.
    b = 16
    x = jax.random.normal(jax.random.PRNGKey(0), (b, 3 * system.n_electrons), jnp.float64)
    e = jax.random.normal(jax.random.PRNGKey(1), (b,), jnp.float64)
    samples = optim.Samples(x, jax.random.PRNGKey(2), e - e.mean())
    spring = optim.make_optimizer(cfg, network)
    updates, state = spring.update(None, spring.init(params), params, samples=samples)
    flat, _ = jax.flatten_util.ravel_pytree(updates)

    o = jax.vmap(lambda xi: jax.flatten_util.ravel_pytree(
        jax.grad(network.log_psi)(params, xi))[0])(x)
    o = (o - o.mean(0)) / np.sqrt(b)
    eps = -samples.centred / np.sqrt(b)
    expected = jnp.linalg.solve(o.T @ o + 1e-3 * jnp.eye(o.shape[1]), o.T @ eps)
    np.testing.assert_allclose(flat, expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(state.previous, expected, rtol=1e-6, atol=1e-9)
    # A descent direction: it lowers the energy to first order, <g, d> < 0 with g = -2 O^T eps.
    assert jnp.vdot(-2 * o.T @ eps, flat) < 0
