"""The jitted step: compiled once, chunked energies equal unchunked, Laplacian auto-choice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import config
from ferminet_fast.physics import hamiltonian, systems
from ferminet_fast.run import profiling
from ferminet_fast.vmc import loss, step
from ferminet_fast.wavefunction import networks

_events = []
_recording = [False]
jax.monitoring.register_event_duration_secs_listener(
    lambda name, duration, **kw: _events.append(name) if _recording[0] else None)


@pytest.fixture(scope='module')
def run():
  cfg = tiny_config('Li')
  system = systems.make_system(cfg.system)
  network = networks.make_network(cfg.network, system)
  parts = step.make_parts(system, network, cfg.mcmc, cfg.optim,
                          config.resolve_laplacian(cfg.optim.laplacian))
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
  compiled = step.compile_step(parts, state)
  state = step.burn_in(compiled, state, 20, cfg.mcmc.steps)
  return cfg, system, parts, compiled, state


def test_training_loop_never_compiles_again(run):
  _, _, _, compiled, state = run
  state = jax.tree.map(jnp.copy, state)  # The step donates its input; keep the fixture's.
  jax.block_until_ready(state)
  _events.clear()
  _recording[0] = True
  try:
    for _ in range(10):
      state, stats = compiled.train_step(state)
      jax.device_get(stats)
  finally:
    _recording[0] = False
  assert not [e for e in _events if 'backend_compile' in e], _events
  assert int(state.step) == 10


def test_carried_log_psi_is_the_new_parameters_after_a_step(run):
  _, _, parts, compiled, state = run
  state = jax.tree.map(jnp.copy, state)
  state, _ = compiled.train_step(state)
  np.testing.assert_allclose(state.walkers.log_psi,
                             parts.batch_log_psi(state.params, state.walkers.x), rtol=1e-5)


@pytest.mark.parametrize('chunk', [24, 16])
def test_chunked_local_energies_equal_unchunked(run, chunk):
  """In float64, so that the comparison is of the chunking, not of float32 rounding. 24
  leaves a remainder (contiguous chunks); 16 divides the batch (strided chunks)."""
  _, system, parts, _, state = run
  local_energy = hamiltonian.make_local_energy(parts.network.log_psi, system, 'jacfwd')
  with jax.enable_x64(True):
    params, x = jax.tree.map(lambda a: np.asarray(a, np.float64), (state.params, state.walkers.x))
    full = jax.jit(loss.batch_local_energies(local_energy))(params, x)
    chunked = jax.jit(loss.batch_local_energies(local_energy, chunk))(params, x)
  assert bool(x.shape[0] % chunk) == (chunk == 24)
  np.testing.assert_allclose(chunked, full, rtol=1e-11, atol=1e-11)


def test_auto_laplacian_times_every_candidate_and_takes_the_fastest(run, monkeypatch):
  """Each available candidate is compiled and run; the one measured fastest is chosen (the
  clock is replaced by a fixed table, so the choice does not depend on the machine)."""
  _, system, parts, _, state = run
  candidates = [m for m in profiling.AUTO_CANDIDATES if m in hamiltonian.available_laplacians()]
  assert len(candidates) >= 2
  fake_ms = iter([3.0, 1.0, 2.0][:len(candidates)])
  monkeypatch.setattr(profiling, '_median_ms', lambda fn, repeats: (fn(), next(fake_ms))[1])
  method, times = profiling.choose_laplacian(parts.network, system, state.params,
                                             state.walkers.x, repeats=1)
  assert list(times) == candidates
  assert method == candidates[1]


def test_update_that_would_make_parameters_nan_is_rejected(run):
  _, _, _, compiled, state = run
  state = jax.tree.map(jnp.copy, state)
  good_params = jax.tree.map(jnp.copy, state.params)
  # Poison the walkers' energies: a walker at a nucleus-free infinity gives finite values, so
  # instead poison the optimizer: a NaN learning-rate state makes the update NaN.
  poisoned = state._replace(opt_state=jax.tree.map(
      lambda a: jnp.full_like(a, jnp.nan) if jnp.issubdtype(a.dtype, jnp.floating) else a,
      state.opt_state))
  new, stats = compiled.train_step(poisoned)
  assert int(stats.rejected) == 1
  assert float(stats.lr) == 0.0  # What was applied, not the schedule's value.
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new.params),
                                                  jax.tree.leaves(good_params)))
  assert all(np.all(np.isfinite(a)) for a in jax.tree.leaves(new.params))
