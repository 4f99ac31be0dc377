"""runtime/profiling.py: the stage timers time the step's own computations, over a set of
geometries too (each chain at its own nuclei, as many geometries as the step sweeps)."""

import json

import jax
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import plan, train
from ferminet_fast.physics import systems
from ferminet_fast.runtime import profiling
from ferminet_fast.vmc import step
from test_train_geometries import BONDS, h2_scan


def surface_setup(cfg):
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  laplacian, _ = plan.laplacian_of(cfg, network, system, jax.random.PRNGKey(0), time_auto=False)
  parts = plan.make_parts(cfg, system, network, laplacian)
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(1))
  return parts, state


@pytest.mark.parametrize('drawn', [0, 2])
def test_a_surface_stage_is_each_swept_geometry_energy_at_its_nuclei(tmp_path, drawn):
  """The energy stage of a surface gives, for each geometry the step sweeps, the energy of
  that geometry's chain at that geometry's nuclei (Parts.energy with the geometry given),
  not every walker at the system's own nuclei; the update stage takes its output."""
  cfg = h2_scan(tmp_path / 'run', **{'optim.geometries_per_step': drawn})
  parts, state = surface_setup(cfg)
  stages = profiling._stage_functions(parts)
  (e, aux), grads, curvature = jax.jit(stages['energy_grad_ms'])(state)
  swept = drawn or len(BONDS)
  assert e.shape == (swept,) and parts.swept == swept
  xs = state.walkers.x.reshape(len(BONDS), -1, state.walkers.x.shape[-1])
  for g in range(swept):
    geometry = jax.tree.map(lambda a: a[g], parts.geometries)
    e_g, _ = jax.jit(parts.energy)(state.params, xs[g], geometry)
    np.testing.assert_allclose(e[g], e_g, rtol=1e-5)
  at_own = jax.jit(parts.energy)(state.params, xs[swept - 1])[0]
  assert abs(float(at_own) - float(e[-1])) > 1e-3  # The system's own nuclei: another bond.
  params, _ = jax.jit(stages['optimizer_ms'])(state, grads, aux.centred, curvature)
  assert all(np.all(np.isfinite(p)) for p in jax.tree.leaves(params))
  log_psi = jax.jit(stages['forward_ms'])(state)
  np.testing.assert_allclose(log_psi, state.walkers.log_psi, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('drawn', [0, 2])
def test_a_surface_sampling_stage_sweeps_each_swept_chain_at_its_nuclei(tmp_path, drawn):
  """The sampling stage of a surface sweeps the chains of the geometries the step sweeps,
  no more: each moved chain's carried log|psi| is the network's at that geometry's nuclei,
  and it differs from the same walkers' at the system's own."""
  cfg = h2_scan(tmp_path / 'run', **{'optim.geometries_per_step': drawn})
  parts, state = surface_setup(cfg)
  if drawn:  # Chains that waited carry log|psi| of older parameters: the stage recomputes it.
    state = state._replace(walkers=state.walkers._replace(log_psi=state.walkers.log_psi + 1e3))
  chains, pmove = jax.jit(profiling._stage_functions(parts)['mcmc_ms'])(state)
  swept = drawn or len(BONDS)
  per = state.walkers.x.shape[0] // len(BONDS)
  assert chains.x.shape == (swept, per, state.walkers.x.shape[-1]) and pmove.shape == (swept,)
  assert chains.width.shape == (swept,) and np.all(pmove > 0)
  start = state.walkers.x.reshape(len(BONDS), per, -1)
  assert not np.allclose(chains.x, start[:swept])
  if drawn:  # The first chains were swept, not others.
    moved = np.mean(np.abs(chains.x - start[:swept]))
    assert moved < 0.5 * np.mean(np.abs(chains.x - start[-swept:]))
  for g in range(swept):
    geometry = jax.tree.map(lambda a, g=g: a[g], parts.geometries)
    at_g = jax.jit(parts.batch_log_psi)(state.params, chains.x[g], step.each_walker(
        jax.tree.map(lambda a: a[None], geometry), per))
    np.testing.assert_allclose(chains.log_psi[g], at_g, rtol=1e-5, atol=1e-5)
  at_own = jax.jit(parts.batch_log_psi)(state.params, chains.x[swept - 1])
  assert np.max(np.abs(at_own - chains.log_psi[-1])) > 1e-3


@pytest.mark.jax_range
def test_a_surface_trains_with_the_stage_timers_on(tmp_path):
  cfg = h2_scan(tmp_path / 'run', **{'log.timers': True, 'log.timers_every': 2,
                                     'optim.geometries_per_step': 2})
  train.train(cfg, quiet=True)
  timings = json.loads((tmp_path / 'run' / 'timings.json').read_text())
  for key in ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms'):
    assert timings[key] > 0, key


def test_one_geometry_stages_unchanged(tmp_path):
  """One geometry's energy stage is Parts.energy_grad on all walkers."""
  cfg = tiny_config('He', batch_size=16)
  parts, state = surface_setup(cfg)
  assert parts.swept == 1 and parts.surface_energy_grad is None and parts.surface_sample is None
  (e, _), _, _ = jax.jit(profiling._stage_functions(parts)['energy_grad_ms'])(state)
  np.testing.assert_allclose(e, jax.jit(parts.energy)(state.params, state.walkers.x)[0],
                             rtol=1e-6)
