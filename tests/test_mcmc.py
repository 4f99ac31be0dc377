"""MCMC: samples a known density; one network evaluation per step; width adaptation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import plan
from ferminet_fast.physics import systems
from ferminet_fast.vmc import mcmc, stats

pytestmark = pytest.mark.jax_range


def hydrogen_log_psi(params, x):
  del params
  return -jnp.linalg.norm(x, axis=-1)  # psi = exp(-r); |psi|^2 = exp(-2 r) / pi.


def test_hydrogen_1s_radial_moments():
  """<r> = 3/2 and <r^2> = 3 bohr^2 under exp(-2r), within 4 standard errors."""
  steps = 5
  sweep = jax.jit(mcmc.make_sweep(hydrogen_log_psi, steps))
  key = jax.random.PRNGKey(0)
  x = jax.random.normal(key, (2000, 3))
  walkers = mcmc.Walkers(x, hydrogen_log_psi(None, x), jnp.asarray(0.02))
  for i in range(30):  # Burn-in with adaptation.
    walkers, pmove = sweep(None, walkers, jax.random.fold_in(key, i))
    walkers = walkers._replace(width=mcmc.adapt_width(walkers.width, pmove, 0.5, 1.0))
  assert abs(float(pmove) - 0.5) < 0.1
  r_means, r2_means = [], []
  for i in range(200):
    walkers, _ = sweep(None, walkers, jax.random.fold_in(key, 1000 + i))
    r = np.linalg.norm(np.asarray(walkers.x), axis=-1)
    r_means.append(r.mean())
    r2_means.append((r**2).mean())
  r_est, r2_est = stats.reblock(r_means), stats.reblock(r2_means)
  assert abs(r_est.mean - 1.5) < 4 * r_est.error, r_est
  assert abs(r2_est.mean - 3.0) < 4 * r2_est.error, r2_est
  assert r_est.error < 0.01  # The test has power: it would see a 1% bias.


def test_one_network_evaluation_per_step():
  calls = []

  def counting_log_psi(params, x):
    jax.debug.callback(lambda: calls.append(1))
    return hydrogen_log_psi(params, x)

  steps = 7
  sweep = jax.jit(mcmc.make_sweep(counting_log_psi, steps))
  x = jnp.ones((16, 3))
  walkers = mcmc.Walkers(x, hydrogen_log_psi(None, x), jnp.asarray(0.3))
  jax.block_until_ready(sweep(None, walkers, jax.random.PRNGKey(0)))
  jax.effects_barrier()
  assert len(calls) == steps


def test_carried_log_psi_matches_positions():
  sweep = jax.jit(mcmc.make_sweep(hydrogen_log_psi, 4))
  x = jax.random.normal(jax.random.PRNGKey(1), (64, 3))
  walkers = mcmc.Walkers(x, hydrogen_log_psi(None, x), jnp.asarray(0.5))
  walkers, pmove = sweep(None, walkers, jax.random.PRNGKey(2))
  np.testing.assert_allclose(walkers.log_psi, hydrogen_log_psi(None, walkers.x), rtol=1e-6)
  assert 0 < pmove < 1


def test_width_adapts_toward_target_acceptance():
  assert mcmc.adapt_width(jnp.asarray(0.1), jnp.asarray(0.9), 0.5, 1.0) > 0.1
  assert mcmc.adapt_width(jnp.asarray(0.1), jnp.asarray(0.1), 0.5, 1.0) < 0.1
  assert mcmc.adapt_width(jnp.asarray(0.1), jnp.asarray(0.5), 0.5, 1.0) == 0.1


def test_initial_walkers_sit_on_their_nuclei():
  cfg = tiny_config()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  system = systems.make_system(cfg.system)
  homes = systems.electron_homes(system)
  assert sorted(homes.tolist()) == [0, 0, 0, 1]  # Three electrons on Li, one on H.
  assert len(homes) == system.n_electrons
  x = mcmc.init_positions(jax.random.PRNGKey(0), system, 4000, 0.5)
  centres = np.asarray(x).reshape(4000, -1, 3).mean(axis=0)
  np.testing.assert_allclose(centres, system.positions[homes], atol=0.05)


def test_wrapped_moves_sample_the_uniform_density_of_a_periodic_cell():
  """|psi|^2 constant in a skewed cell: with every proposal wrapped into the cell the walkers
  stay inside and their fractional coordinates become uniform (mean 1/2, variance 1/12,
  within 5 standard errors of 4000 independent samples)."""
  from ferminet_fast.physics import lattice
  cfg = tiny_config('', **{'system.molecule': 'H 0 0 0',
                           'system.lattice': ((3.0, 0.4, 0), (0, 2.5, 0.3), (0.2, 0, 2.8)),
                           'network.envelope': 'auto'})
  system = systems.make_system(cfg.system)
  flat = lambda params, x: jnp.zeros(x.shape[0], x.dtype)
  sweep = jax.jit(mcmc.make_sweep(flat, 20, system.boundary.wrap))
  x = jnp.zeros((4000, 3))
  walkers = mcmc.Walkers(x, flat(None, x), jnp.asarray(1.5))
  walkers, pmove = sweep(None, walkers, jax.random.PRNGKey(0))
  assert pmove == 1.0
  s = np.asarray(lattice.fractional(system.lattice, walkers.x))
  assert np.all((s >= 0) & (s < 1 + 1e-6))
  n = s.shape[0]
  np.testing.assert_allclose(s.mean(axis=0), 0.5, atol=5 * np.sqrt(1 / 12 / n))
  np.testing.assert_allclose(s.var(axis=0), 1 / 12, atol=5 * np.sqrt(1 / 180 / n))


def test_sweep_with_a_geometry_is_the_sweep_of_the_system_built_there():
  """One network's sweep given a geometry as data equals the fixed sweep (positions traced
  as constants) of the network built for a System with its nuclei there: at the system's
  own geometry, and at a stretched H2 (same parameters, walkers and key)."""
  from ferminet_fast.vmc import loss

  def built(bond):
    cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                              'system.molecule': f'H 0 0 0; H 0 0 {bond}'})
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system)
    return system, jax.jit(mcmc.make_sweep(loss.batch_network(network.log_psi), 5)), network

  system, sweep, network = built(1.4)
  stretched, stretched_sweep, _ = built(2.0)
  params = network.init(jax.random.PRNGKey(0))
  key = jax.random.PRNGKey(1)
  x = mcmc.init_positions(key, system, 32, 1.0)
  walkers = mcmc.Walkers(x, jax.vmap(network.log_psi, in_axes=(None, 0))(params, x),
                         jnp.asarray(0.3))
  for geometry, fixed in ((system.geometry, sweep), (stretched.geometry, stretched_sweep)):
    expected, p_expected = fixed(params, walkers, key)
    got, p_got = sweep(params, walkers, key, geometry)
    np.testing.assert_allclose(got.x, expected.x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.log_psi, expected.log_psi, rtol=1e-5, atol=1e-5)
    assert float(p_got) == float(p_expected)


def test_walkers_stuck_at_nan_restart_from_the_first_healthy_one():
  """A walker at a NaN position or with a non-finite log|psi| takes the state of the first
  healthy walker; healthy ones are untouched; with none healthy nothing changes."""
  x = jnp.arange(12.0).reshape(4, 3)
  log_psi = jnp.array([-jnp.inf, 1.0, 2.0, 3.0])
  x = x.at[3, 1].set(jnp.nan)
  out = mcmc.replace_nonfinite(mcmc.Walkers(x, log_psi, jnp.asarray(0.1)))
  np.testing.assert_array_equal(out.x, np.array([[3, 4, 5], [3, 4, 5], [6, 7, 8], [3, 4, 5.]]))
  np.testing.assert_array_equal(out.log_psi, [1.0, 1.0, 2.0, 1.0])
  dead = mcmc.Walkers(jnp.full((2, 3), jnp.nan), jnp.array([jnp.nan, 1.0]), jnp.asarray(0.1))
  same = mcmc.replace_nonfinite(dead)
  np.testing.assert_array_equal(np.isnan(same.x), True)
  np.testing.assert_array_equal(same.log_psi, dead.log_psi)


def test_cycled_walkers_stay_with_their_own_chain():
  """G chains of W walkers in a row, resized to W' per chain: chain g's walkers are chain g's
  own repeated in turn (or its first W'), with log|psi| alongside and the widths kept."""
  g, w, d = 3, 4, 6
  x = np.arange(g * w * d, dtype=np.float32).reshape(g * w, d)
  walkers = mcmc.Walkers(x, x[:, 0].copy(), np.array([0.1, 0.2, 0.3], np.float32))
  for per_chain in (10, 2):
    out = mcmc.cycled(walkers, g, per_chain)
    assert out.x.shape == (g * per_chain, d)
    for k in range(g):
      own = x[k * w:(k + 1) * w]
      got = out.x[k * per_chain:(k + 1) * per_chain]
      np.testing.assert_array_equal(got, own[np.arange(per_chain) % w])
    np.testing.assert_array_equal(out.log_psi, out.x[:, 0])
    np.testing.assert_array_equal(out.width, walkers.width)
