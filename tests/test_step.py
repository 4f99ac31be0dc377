"""The jitted step and the loop around it: nothing compiled after the first step, chunked
energies equal unchunked, Laplacian auto-choice."""

import dataclasses

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

import faults
from conftest import tiny_config
from ferminet_fast import plan, train
from ferminet_fast.physics import geometries, hamiltonian, laplacians, systems
from ferminet_fast.runtime import profiling
from ferminet_fast.vmc import loss, step


@pytest.fixture(scope='module')
def run():
  cfg = tiny_config('Li')
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  laplacian, _ = plan.laplacian_of(cfg, network, system, jax.random.PRNGKey(0), time_auto=False)
  parts = plan.make_parts(cfg, system, network, laplacian)
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
  compiled = step.compile_step(parts, state)
  state = step.burn_in(compiled, state, 20, cfg.mcmc.steps)
  return cfg, system, parts, compiled, state


class _Compilations:
  """Records every XLA compilation (a persistent-cache hit included) while `on`, with the
  number of training steps called so far."""

  def __init__(self):
    self.on, self.calls, self.seen = False, 0, []
    jax.monitoring.register_event_duration_secs_listener(self._event)

  def _event(self, name, duration, **kwargs):
    if self.on and name == '/jax/core/compile/backend_compile_duration':
      self.seen.append((self.calls, kwargs.get('fun_name')))


_compilations = _Compilations()


@pytest.mark.jax_range
def test_training_loop_never_compiles_after_its_first_step(tmp_path):
  """The real loop of train.train, 40 steps with per-step records, printed lines,
  checkpoints every 4 steps, snapshots every 5 and two rewinds (NaN put into the parameters
  twice), compiles nothing after its first step but the rewind's re-seeding of the random
  stream, once, at the first rewind: a compilation per step (or per checkpoint, record or
  rewind) would cost more than the step itself."""
  inject_at, calls_at_rewind, last = {8, 24}, [], [-1]

  def wrap(train_step):
    def wrapped(state):
      t = int(state.step)
      if _compilations.calls and t <= last[0]:
        calls_at_rewind.append(_compilations.calls)
      last[0] = t
      if t in inject_at:  # The test's own fault injection is not the loop's compilation.
        inject_at.discard(t)
        on, _compilations.on = _compilations.on, False
        state = faults.inject_nan(state, 'params')
        _compilations.on = on
      out = train_step(state)
      _compilations.calls += 1
      return out
    return wrapped

  cfg = tiny_config('He', **{'optim.iterations': 40, 'log.save_path': str(tmp_path / 'run'),
                             'log.save_every': 4, 'log.save_frequency': 0.0,
                             'log.print_every': 5, 'optim.snapshot_every': 5,
                             'optim.rewind_after': 2})
  _compilations.seen.clear()
  _compilations.calls, _compilations.on = 0, True
  try:
    with faults.injected(wrap):
      result = train.train(cfg, quiet=True)
  finally:
    _compilations.on = False
  assert result.timings['rewinds'] == 2 and len(calls_at_rewind) == 2
  assert _compilations.calls > 40 + 2 * 2  # Repeated steps after each rewind included.
  # Each compilation is attributed to the number of steps called before it: the start-up's
  # (0; seen, so the events are heard), and the one allowed, between the step that
  # triggered the first rewind and the next step.
  assert any(c == 0 for c, _ in _compilations.seen)
  later = [(c, name) for c, name in _compilations.seen if c > 0]
  assert [c for c, _ in later if c != calls_at_rewind[0]] == [], later
  assert len(later) <= 1, later


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
  local_energy = hamiltonian.of(system, laplacians.JACFWD).local_energy(parts.network.log_psi)
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
  candidates = [m.name for m in laplacians.available() if m.timed]
  assert len(candidates) >= 2
  fake_ms = iter([3.0, 1.0, 2.0][:len(candidates)])
  monkeypatch.setattr(profiling, '_median_ms', lambda fn, repeats: (fn(), next(fake_ms))[1])
  method, times = profiling.choose_laplacian(parts.network, system, state.params,
                                             state.walkers.x, repeats=1)
  assert list(times) == candidates
  assert method.name == candidates[1]


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
  assert float(stats.update_norm) == 0.0
  assert float(stats.fisher_step) == 0.0 and float(stats.model_step) == 0.0
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new.params),
                                                  jax.tree.leaves(good_params)))
  assert all(np.all(np.isfinite(a)) for a in jax.tree.leaves(new.params))


def h2_at(bond: float, **overrides):
  """(cfg, system) of H2 along z with the given bond length (bohr), float64, tiny network."""
  cfg = tiny_config('H', **{'system.atom': '', 'system.molecule': f'H 0 0 0; H 0 0 {bond}',
                            'system.units': 'bohr', 'precision': 'float64', 'batch_size': 16,
                            **overrides})
  return cfg, systems.make_system(cfg.system)


def parts_of(cfg, system, chunk_size=0):
  network = plan.network_of(cfg.network, system, jnp.float64)
  return plan.make_parts(cfg, system, network, laplacians.JACFWD, chunk_size=chunk_size)


BONDS = (1.0, 1.4, 2.2)  # bohr


# Across JAX versions with Adam: KFAC's pass with a geometry per walker is the step's below.
@pytest.mark.parametrize('optimizer', [pytest.param('adam', marks=pytest.mark.jax_range),
                                       'kfac'])
def test_one_compiled_energy_grad_serves_a_batch_of_geometries(optimizer):
  """jax.vmap of one Parts.energy_grad over a stack of H2 geometries (three bond lengths)
  gives, for each, the energy, local energies and gradient of Parts built for a System with
  its nuclei there, the same parameters and walkers. With KFAC the gradient is its fused
  curvature pass's."""
  with jax.enable_x64(True):
    built = [h2_at(b, **{'optim.optimizer': optimizer}) for b in BONDS]
    cfg, system = built[1]
    parts = parts_of(cfg, system)
    params = parts.network.init(jax.random.PRNGKey(0))
    x = (jax.random.normal(jax.random.PRNGKey(1), (16, 6), jnp.float64)
         + jnp.asarray([0, 0, 0.0, 0, 0, 1.4]))
    stack = systems.Geometry(jnp.stack([jnp.asarray(s.positions) for _, s in built]))
    (e, aux), grads, _ = jax.jit(jax.vmap(parts.energy_grad, in_axes=(None, None, 0)))(
        params, x, stack)
    for i, (cfg_i, system_i) in enumerate(built):
      (e_i, aux_i), grads_i, _ = jax.jit(parts_of(cfg_i, system_i).energy_grad)(params, x)
      np.testing.assert_allclose(aux.local_energy[i], aux_i.local_energy, rtol=1e-10)
      np.testing.assert_allclose(e[i], e_i, rtol=1e-10)
      jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b, rtol=1e-8, atol=1e-12),
                   grads, grads_i)
    assert len({round(float(v), 6) for v in e}) == len(BONDS)  # The geometry mattered.


@pytest.mark.parametrize('optimizer', [pytest.param('kfac', marks=pytest.mark.jax_range),
                                       'spring'])
def test_train_step_with_a_geometry_is_the_step_of_the_system_built_there(optimizer):
  """Parts.train_step given a geometry as data gives the state of the step whose positions
  are constants (float64, to rounding): at the system's own geometry that of the same
  Parts without one, at a stretched H2 that of Parts built for it (the same state in). The
  optimizers' own passes through the network (SPRING's per-walker gradients) move too."""
  with jax.enable_x64(True):
    cfg, system = h2_at(1.4, **{'optim.optimizer': optimizer})
    cfg_there, stretched = h2_at(2.0, **{'optim.optimizer': optimizer})
    parts = parts_of(cfg, system)
    state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
    train_step = jax.jit(parts.train_step)
    there = jax.jit(parts_of(cfg_there, stretched).train_step)
    for geometry, fixed in ((system.geometry, train_step), (stretched.geometry, there)):
      want, want_stats = fixed(state)
      got, got_stats = train_step(state, geometry)
      jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12),
                   (got, got_stats), (want, want_stats))
      assert float(want_stats.lr) > 0


def h2_surface(optimizer: str, **overrides):
  """H2 over BONDS as one system (its surface), with the Parts of each bond length alone."""
  built = [h2_at(b, **{'optim.optimizer': optimizer}, **overrides) for b in BONDS]
  cfg, system = built[1]
  stack = np.stack([s.positions for _, s in built])
  return cfg, dataclasses.replace(system, surface=geometries.Surface(stack)), built


def trimmed_length(change) -> float:
  """Twice the mean squared deviation of the walkers' changes from their median, the
  largest 1% (at least one) left out: the step's robust length in the Fisher metric."""
  terms = np.sort((change - np.median(change))**2)
  return 2 * np.mean(terms[:len(terms) - int(np.ceil(0.01 * len(terms)))])


def test_surface_step_lowers_the_mean_of_the_energies_at_each_geometry():
  """The train step over a set of geometries: each geometry's energy is that of the Parts
  built there at its own walkers (after the step's sweep, each chain with its own width),
  and the update (SGD's) is params - lr * the mean of those Parts' gradients. (KFAC's pooled
  curvature and SPRING's per-geometry centring: tests/test_kfac.py, tests/test_optim.py.)"""
  optimizer = 'sgd'
  with jax.enable_x64(True):
    cfg, system, built = h2_surface(optimizer, batch_size=24)
    parts = parts_of(cfg, system)
    state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
    assert state.walkers.width.shape == (len(BONDS),)
    new, stats = jax.jit(parts.train_step)(state)
    xs = new.walkers.x.reshape(len(BONDS), -1, 6)
    grads = []
    for i, (cfg_i, system_i) in enumerate(built):
      (e_i, _), g_i, _ = jax.jit(parts_of(cfg_i, system_i).energy_grad)(state.params, xs[i])
      np.testing.assert_allclose(stats.energies[i], e_i, rtol=1e-10)
      grads.append(g_i)
    np.testing.assert_allclose(stats.energy, np.mean(stats.energies), rtol=1e-12)
    assert len({round(float(v), 6) for v in stats.energies}) == len(BONDS)
    assert float(stats.lr) > 0 and not int(stats.rejected)
    mean = jax.tree.map(lambda *g: sum(g) / len(g), *grads)
    want = jax.tree.map(lambda p, g: p - stats.lr * g, state.params, mean)
    length = np.sqrt(sum(np.sum(np.asarray(g) ** 2) for g in jax.tree.leaves(mean)))
    np.testing.assert_allclose(stats.grad_norm, length, rtol=1e-9)  # SGD: the step is lr g.
    np.testing.assert_allclose(stats.update_norm, stats.lr * length, rtol=1e-9)
    np.testing.assert_allclose(stats.model_step, stats.update_norm**2, rtol=1e-9)  # SGD's.
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12),
                 new.params, want)
    # The realised length: each walker's change of log|psi| at its own nuclei.
    log_psi = [parts_of(*built_i).batch_log_psi for built_i in built]
    change = np.concatenate([f(new.params, xs[i]) - f(state.params, xs[i])
                             for i, f in enumerate(log_psi)])
    np.testing.assert_allclose(stats.fisher_step, trimmed_length(change), rtol=1e-8)


def test_fisher_step_is_the_update_length_in_the_dense_fisher_metric():
  """Small KFAC steps of H2 (float64, rate 1e-6): the third step's fisher_step, from the
  walkers' changes of log|psi|, is u^T F u for the update applied u and the Fisher matrix
  F = (2 / B) J^T J of log|psi| from the walkers' dense Jacobian (to leading order in u,
  so to about 1e-4 here), both over the same walkers (trimmed_length); model_step,
  KFAC's own estimate of it from its block-diagonal curvature, is positive and within the
  norm constraint."""
  with jax.enable_x64(True):
    cfg, system = h2_at(1.4, **{'optim.optimizer': 'kfac', 'optim.lr.rate': 1e-6})
    parts = parts_of(cfg, system)
    state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
    train_step = jax.jit(parts.train_step)
    for _ in range(2):
      state, _ = train_step(state)
    new, stats = train_step(state)
    flat, unravel = jax.flatten_util.ravel_pytree(state.params)
    u = jax.flatten_util.ravel_pytree(new.params)[0] - flat
    jac = jax.jacobian(lambda p: parts.batch_log_psi(unravel(p), new.walkers.x))(flat)
    np.testing.assert_allclose(stats.fisher_step, trimmed_length(jac @ u), rtol=2e-3)
    assert 0 < float(stats.model_step) <= cfg.optim.kfac.norm_constraint * (1 + 1e-9)


def test_a_step_over_drawn_geometries_trains_on_those_alone():
  """optim.geometries_per_step = 2 of three H2 geometries: the step sweeps the two drawn
  chains (their energies those of the Parts built there at their new walkers, NaN for the
  third), leaves the third chain as it was, and SGD's update is params - lr * the mean of
  the drawn Parts' gradients. Over steps every geometry is drawn."""
  with jax.enable_x64(True):
    cfg, system, built = h2_surface('sgd', batch_size=24, **{'optim.geometries_per_step': 2})
    parts = parts_of(cfg, system)
    state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
    train_step = jax.jit(parts.train_step)
    new, stats = train_step(state)
    drawn = np.flatnonzero(~np.isnan(stats.energies))
    assert len(drawn) == 2 and np.isnan(stats.fisher_step)  # Not refreshed: not measured.
    (waiting,) = set(range(len(BONDS))) - set(drawn)
    xs, old = new.walkers.x.reshape(len(BONDS), -1, 6), state.walkers.x.reshape(len(BONDS), -1, 6)
    np.testing.assert_array_equal(xs[waiting], old[waiting])
    assert new.walkers.width[waiting] == state.walkers.width[waiting]
    grads = []
    for i in drawn:
      assert not np.allclose(xs[i], old[i])
      cfg_i, system_i = built[i]
      (e_i, _), g_i, _ = jax.jit(parts_of(cfg_i, system_i).energy_grad)(state.params, xs[i])
      np.testing.assert_allclose(stats.energies[i], e_i, rtol=1e-10)
      grads.append(g_i)
    np.testing.assert_allclose(stats.energy, np.mean(stats.energies[drawn]), rtol=1e-12)
    mean = jax.tree.map(lambda *g: sum(g) / len(g), *grads)
    want = jax.tree.map(lambda p, g: p - stats.lr * g, state.params, mean)
    length = np.sqrt(sum(np.sum(np.asarray(g) ** 2) for g in jax.tree.leaves(mean)))
    np.testing.assert_allclose(stats.grad_norm, length, rtol=1e-9)  # SGD: the step is lr g.
    np.testing.assert_allclose(stats.update_norm, stats.lr * length, rtol=1e-9)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12),
                 new.params, want)
    seen = set(drawn)
    for _ in range(8):
      new, stats = train_step(new)
      seen |= set(np.flatnonzero(~np.isnan(stats.energies)))
    assert seen == set(range(len(BONDS)))


@pytest.mark.parametrize('drawn', [0, 2])
def test_a_surface_step_in_chunks_is_the_step_at_once(drawn):
  """Over three H2 geometries (8 walkers each), a run's chunk of 6 walkers is shared among
  the geometries whose local energies are computed together (2 walkers of each of the
  three; 3 of each of two drawn, which leaves a remainder): the step is the one without
  chunks, to rounding, and so are the energies that evaluation takes from Parts.energy."""
  assert loss.chunk_per_geometry(6, 3) == 2 and loss.chunk_per_geometry(0, 3) == 0
  assert loss.chunk_per_geometry(16, 1) == 16 and loss.chunk_per_geometry(2, 3) == 1
  with jax.enable_x64(True):
    cfg, system, _ = h2_surface('kfac', batch_size=24, **{'optim.geometries_per_step': drawn})
    whole, chunked = parts_of(cfg, system), parts_of(cfg, system, chunk_size=6)
    state = step.init_state(whole, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
    want = jax.jit(whole.train_step)(state)
    got = jax.jit(chunked.train_step)(state)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12),
                 got, want)
    xs = state.walkers.x.reshape(len(BONDS), -1, 6)
    stack = whole.geometries
    each = [jax.jit(jax.vmap(p.energy, in_axes=(None, 0, 0)))(state.params, xs, stack)
            for p in (whole, chunked)]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12), *each)
