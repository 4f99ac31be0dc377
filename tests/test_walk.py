"""Fixed-node DMC (diffusion/walk.py) against exact results: exact eigenstates as trial functions
give their eigenvalue with zero variance and sample |psi|^2 exactly (detailed balance), no
walker crosses a node, and for a nodeless ground state (He) DMC reaches the exact energy
from a trial function VMC leaves well above it. With an ECP, the T-moves' probabilities are
the sign-obeying quadrature elements, jumps happen with them, the local energy splits
exactly into the T-move one and the sign-obeying part, and without a non-local part the
T-moves are the locality approximation draw for draw."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ferminet_fast import config, plan
from ferminet_fast.physics import hamiltonian, laplacians, systems
from ferminet_fast.diffusion import stage
from ferminet_fast.diffusion import walk
from ferminet_fast.vmc import mcmc, stats
from ferminet_fast.wavefunction import base

HE_EXACT = -2.903724  # Ha; Pekeris, Phys. Rev. 115, 1216 (1959).


def analytic_network(signed_log, n_coords: int) -> base.Network:
  """A Network of the analytic trial function `signed_log(params, x (3N,)) -> (sign, log|psi|)`
  (the nuclei fixed at the origin: `atoms` is ignored)."""
  apply = lambda p, x, atoms=None: signed_log(p, x)  # noqa: E731
  log_psi = lambda p, x, atoms=None: signed_log(p, x)[1]  # noqa: E731
  return base.Network(init=lambda key: {}, apply=apply, log_psi=log_psi, orbitals=None,
                      instrumented=None, n_coords=n_coords, dtype=jnp.float64)


def atom(symbol: str) -> systems.System:
  cfg = config.default()
  cfg.system.atom = symbol
  return systems.make_system(cfg.system)


def run_dmc(network, system, x0, tau, steps, equilibration, key=0, e0=0.0, moves=None):
  """(step energies after equilibration, the last state, the step stats); `moves`: a record
  of walk.MOVES (None: make_step's default, all-electron moves)."""
  evaluate = walk.make_evaluate(network, hamiltonian.of(system, laplacians.JACFWD))
  move = moves and moves(evaluate, walk.make_psi(network), tau)
  step = jax.jit(walk.make_step(evaluate, tau, system.n_electrons, equilibration, move))
  state = walk.init_state(evaluate, {}, x0, jax.random.PRNGKey(key), e0)
  energies, history = [], []
  for i in range(equilibration + steps):
    state, out = step({}, state)
    if i >= equilibration:
      energies.append(out.energy)
      history.append(out)
  return np.asarray(jax.device_get(energies)), state, jax.device_get(history)


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def hydrogen_1s():
  return analytic_network(lambda p, x: (jnp.ones((), x.dtype), -jnp.linalg.norm(x)), 3)


@pytest.mark.jax_range
def test_limit_drift_formula():
  tau = 0.1
  v = jnp.asarray([3.0, 0.0, 4.0, 1e-5, 0.0, 0.0])  # two electrons: |v| = 5 and tiny
  out = np.asarray(walk.limit_drift(v, tau))
  expected = (np.sqrt(1 + 2 * 25 * tau) - 1) / (25 * tau)
  np.testing.assert_allclose(out[:3], np.asarray(v[:3]) * expected, rtol=1e-12)
  np.testing.assert_allclose(out[3:], np.asarray(v[3:]), rtol=1e-9)
  huge = np.asarray(walk.limit_drift(jnp.asarray([1e6, 0.0, 0.0]), tau))
  np.testing.assert_allclose(huge[0], np.sqrt(2 / tau), rtol=1e-3)  # The bound sqrt(2/tau).


@pytest.mark.jax_range
def test_limit_energy_is_symmetric_cutoff():
  e = jnp.asarray([-10.0, -2.1, -1.0, 5.0])
  np.testing.assert_allclose(walk.limit_energy(e, -2.0, 0.5), [-2.5, -2.1, -1.5, -1.5])


@pytest.mark.jax_range
def test_comb_keeps_shape_and_weighted_mean():
  key = jax.random.PRNGKey(3)
  w = jax.random.exponential(key, (64,))
  f = jax.random.normal(jax.random.PRNGKey(4), (64,))
  exact = float(jnp.sum(w * f) / jnp.sum(w))
  means = []
  for i in range(400):
    idx = walk.comb(jax.random.PRNGKey(100 + i), w)
    assert idx.shape == (64,)
    counts = np.bincount(np.asarray(idx), minlength=64)
    share = 64 * np.asarray(w) / float(jnp.sum(w))
    assert np.all(np.abs(counts - share) < 1 + 1e-9)  # floor or ceil of B w_i / sum w.
    means.append(float(jnp.mean(f[idx])))
  mean, err = np.mean(means), np.std(means, ddof=1) / np.sqrt(len(means))
  assert abs(mean - exact) < 4 * err + 1e-12


@pytest.mark.jax_range
def test_hydrogen_ground_state_is_exact_and_sampled_exactly():
  """psi = exp(-r) is H's ground state: E_L = -1/2 everywhere, so every step gives -1/2 with
  zero variance at any tau, and the walk (uniform weights) samples |psi|^2 exactly:
  <r> = 3/2, <r^2> = 3 bohr^2, even at a large tau (the accept/reject's detailed balance)."""
  system = atom('H')
  x0 = 1.5 * jax.random.normal(jax.random.PRNGKey(0), (512, 3))
  energies, state, history = run_dmc(hydrogen_1s(), system, x0, 0.2, 300, 100)
  np.testing.assert_allclose(energies, -0.5, atol=1e-10)
  radii = []
  evaluate = walk.make_evaluate(hydrogen_1s(), hamiltonian.of(system, laplacians.JACFWD))
  step = jax.jit(walk.make_step(evaluate, 0.2, 1, 0))
  for _ in range(400):
    state, _ = step({}, state)
    radii.append(np.linalg.norm(np.asarray(state.walkers.x), axis=-1))
  radii = np.asarray(radii)  # (steps, walkers)
  for power, exact in ((1, 1.5), (2, 3.0)):
    est = stats.reblock(np.mean(radii ** power, axis=1))
    assert abs(est.mean - exact) < 4 * est.error, (power, est)
  assert 0.3 < history[-1].acceptance < 1.0
  assert history[-1].tau_eff < 0.2  # Rejections shorten the effective time step.


def test_acceptance_falls_with_the_time_step_and_large_ones_are_named():
  """Hydrogen's exact trial: the moves accept nearly always at a small time step (the
  drift-diffusion Green's function is exact to O(tau^2) for it), and ever less as tau grows;
  the run names the time steps whose acceptance says they are too large."""
  system = atom('H')
  x0 = 1.5 * jax.random.normal(jax.random.PRNGKey(0), (512, 3))
  per_tau = []
  for tau in (0.002, 0.05, 0.5):
    _, _, history = run_dmc(hydrogen_1s(), system, x0, tau, 50, 50)
    per_tau.append({'tau': tau, 'acceptance': float(np.mean([h.acceptance for h in history]))})
  acceptance = [r['acceptance'] for r in per_tau]
  assert acceptance[0] > 0.99 and acceptance[0] > acceptance[1] > acceptance[2], acceptance
  assert acceptance[2] < stage.LOW_ACCEPTANCE, acceptance
  warnings = stage.time_step_warnings(per_tau)
  assert len(warnings) == 1 and warnings[0].startswith('tau 0.5:'), warnings


@pytest.mark.jax_range
def test_no_walker_crosses_the_node():
  """psi = z exp(-r/2), H's 2p_z state: E_L = -1/8 exactly, and each walker keeps the sign of
  z it started with (moves across the nodal plane z = 0 are rejected)."""
  net = analytic_network(
      lambda p, x: (jnp.sign(x[2]), jnp.log(jnp.abs(x[2])) - 0.5 * jnp.linalg.norm(x)), 3)
  x0 = 3.0 * jax.random.normal(jax.random.PRNGKey(1), (256, 3))
  energies, state, _ = run_dmc(net, atom('H'), x0, 0.5, 200, 0)
  np.testing.assert_allclose(energies, -0.125, atol=1e-9)
  signs0, signs = np.sign(np.asarray(x0[:, 2])), np.sign(np.asarray(state.walkers.x[:, 2]))
  # Equal weights (E_L is the same everywhere): the comb keeps every walker in its place, so
  # each walker's side of the node is that of its start.
  np.testing.assert_array_equal(signs, signs0)
  assert np.all(signs == np.asarray(state.walkers.sign))


def helium_trial(b: float = 0.5):
  """exp(-2 r1 - 2 r2 + r12 / (2 (1 + b r12))): hydrogenic 1s^2 with both cusps and a Pade
  Jastrow; nodeless. Its VMC energy is about 20 mHa above the exact one."""
  def signed_log(p, x):
    r = x.reshape(2, 3)
    r1, r2 = jnp.linalg.norm(r, axis=-1)
    r12 = jnp.linalg.norm(r[0] - r[1])
    return jnp.ones((), x.dtype), -2.0 * (r1 + r2) + r12 / (2.0 * (1.0 + b * r12))
  return analytic_network(signed_log, 6)


@pytest.mark.jax_range
def test_a_block_of_steps_is_those_steps_in_turn():
  """walk.make_block: n steps in one call give the states and results of n calls of the
  step (He, the nodeless trial, electron moves with branching), whatever n; rows after n
  are zeros."""
  system = atom('He')
  net = helium_trial()
  evaluate = walk.make_evaluate(net, hamiltonian.of(system, laplacians.JACFWD))
  move = walk.ELECTRON(evaluate, walk.make_psi(net), 0.05)
  step = walk.make_step(evaluate, 0.05, 2, 4, move)
  block = jax.jit(walk.make_block(step, 4))
  one = jax.jit(step)
  start = walk.init_state(evaluate, {}, 0.7 * jax.random.normal(jax.random.PRNGKey(5), (64, 6)),
                          jax.random.PRNGKey(6), -2.9)
  state, rows = start, []
  for _ in range(7):
    state, out = one({}, state)
    rows.append(out)
  blocked, got = start, []
  for n in (1, 4, 2):
    blocked, out = block({}, blocked, np.int32(n))
    got += [jax.tree.map(lambda a: a[i], out) for i in range(n)]
    assert np.all(np.asarray(out.energy)[n:] == 0.0)
  for a, b in zip(rows, got):
    for x, y in zip(a, b):
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)
  for x, y in zip(jax.tree.leaves(state), jax.tree.leaves(blocked)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-12)


def vmc_energy(network, system, x0, sweeps: int = 300) -> stats.Estimate:
  """The reblocked VMC energy of `network` (Metropolis sampling of |psi|^2, vmc/mcmc.py)."""
  batch_log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))
  sweep = jax.jit(mcmc.make_sweep(batch_log_psi, 10))
  evaluate = jax.jit(walk.make_evaluate(network, hamiltonian.of(system, laplacians.JACFWD)))
  walkers = mcmc.Walkers(x0, batch_log_psi({}, x0), jnp.asarray(0.3))
  energies = []
  for i in range(sweeps + 50):
    walkers, _ = sweep({}, walkers, jax.random.PRNGKey(i))
    if i >= 50:
      energies.append(jnp.mean(evaluate({}, walkers.x).local_energy))
  return stats.reblock(np.asarray(jax.device_get(energies)))


def test_helium_dmc_reaches_exact_energy_below_vmc():
  """He with a nodeless analytic trial: DMC at tau = 0.04 (a time-step error below a mHa for
  a trial with both cusps; 12 Ha^-1 of projection discarded) agrees with the exact energy within its error bar, where
  VMC of the same trial is many error bars above."""
  system = atom('He')
  x0 = 0.7 * jax.random.normal(jax.random.PRNGKey(2), (512, 6))
  net = helium_trial()
  vmc = vmc_energy(net, system, x0)
  energies, _, _ = run_dmc(net, system, x0, 0.04, 2000, 300, e0=vmc.mean)
  est = stats.reblock(energies)
  print(f'He VMC {vmc.mean:.5f} +- {vmc.error:.5f}; DMC {est.mean:.5f} +- {est.error:.5f}')
  assert abs(est.mean - HE_EXACT) < 4 * est.error, est
  assert vmc.mean - est.mean > 5 * np.hypot(vmc.error, est.error), (vmc, est)


def test_time_step_error_is_linear_and_extrapolates_to_exact():
  """He with a trial without the electron-nucleus cusp (1s^2 with zeta = 27/16, no Jastrow:
  VMC -2.8477 Ha) has a visible time-step error. E(tau) at three small time steps lies on a
  line (the weighted fit's chi^2 below its 0.1% quantile for one degree of freedom), the fit
  at tau -> 0 agrees with the smallest tau within error and with the exact energy (nodeless:
  fixed-node DMC is exact)."""
  system = atom('He')
  net = analytic_network(lambda p, x: (jnp.ones((), x.dtype), -27 / 16 * jnp.sum(
      jnp.linalg.norm(x.reshape(2, 3), axis=-1))), 6)
  x0 = 0.7 * jax.random.normal(jax.random.PRNGKey(5), (512, 6))
  taus, energies, errors = (0.04, 0.02, 0.01), [], []
  for i, tau in enumerate(taus):
    # The same imaginary time (60 Ha^-1) kept at each tau, 5 Ha^-1 discarded first.
    e, _, _ = run_dmc(net, system, x0, tau, int(60 / tau), int(5 / tau), key=i, e0=-2.85)
    est = stats.reblock(e)
    energies.append(est.mean)
    errors.append(est.error)
  fit = stage.extrapolate(taus, energies, errors)
  line = fit['energy'] + fit['slope'] * np.asarray(taus)
  chi2 = float(np.sum(((np.asarray(energies) - line) / np.asarray(errors)) ** 2))
  print(taus, energies, errors, fit, chi2)
  assert chi2 < 10.83, chi2
  assert abs(fit['energy'] - energies[-1]) < 3 * np.hypot(fit['error'], errors[-1]), fit
  assert abs(fit['energy'] - HE_EXACT) < 4 * fit['error'], fit


def test_energies_off_a_line_are_named():
  """The chi^2 probability of the linear fit: energies on a line within their errors give
  no warning; one point moved 6 errors off the line (chi^2 about 23 for one degree of
  freedom once the fit has taken its share, p ~ 1e-6) is named, and the error of E(tau -> 0)
  widened."""
  taus, errors = (0.02, 0.01, 0.005), (1e-4, 1e-4, 1e-4)
  on = stage.extrapolate(taus, [-1.0 + 0.1 * t for t in taus], errors)
  assert on['p_linear'] == pytest.approx(1.0) and stage.fit_warnings(on) == []
  off = stage.extrapolate(taus, [-1.0 + 0.1 * t + (6e-4 if t == 0.01 else 0) for t in taus],
                          errors)
  assert 20 < off['chi2_dof'] < 24 and off['p_linear'] < 1e-5
  (line,) = stage.fit_warnings(off)
  assert 'not linear' in line and f'chi^2/dof {off["chi2_dof"]:.1f}' in line
  assert off['error'] > 4 * on['error']
  assert stage.extrapolate(taus[:2], [-1.0, -1.0], errors[:2])['p_linear'] is None


def branching_chain(n_walkers: int, steps: int, tau: float = 0.5) -> tuple:
  """A two-state branching walk whose long-time mixed estimate is known exactly: walkers hop
  between states of energy 0 and 1 by a Markov matrix P, are weighted exp(-tau E) and
  resampled to `n_walkers` by a comb after every step (a fixed population, as DMC's). The
  weighted population tends to the left eigenvector rho of P diag(exp(-tau E)) of its
  largest eigenvalue, so the mixed estimate's exact value is rho . E / sum(rho). Returns
  (per-step rows in stage.COLUMNS' order, that exact value)."""
  p, e = np.array([[0.7, 0.3], [0.4, 0.6]]), np.array([0.0, 1.0])
  values, vectors = np.linalg.eig((p * np.exp(-tau * e)[None, :]).T)
  rho = np.abs(np.real(vectors[:, np.argmax(np.real(values))]))
  rng = np.random.default_rng(3)
  s, rows = rng.integers(0, 2, n_walkers), np.empty((steps, len(stage.COLUMNS)))
  for t in range(steps):
    s = (rng.random(n_walkers) < p[s, 1]).astype(int)
    w = np.exp(-tau * e[s])
    rows[t] = np.sum(w * e[s]) / np.sum(w), -np.log(np.mean(w)) / tau, 1.0, tau, 0.0
    teeth = (rng.random() + np.arange(n_walkers)) * np.sum(w) / n_walkers
    s = s[np.minimum(np.searchsorted(np.cumsum(w), teeth, side='right'), n_walkers - 1)]
  return rows, float(rho @ e / np.sum(rho))


def test_population_correction_removes_the_bias_of_a_tiny_population():
  """Two walkers: the mixed estimate of the branching walk lies far above its exact value
  (the population bias, here about 0.07 against an error near 0.001); reweighted by the
  population's mean weights over the last 20 steps (several correlation times of the chain)
  it is exact within 4 of its errors, and the reported shift is the difference of the two.
  With a memory of one step, shorter than the chain's correlation, a bias remains."""
  rows, exact = branching_chain(2, 60_000)
  mixed = np.mean(rows[100:, 0])
  fixed = stage.population_corrected(rows, 100, 0.5, 20)
  assert abs(mixed - exact) > 20 * fixed['error'], (mixed, exact, fixed)
  assert abs(fixed['energy'] - exact) < 4 * fixed['error'], (fixed, exact)
  assert fixed['shift'] == pytest.approx(fixed['energy'] - mixed)
  assert abs(fixed['shift']) > 10 * fixed['shift_error']
  short = stage.population_corrected(rows, 100, 0.5, 1)
  assert abs(short['energy'] - exact) > 4 * short['error']
  (line,) = stage.population_warnings([{'tau': 0.5, 'error': 0.01, 'population': fixed}])
  assert 'population bias is resolved' in line  # Resolved, and 7 of the energy's errors.
  assert stage.population_warnings([{'tau': 0.5, 'error': 1.0, 'population': fixed}]) == []
  assert stage.population_corrected(rows[:130], 100, 0.5, 20) is None  # Too few steps kept.


@pytest.mark.jax_range
@pytest.mark.parametrize('moves', [walk.ALL, walk.ELECTRON], ids=lambda m: m.name)
def test_nonfinite_walkers_are_dropped_and_moves_there_rejected(moves):
  """H's 1s trial made NaN for x > 1 bohr: walkers starting there get weight 0 and are
  replaced at the resampling, moves into it are rejected and counted, and the energy stays
  exactly -1/2 (the remaining walkers are unaffected), with either moves."""
  net = analytic_network(lambda p, x: (jnp.ones((), x.dtype), jnp.where(
      x[0] > 1.0, jnp.nan, -jnp.linalg.norm(x))), 3)
  x0 = jax.random.normal(jax.random.PRNGKey(7), (256, 3))
  assert np.any(np.asarray(x0[:, 0]) > 1.0)
  energies, state, history = run_dmc(net, atom('H'), x0, 0.1, 50, 0, moves=moves)
  np.testing.assert_allclose(energies, -0.5, atol=1e-10)
  assert history[0].nonfinite > 0
  assert np.all(np.asarray(state.walkers.x[:, 0]) <= 1.0)
  assert np.all(np.isfinite(np.asarray(state.walkers.log_psi)))


def test_dmc_step_with_a_geometry_is_the_step_of_the_system_built_there():
  """One network's DMC step given a stretched H2 geometry as data equals the step of the
  network built for that geometry (same parameters, walkers and key): the walkers' local
  energies, drifts and the step's energy."""
  from conftest import tiny_config

  def built(bond):
    cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                              'system.molecule': f'H 0 0 0; H 0 0 {bond}'})
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system, jnp.float64)
    evaluate = walk.make_evaluate(network, hamiltonian.of(system, laplacians.JACFWD))
    return system, network, evaluate, jax.jit(walk.make_step(evaluate, 0.01, 2, 10))

  with jax.enable_x64(True):
    _, network, evaluate, step = built(1.4)
    stretched, _, evaluate_there, step_there = built(2.0)
    params = network.init(jax.random.PRNGKey(0))
    x = mcmc.init_positions(jax.random.PRNGKey(1), stretched, 32, 1.0, jnp.float64)
    key = jax.random.PRNGKey(2)
    expected = walk.init_state(evaluate_there, params, x, key)
    state = walk.init_state(evaluate, params, x, key, geometry=stretched.geometry)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12),
                 state, expected)
    (got, got_stats), (want, want_stats) = (step(params, state, stretched.geometry),
                                            step_there(params, expected))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12),
                 (got, got_stats), (want, want_stats))


def test_moves_are_the_settings_choices():
  """dmc.moves allows exactly the records of walk.MOVES and dmc.ecp_moves those of
  walk.ECP_MOVES (config.py sits below the walk and names them itself); T-moves are the
  default treatment of an ECP."""
  assert config.SETTINGS['dmc.moves'].check.allowed == tuple(walk.MOVES)
  assert config.default().dmc.moves in walk.MOVES
  assert config.SETTINGS['dmc.ecp_moves'].check.allowed == tuple(walk.ECP_MOVES)
  assert config.default().dmc.ecp_moves == walk.TMOVES.name


def sample_moves(network, system, x0, tau, sweeps, moves=walk.ELECTRON, key=0):
  """(positions (sweeps, B, 3N), mean acceptance) of the moves alone (no weights, no
  resampling): a Markov chain whose stationary distribution is |psi|^2."""
  evaluate = walk.make_evaluate(network, hamiltonian.of(system, laplacians.JACFWD))
  move = jax.jit(moves(evaluate, walk.make_psi(network), tau))
  state = walk.init_state(evaluate, {}, x0, jax.random.PRNGKey(key), 0.0)
  xs, acceptance = [], []
  for i in range(sweeps):
    k_move, k_accept = jax.random.split(jax.random.PRNGKey(1000 * key + i))
    m = move({}, state, k_move, k_accept)
    state = state._replace(walkers=m.walkers, moved=m.moved, proposed=m.proposed)
    xs.append(np.asarray(m.walkers.x))
    acceptance.append(float(jnp.mean(m.acceptance)))
  return np.asarray(xs), float(np.mean(acceptance)), state


@pytest.mark.jax_range
def test_electron_moves_sample_psi_squared_electron_by_electron():
  """psi = exp(-2 r1 - r2) (two electrons, each a hydrogenic 1s of its own exponent Z): the
  electron moves alone, at a time step whose drift-diffusion proposal alone is far from
  exact, sample |psi|^2: <r_i> = 3 / (2 Z_i), <r_i^2> = 3 / Z_i^2 for each electron
  (detailed balance of each single-electron move with its Green's-function ratio)."""
  net = analytic_network(lambda p, x: (jnp.ones((), x.dtype), -2.0 * jnp.linalg.norm(x[:3])
                                       - jnp.linalg.norm(x[3:])), 6)
  x0 = 1.0 * jax.random.normal(jax.random.PRNGKey(3), (256, 6))
  xs, acceptance, state = sample_moves(net, atom('He'), x0, 0.2, 400)
  xs = xs[50:]
  for i, z in ((0, 2.0), (1, 1.0)):
    r = np.linalg.norm(xs[:, :, 3 * i:3 * i + 3], axis=-1)
    for power, exact in ((1, 1.5 / z), (2, 3.0 / z ** 2)):
      est = stats.reblock(np.mean(r ** power, axis=1))
      assert abs(est.mean - exact) < 4 * est.error, (i, power, est)
  assert 0.5 < acceptance < 1.0, acceptance
  assert 0 < float(state.moved) < float(state.proposed)  # tau_eff < tau.


@pytest.mark.jax_range
def test_electron_moves_never_cross_the_node():
  """psi = (z1 - z2) exp(-r1 - r2): no single-electron move changes the sign of z1 - z2 of a
  walker, and the walkers' recorded sign stays that of the function at their positions."""
  net = analytic_network(lambda p, x: (jnp.sign(x[2] - x[5]), jnp.log(jnp.abs(x[2] - x[5]))
                                       - jnp.linalg.norm(x[:3]) - jnp.linalg.norm(x[3:])), 6)
  x0 = jax.random.normal(jax.random.PRNGKey(4), (256, 6))
  xs, acceptance, state = sample_moves(net, atom('He'), x0, 0.5, 100)
  signs = np.sign(xs[:, :, 2] - xs[:, :, 5])
  np.testing.assert_array_equal(signs, np.broadcast_to(np.sign(np.asarray(x0[:, 2] - x0[:, 5])),
                                                       signs.shape))
  np.testing.assert_array_equal(np.asarray(state.walkers.sign), signs[-1])
  assert acceptance < 1.0


@pytest.mark.jax_range
def test_hydrogen_ground_state_is_exact_with_electron_moves():
  """H's exact trial exp(-r): E_L = -1/2 everywhere, so DMC of electron moves gives -1/2 at
  every step at any tau; for one electron the sweep is the all-electron move, draw for draw."""
  system = atom('H')
  x0 = 1.5 * jax.random.normal(jax.random.PRNGKey(0), (256, 3))
  for tau in (0.05, 0.5):
    energies, state, history = run_dmc(hydrogen_1s(), system, x0, tau, 30, 10,
                                       moves=walk.ELECTRON)
    np.testing.assert_allclose(energies, -0.5, atol=1e-10)
    _, same, same_history = run_dmc(hydrogen_1s(), system, x0, tau, 30, 10, moves=walk.ALL)
    np.testing.assert_allclose(state.walkers.x, same.walkers.x, rtol=1e-12)
    assert [h.acceptance for h in history] == [h.acceptance for h in same_history]
    assert 0 < history[-1].tau_eff < tau


def test_electron_moves_accept_more_than_all_electron_moves():
  """He with a trial without cusps (1s^2, zeta = 27/16): at each time step the electron
  moves accept more than the all-electron moves (each rejection undoes one electron's move,
  not all), and their effective time step is closer to tau."""
  system = atom('He')
  net = analytic_network(lambda p, x: (jnp.ones((), x.dtype), -27 / 16 * jnp.sum(
      jnp.linalg.norm(x.reshape(2, 3), axis=-1))), 6)
  x0 = 0.7 * jax.random.normal(jax.random.PRNGKey(5), (256, 6))
  for tau in (0.05, 0.2):
    out = {}
    for moves in (walk.ELECTRON, walk.ALL):
      _, _, history = run_dmc(net, system, x0, tau, 40, 20, e0=-2.85, moves=moves)
      out[moves.name] = (np.mean([h.acceptance for h in history]), history[-1].tau_eff)
    print(tau, out)
    assert out['electron'][0] > out['all'][0] and out['electron'][1] > out['all'][1], out


def test_helium_dmc_of_electron_moves_reaches_exact_energy():
  """He with the nodeless analytic trial (both cusps): DMC of electron moves at tau = 0.04
  agrees with the exact energy within its error bar."""
  system = atom('He')
  x0 = 0.7 * jax.random.normal(jax.random.PRNGKey(2), (256, 6))
  energies, _, _ = run_dmc(helium_trial(), system, x0, 0.04, 1200, 300, e0=-2.88,
                           moves=walk.ELECTRON)
  est = stats.reblock(energies)
  print(f'He DMC (electron moves) {est.mean:.5f} +- {est.error:.5f}')
  assert abs(est.mean - HE_EXACT) < 4 * est.error, est


@functools.lru_cache(maxsize=None)
def ecp_setup():
  """(system, network, params, Hamiltonian, one configuration (3N,)) of SiLi with ccECPs
  (Si: s and p channels; Li: an s channel, padded) and a tiny untrained network (float64):
  any trial function has matrix elements to check."""
  pytest.importorskip('pyscf')
  from conftest import tiny_network
  with jax.enable_x64(True):
    system, network, params = tiny_network('', jnp.float64, **{
        'system.molecule': 'Si 0 0 0; Li 0 0 3.2', 'system.units': 'bohr',
        'system.ecp': 'ccecp', 'network.ferminet.hidden_dims': ((8, 4),),
        'network.determinants': 1})
    ham = hamiltonian.of(system, laplacians.JACFWD, jnp.float64)
    x = mcmc.init_positions(jax.random.PRNGKey(1), system, 1, 1.0, jnp.float64)[0]
  return system, network, params, ham, x


@functools.lru_cache(maxsize=None)
def quadrature_elements() -> tuple:
  """(points (N, P, 3), V_x'x psi(x') / psi(x) (N, P), sign and log|psi| at x) of every
  electron of ecp_setup's configuration x by a plain loop over the electrons, the atoms with
  an ECP and the 12 points of the rotated icosahedron (ecp.py's frame of each electron at
  x), the radial terms and the Legendre polynomials written out in NumPy; psi at x and at
  all the x' in one batch."""
  from ferminet_fast.physics import ecp
  system, network, params, _, x = ecp_setup()
  r = np.asarray(x).reshape(-1, 3)
  frames = np.asarray(ecp.rotations(ecp.configuration_key(x), r.shape[0], jnp.float64))
  moved, points, factors = [], [], []
  for i, frame in enumerate(frames):
    for centre, potential in zip(np.asarray(system.positions), system.ecp):
      d = r[i] - centre
      dist = np.linalg.norm(d)
      for q in ecp.ICOSAHEDRON @ frame.T:
        y = r.copy()
        y[i] = centre + dist * q
        v = 0.0
        for l, rows in enumerate(potential.channels):
          u = sum(c * dist ** n * np.exp(-alpha * dist ** 2) for n, alpha, c in rows)
          v += u * (2 * l + 1) / 12 * np.polynomial.legendre.legval(d @ q / dist,
                                                                    [0] * l + [1])
        moved.append(y.reshape(-1))
        points.append(y[i])
        factors.append(v)
  with jax.enable_x64(True):
    batch = jax.jit(jax.vmap(network.apply, in_axes=(None, 0)))
    sign, log = (np.asarray(a) for a in batch(params, jnp.asarray(np.asarray([x] + moved))))
  values = np.asarray(factors) * sign[1:] * sign[0] * np.exp(log[1:] - log[0])
  return (np.reshape(points, (r.shape[0], -1, 3)), values.reshape(r.shape[0], -1), sign[0],
          log[0])


@pytest.mark.jax_range
def test_tmove_probabilities_are_the_sign_obeying_quadrature_elements():
  """For each electron of one configuration of SiLi (ccECPs), the T-move's points and
  probabilities are those of a plain loop over the quadrature: p_q = tau max(0, -V_q) / (1 +
  tau sum_q' max(0, -V_q')), V_q = V_x'x psi(x') / psi(x); the stay probability is the rest,
  1 / (1 + tau sum ...); the probabilities lie in [0, 1] and sum to 1 with it. The
  configuration has both sign-obeying and sign-violating elements."""
  system, network, params, ham, x = ecp_setup()
  elements = ham.nonlocal_elements(network.apply)
  points, values, sign, log_psi = quadrature_elements()
  tau = 0.3
  m = jax.jit(jax.vmap(lambda i: walk.tmove(elements, params, x, i, sign, log_psi, tau)))(
      jnp.arange(system.n_electrons))
  t = tau * np.maximum(-values, 0.0)
  np.testing.assert_allclose(m.points, points, rtol=0, atol=1e-12)
  np.testing.assert_allclose(m.p, t / (1 + t.sum(-1, keepdims=True)), rtol=1e-10, atol=1e-14)
  np.testing.assert_allclose(m.stay, 1 / (1 + t.sum(-1)), rtol=1e-12)
  assert np.all(np.asarray(m.p) >= 0) and np.all(np.sum(m.p, -1) <= 1)
  np.testing.assert_allclose(np.sum(m.p, -1) + m.stay, 1.0, rtol=1e-14)
  assert np.any(values < 0) and np.any(values > 0)


@pytest.mark.jax_range
def test_tmove_local_energy_and_sign_obeying_part_make_the_locality_local_energy():
  """E_L (the locality approximation's, walk.make_evaluate) = E_L^TM + V^- exactly: E_L^TM
  the kinetic and Coulomb energy, the ECPs' local channels (written out here) and the
  sign-flip term (the positive elements of every electron), V^- the sum of the negative
  (sign-obeying) ones, which the T-moves turn into jumps."""
  system, network, params, ham, x = ecp_setup()
  e_l = float(jax.jit(walk.make_evaluate(network, ham))(params, x[None]).local_energy[0])
  kinetic_coulomb = float(jax.jit(ham.local_energy_at(network.log_psi))(
      params, x, jnp.asarray(system.positions)))
  r = np.asarray(x).reshape(-1, 3)
  local = sum(c * d ** n * np.exp(-alpha * d ** 2)
              for centre, potential in zip(np.asarray(system.positions), system.ecp)
              for d in np.linalg.norm(r - centre, axis=-1) for n, alpha, c in potential.local)
  values = quadrature_elements()[1]
  sign_flip, obeying = values[values > 0].sum(), values[values < 0].sum()
  assert sign_flip > 0 > obeying
  np.testing.assert_allclose(kinetic_coulomb + local + sign_flip + obeying, e_l, rtol=1e-12)


@pytest.mark.jax_range
def test_tmoves_jump_with_their_probabilities():
  """Many walkers at one SiLi configuration (tau = 1, so that jumps are frequent): the first
  electron (whose T-move comes first, from that configuration) ends on each quadrature point
  or where it was with the frequencies of its TMove (chi^2 below its 0.1% quantile), and
  each walker counts the electrons that jumped."""
  system, network, params, ham, x = ecp_setup()
  points, values, sign, log_psi = quadrature_elements()
  tau, b = 1.0, 2000
  relocate = jax.jit(walk.make_tmoves(ham.nonlocal_elements(network.apply), tau))
  out = relocate(params, jnp.tile(x, (b, 1)), jnp.full((b,), sign), jnp.full((b,), log_psi),
                 jax.random.PRNGKey(7))
  first = np.asarray(out.x)[:, :3]
  targets = np.concatenate([points[0], np.asarray(x)[None, :3]])  # The points, then staying.
  index = np.argmin(np.linalg.norm(first[:, None] - targets[None], axis=-1), axis=1)
  np.testing.assert_allclose(first, targets[index], rtol=0, atol=1e-12)
  t = tau * np.maximum(-values[0], 0.0)
  expected = b * np.append(t, 1.0) / (1 + t.sum())
  counts = np.bincount(index, minlength=len(targets))
  assert np.all(counts[expected == 0] == 0)
  seen = expected > 0
  chi2 = float(np.sum((counts[seen] - expected[seen]) ** 2 / expected[seen]))
  from scipy import stats as scipy_stats
  assert chi2 < scipy_stats.chi2.ppf(0.999, seen.sum() - 1), (chi2, counts, expected)
  assert 0.05 < expected[-1] / b < 0.95  # Both outcomes are frequent enough to test.
  jumped = np.any(np.asarray(out.x).reshape(b, -1, 3) != np.asarray(x).reshape(-1, 3), -1)
  np.testing.assert_array_equal(out.jumps, np.sum(jumped, axis=-1))


@pytest.mark.jax_range
@pytest.mark.parametrize('moves', [walk.ELECTRON, walk.ALL], ids=lambda m: m.name)
def test_tmoves_without_a_nonlocal_part_are_the_locality_approximation(moves):
  """H's exact trial exp(-r) with an ECP of a local channel and a p channel whose
  coefficient is 0: the T-moves run (every matrix element is 0, so no electron jumps) and
  the walk, the energies and the statistics are those of the locality approximation, draw
  for draw."""
  import dataclasses
  from ferminet_fast.physics import ecp
  potential = ecp.Ecp('test', 0, np.array([[0.0, 1.0, 0.3]]),
                      (np.zeros((0, 3)), np.array([[0.0, 1.0, 0.0]])))
  ham = dataclasses.replace(hamiltonian.of(atom('H'), laplacians.JACFWD, jnp.float64),
                            ecp=(potential,))
  net = hydrogen_1s()
  evaluate = walk.make_evaluate(net, ham)
  elements = ham.nonlocal_elements(net.apply)
  assert walk.make_tmoves(elements, 0.1) is not None
  x0 = 1.5 * jax.random.normal(jax.random.PRNGKey(0), (16, 3))
  runs = []
  for treatment in (walk.TMOVES, walk.LOCALITY):
    move = moves(evaluate, walk.make_psi(net), 0.1, treatment(elements, 0.1))
    step = jax.jit(walk.make_step(evaluate, 0.1, 1, 2, move))
    state = walk.init_state(jax.jit(evaluate), {}, x0, jax.random.PRNGKey(1))
    history = []
    for _ in range(5):
      state, out = step({}, state)
      history.append(out)
    runs.append((state, jax.device_get(history)))
  (state, history), (expected, expected_history) = runs
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12),
               (state, history), (expected, expected_history))
  assert np.all(np.asarray(state.walkers.x) != np.asarray(x0))  # The walkers did move.
