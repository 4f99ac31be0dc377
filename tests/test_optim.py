"""Optimizers: KFAC, SPRING and Adam all lower the energy of He; SPRING's walker-space
solve equals the parameter-space natural gradient; learning-rate defaults; the
composition around every method (schedule, norm constraint, rejection of non-finite updates)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
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


@pytest.mark.jax_range
def test_learning_rate_defaults_follow_the_optimizer():
  cfg = config.default().optim
  assert optim.lr_schedule(optim.KFAC, cfg.lr)(0.0) == pytest.approx(0.05)
  assert optim.lr_schedule(optim.KFAC, cfg.lr)(1e4) == pytest.approx(0.025)
  cfg.lr.rate = 0.003
  assert optim.lr_schedule(optim.ADAM, cfg.lr)(1000.0) == pytest.approx(0.0015)


@pytest.mark.parametrize('groups', [1, 2])
@pytest.mark.jax_range
def test_spring_direction_is_the_damped_natural_gradient(groups):
  """With momentum 0 (MinSR) the B x B solve must equal the P x P one,
  d = (O^T O + damping I)^-1 O^T eps, with O the centred per-walker d log|psi| / sqrt(B)
  (the 11^T / B term does not change it: eps and the centred O are orthogonal to 1). With
  walkers of two geometries (groups, each walker with its own nuclei), O and eps are centred
  within each geometry."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('He', jnp.float64, **{
        'network.ferminet.hidden_dims': ((6, 2),), 'network.determinants': 1})
    cfg = config.default().optim
    cfg.optimizer, cfg.spring.momentum, cfg.spring.damping = 'spring', 0.0, 1e-3
    cfg.spring.norm_constraint, cfg.lr.rate = 1e10, 1.0  # Return the bare direction.
    b = 16
    x = jax.random.normal(jax.random.PRNGKey(0), (b, 3 * system.n_electrons), jnp.float64)
    e = jax.random.normal(jax.random.PRNGKey(1), (b,), jnp.float64).reshape(groups, -1)
    centred = (e - e.mean(1, keepdims=True)).reshape(b)
    atoms = None
    if groups > 1:  # The second geometry's nucleus 0.3 bohr off the origin.
      atoms = jnp.repeat(jnp.asarray([[[0.0, 0, 0]], [[0.3, 0, 0]]]), b // groups, axis=0)
    samples = optim.Samples(x, jax.random.PRNGKey(2), centred, None, atoms, groups)
    spring = optim.make_optimizer(optim.OPTIMIZERS[cfg.optimizer], cfg, network)
    updates, state = jax.jit(spring.update)(None, spring.init(params), params, samples=samples)
    flat, _ = jax.flatten_util.ravel_pytree(updates)

    def grad_at(xi, at):
      return jax.flatten_util.ravel_pytree(
          jax.grad(network.log_psi)(params, xi, *([] if at is None else [at])))[0]

    o = jnp.stack([grad_at(x[i], None if atoms is None else atoms[i]) for i in range(b)])
    o = o.reshape(groups, b // groups, -1)
    o = ((o - o.mean(1, keepdims=True)) / np.sqrt(b)).reshape(b, -1)
    eps = -samples.centred / np.sqrt(b)
    expected = jnp.linalg.solve(o.T @ o + 1e-3 * jnp.eye(o.shape[1]), o.T @ eps)
    np.testing.assert_allclose(flat, expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(optim.schedule_state(state).inner.previous, expected, rtol=1e-6,
                               atol=1e-9)
    # A descent direction: it lowers the energy to first order, <g, d> < 0 with g = -2 O^T eps.
    assert jnp.vdot(-2 * o.T @ eps, flat) < 0


def test_adam_is_optax_adam_with_our_schedule():
  """The composition (direction, schedule, rejection) is optax's own Adam step for step."""
  cfg = config.default().optim
  cfg.optimizer, cfg.lr.rate, cfg.lr.delay = 'adam', 0.1, 3.0
  ours = optim.make_optimizer(optim.OPTIMIZERS[cfg.optimizer], cfg, None)
  a = cfg.adam
  theirs = optax.adam(optim.lr_schedule(optim.ADAM, cfg.lr), b1=a.b1, b2=a.b2, eps=a.eps)
  params = {'w': jnp.array([1.0, -2.0, 3.0])}
  s_ours, s_theirs = ours.init(params), theirs.init(params)
  for t in range(5):
    grads = {'w': jnp.array([0.3, -1.0, 2.0]) * (t + 1) + params['w']}
    u_ours, s_ours = ours.update(grads, s_ours, params, samples=None)
    u_theirs, s_theirs = theirs.update(grads, s_theirs, params)
    np.testing.assert_allclose(u_ours['w'], u_theirs['w'], rtol=1e-6)
    assert float(optim.applied_lr(s_ours)) == pytest.approx(0.1 / (1 + t / 3.0))
    params = optax.apply_updates(params, u_ours)
  assert int(optim.applied_updates(s_ours)) == 5


@pytest.mark.jax_range
def test_rejected_update_keeps_the_state_and_the_schedule():
  """An update that would make a parameter non-finite changes nothing: zero update, the
  inner state and the counter kept, applied rate 0; the next update then applies the rate
  the counter says, which is the one recorded."""
  cfg = config.default().optim
  cfg.optimizer, cfg.lr.rate, cfg.lr.delay = 'sgd', 1.0, 1.0
  opt = optim.make_optimizer(optim.OPTIMIZERS[cfg.optimizer], cfg, None)
  params = {'w': jnp.array([1.0, 2.0])}
  state = opt.init(params)
  updates, state = opt.update({'w': jnp.array([1.0, 1.0])}, state, params)
  assert not bool(state.rejected) and int(optim.applied_updates(state)) == 1
  params = optax.apply_updates(params, updates)
  before = state
  updates, state = opt.update({'w': jnp.array([jnp.nan, 1.0])}, state, params)
  assert bool(state.rejected)
  np.testing.assert_array_equal(updates['w'], [0.0, 0.0])
  assert int(optim.applied_updates(state)) == 1 and float(optim.applied_lr(state)) == 0.0
  assert float(optim.learning_rate(state)) == float(optim.learning_rate(before))
  updates, state = opt.update({'w': jnp.array([1.0, 1.0])}, state, params)
  assert not bool(state.rejected)
  assert float(optim.applied_lr(state)) == pytest.approx(1.0 / (1 + 1 / 1.0))
  np.testing.assert_allclose(updates['w'], [-0.5, -0.5])


@pytest.mark.jax_range
def test_average_spans_a_fraction_of_the_updates():
  """The parameters evaluation uses: after update t, mean += (params_t - mean) / max(1, f t)
  over the parameters after each applied update, checked against the explicit weights
  (params_t's weight: its rate times the product of (1 - later rates)). The last
  parameters while f t <= 1, or with f = 0; none before the first update; a rejected
  update adds nothing."""
  for fraction in (0.0, 0.5):
    cfg = config.default().optim
    cfg.optimizer, cfg.lr.rate, cfg.lr.delay = 'sgd', 0.3, 2.0
    cfg.average_fraction = fraction
    opt = optim.make_optimizer(optim.OPTIMIZERS[cfg.optimizer], cfg, None)
    params = {'w': jnp.array([1.0, -2.0]), 'b': jnp.array(0.5)}
    state = opt.init(params)
    for name, value in optim.averaged_params(state, params).items():
      np.testing.assert_array_equal(value, params[name])
    seen = []
    for t in range(8):
      bad = t == 3
      grads = {'w': jnp.array([jnp.nan if bad else 1.0 + t, -t]), 'b': jnp.array(t - 2.0)}
      updates, state = opt.update(grads, state, params)
      assert bool(state.rejected) == bad
      params = optax.apply_updates(params, updates)
      if not bad:
        seen.append(params)
    rates = [1.0 / max(1.0, fraction * t) for t in range(1, len(seen) + 1)]
    weights = [r * np.prod([1 - q for q in rates[i + 1:]]) for i, r in enumerate(rates)]
    assert sum(weights) == pytest.approx(1.0)
    if fraction:
      assert weights[-1] == pytest.approx(1 / 3.5) and weights[0] == 0.0  # Spans ~3.5.
    for name in params:
      expected = sum(w * np.asarray(p[name]) for w, p in zip(weights, seen))
      np.testing.assert_allclose(optim.averaged_params(state, params)[name], expected,
                                 rtol=1e-6)
    assert optim.average_horizon(state, fraction) == max(1.0, fraction * len(seen))


@pytest.mark.jax_range
def test_norm_constraint_bounds_the_step():
  """KFAC's trust region: lr^2 <d, g> <= norm_constraint, the rate recorded the one applied."""
  direction = optax.identity()  # d = g: <d, g> = |g|^2.
  opt = optim.scaled_by_schedule(direction, lambda t: 1.0, norm_constraint=1e-2)
  params = {'w': jnp.zeros(4)}
  grads = {'w': jnp.full(4, 1.0)}  # |g|^2 = 4: lr = sqrt(1e-2 / 4) = 0.05.
  updates, state = opt.update(grads, opt.init(params), params)
  assert float(state.lr) == pytest.approx(0.05, rel=1e-6)
  np.testing.assert_allclose(updates['w'], -0.05, rtol=1e-6)


def _annealed_reference(t, rate, delay, decay, anneal, anneal_to, iterations):
  """The annealed schedule written out in NumPy (float64)."""
  t = np.asarray(t, np.float64)
  plain = rate * (1.0 + t / delay) ** -decay
  if anneal == 0:  # Off.
    return plain
  start = (1.0 - anneal) * iterations
  frac = np.clip((t - start) / (iterations - start), 0.0, 1.0)
  return plain * (anneal_to + (1.0 - anneal_to) * 0.5 * (1.0 + np.cos(np.pi * frac)))


def annealed(cfg_lr, method, iterations):
  """The schedule's rate times the annealing factor, (t, clock=None) -> rate."""
  plain, factor = optim.lr_schedule(method, cfg_lr), optim.anneal_factor(cfg_lr, iterations)
  return lambda t, clock=None: plain(t) * factor(t, clock)


def test_annealed_schedule_falls_along_a_half_cosine_over_the_last_steps():
  cfg = config.default().optim
  cfg.lr.rate, cfg.lr.delay, cfg.lr.anneal, cfg.lr.anneal_to = 0.02, 50.0, 0.25, 0.1
  ts = np.arange(0, 201, dtype=np.float32)
  plain = np.asarray(jax.vmap(optim.lr_schedule(optim.ADAM, cfg.lr))(ts))
  rates = np.asarray(jax.vmap(annealed(cfg.lr, optim.ADAM, 200))(ts))
  reference = _annealed_reference(ts, 0.02, 50.0, 1.0, 0.25, 0.1, 200)
  np.testing.assert_allclose(rates, reference, rtol=1e-5)
  np.testing.assert_allclose(rates[:151], plain[:151], rtol=1e-6)  # Before T0 = 150.
  assert rates[200] == pytest.approx(0.1 * plain[200], rel=1e-5)
  factor = rates / plain
  assert np.all(np.diff(factor) <= 1e-6) and factor[160] < 1.0  # Falls, never rises.


def test_anneal_zero_is_no_factor_and_the_plain_schedule():
  cfg = config.default().optim  # anneal = 0 by default.
  assert optim.anneal_factor(cfg.lr, 100) is None  # No factor in the step.
  ts = np.arange(0, 120, dtype=np.float32)
  np.testing.assert_allclose(jax.vmap(optim.lr_schedule(optim.KFAC, cfg.lr))(ts),
                             _annealed_reference(ts, 0.05, 1e4, 1.0, 0.0, 0.1, 100), rtol=1e-6)


def test_the_factor_shrinks_the_step_after_the_norm_bound():
  """A bound that sets the step (lr^2 |d|^2 = constraint): the annealed step is the bounded
  step times the factor, not the bound applied to an annealed rate (which would leave it
  unchanged while the annealed rate stays above the bound's)."""
  direction = optax.GradientTransformation(lambda p: optax.EmptyState(),
                                           lambda g, s, p=None: (g, s))
  params, grads = {'w': jnp.zeros(4)}, {'w': jnp.full(4, 10.0)}  # |d|^2 = 400.
  for clock, factor in ((0.0, 1.0), (1.0, 0.1)):
    opt = optim.scaled_by_schedule(direction, lambda t: 1.0, norm_constraint=1e-2,
                                   norm='euclidean',
                                   factor=lambda t, c: 1.0 - 0.9 * c)
    updates, state = opt.update(grads, opt.init(params), params, clock=jnp.float32(clock))
    bounded = np.sqrt(1e-2 / 400.0)  # The bound's rate: 0.005, far below the schedule's 1.
    assert float(state.lr) == pytest.approx(factor * bounded, rel=1e-5)
    np.testing.assert_allclose(updates['w'], -factor * bounded * 10.0, rtol=1e-5)


@pytest.mark.parametrize('optimizer', ['adam', 'kfac'])
def test_a_training_records_the_annealed_rates(tmp_path, optimizer):
  cfg = tiny_config('He', **{'optim.optimizer': optimizer, 'optim.iterations': 6,
                             'batch_size': 16, 'mcmc.burn_in': 2, 'optim.lr.rate': 0.01,
                             'optim.lr.delay': 10.0, 'optim.lr.anneal': 0.5,
                             'optim.lr.anneal_to': 0.2, 'optim.kfac.norm_constraint': 1e12,
                             'network.ferminet.hidden_dims': ((8, 4),),
                             'log.save_path': str(tmp_path / optimizer)})
  result = train.train(cfg, quiet=True)
  expected = _annealed_reference(np.arange(6), 0.01, 10.0, 1.0, 0.5, 0.2, 6)
  np.testing.assert_allclose(result.history['lr'], expected, rtol=1e-5)


def test_with_a_clock_the_schedule_anneals_towards_whichever_end_comes_first():
  """progress = max(t / iterations, clock): the factor of the steps' annealing taken at the
  further of the two, so a run whose time budget ends first anneals towards that end."""
  cfg = config.default().optim
  cfg.lr.rate, cfg.lr.delay, cfg.lr.anneal, cfg.lr.anneal_to = 0.02, 50.0, 0.4, 0.1
  schedule = annealed(cfg.lr, optim.ADAM, 200)
  plain = optim.lr_schedule(optim.ADAM, cfg.lr)
  for t, c in ((0.0, 0.0), (10.0, 0.5), (10.0, 0.8), (150.0, 0.7), (190.0, 0.2), (5.0, 1.0)):
    progress = max(t / 200, c)
    expected = _annealed_reference(np.float32(progress * 200), 0.02, 50.0, 1.0, 0.4, 0.1, 200)
    expected *= float(plain(t)) / float(plain(progress * 200))  # The plain rate at t itself.
    assert float(schedule(t, c)) == pytest.approx(float(expected), rel=1e-5), (t, c)
  assert float(schedule(100.0, 0.0)) == pytest.approx(float(schedule(100.0)), rel=1e-7)
  assert float(schedule(3.0, 1.0)) == pytest.approx(0.1 * float(plain(3.0)), rel=1e-6)


def _progress_of(factor, anneal_to):
  """The progress at which the half-cosine factor (anneal = 1) equals `factor`."""
  cos = np.clip(2.0 * (np.asarray(factor) - anneal_to) / (1.0 - anneal_to) - 1.0, -1.0, 1.0)
  return np.arccos(cos) / np.pi


def test_a_training_with_a_time_budget_anneals_its_rate_by_the_clock(tmp_path):
  """anneal = 1 over a 3 s budget, steps far from their limit: the rate falls from the
  schedule's to near anneal_to times it by the budget's end, and the progress each step's
  rate implies is the time the loop had spent before that step (its recorded step times)."""
  seconds, rate, anneal_to = 3.0, 0.01, 0.2
  cfg = tiny_config('He', **{'optim.iterations': 100000, 'optim.seconds': seconds,
                             'optim.lr.rate': rate, 'optim.lr.delay': 1e12,
                             'optim.lr.anneal': 1.0, 'optim.lr.anneal_to': anneal_to,
                             'batch_size': 16, 'mcmc.burn_in': 2,
                             'network.ferminet.hidden_dims': ((8, 4),),
                             'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  factor = np.asarray(result.history['lr']) / rate
  assert result.budget_step == len(factor) > 20
  assert factor[0] == pytest.approx(1.0, rel=1e-6)  # Nothing spent before the first step.
  assert np.all(np.diff(factor) <= 1e-6) and factor[-1] < anneal_to + 0.05
  spent = np.concatenate([[0.0], np.cumsum(result.history['step_time_ms'])[:-1] / 1e3]) / seconds
  np.testing.assert_allclose(_progress_of(factor, anneal_to), np.minimum(spent, 1.0), atol=0.08)


@pytest.mark.parametrize('optimizer', ['kfac', 'spring', 'sgd'])
def test_every_optimizer_anneals_by_the_clock_with_the_stage_timers_on(tmp_path, optimizer):
  """The clocked step through every other optimizer, its stages timed before the loop
  (which call the step with a clock of their own) and again during it."""
  cfg = tiny_config('He', **{'optim.optimizer': optimizer, 'optim.iterations': 100000,
                             'optim.seconds': 2.0, 'optim.lr.anneal': 1.0,
                             'optim.lr.rate': 1e-3, 'optim.lr.delay': 1e12,
                             'optim.kfac.norm_constraint': 1e12,
                             'optim.spring.norm_constraint': 1e12, 'batch_size': 16,
                             'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
                             'log.timers': True, 'log.timers_every': 5,
                             'log.save_path': str(tmp_path / optimizer)})
  result = train.train(cfg, quiet=True)
  lr = np.asarray(result.history['lr'])
  assert result.budget_step == len(lr) > 4 and np.all(np.diff(lr) <= 1e-9)
  assert lr[-1] < 0.2 * lr[0]


@pytest.mark.parametrize('optimizer', ['kfac', 'adam'])
def test_max_fisher_step_bounds_how_far_each_update_moves_psi(tmp_path, optimizer):
  """optim.max_fisher_step through the entry point: every update's length in the Fisher
  metric at the walkers, as the step measures it from log|psi| before and after
  (stats.csv's fisher_step), stays at the bound to leading order, where without the bound
  the same training's updates are longer. In float64, and short steps, so that what is left
  beyond leading order (relative, of the order of the step's length) is below 1%."""
  bound, runs = 1e-6, {}
  for cap in (0.0, bound):
    cfg = tiny_config('He', **{'optim.optimizer': optimizer, 'optim.iterations': 30,
                               'optim.max_fisher_step': cap, 'precision': 'float64',
                               'log.save_path': str(tmp_path / str(cap))})
    runs[cap] = np.asarray(train.train(cfg, quiet=True).history['fisher_step'])
  print(optimizer, np.median(runs[0.0]), runs[bound].max(), runs[bound].min())
  assert np.all(runs[bound] <= bound * 1.01), runs[bound].max()
  assert np.median(runs[0.0]) > 100 * bound
