"""The DMC stage's pieces: the trained run it starts from, the runs at each time step with
checkpoints and resume, and the results (walk.json, dmc_stats.csv). The entry point,
dmc.py, puts them together; the algorithm is diffusion/walk.py.

Its state lives in <run>/dmc/: the checkpoints (the DMC state, the time step reached and
every step's results so far, so a stopped run resumes with nothing lost) and settings.json
(the DMC settings they were made with; a resume with others is refused).
"""

import csv
import os
import sys
import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from ferminet_fast import choices, config, plan
from ferminet_fast.diffusion import walk
from ferminet_fast.environment import distributed
from ferminet_fast.errors import InputError
from ferminet_fast.physics import laplacians
from ferminet_fast.runtime import checkpoint, memory, rundir, watchdog
from ferminet_fast.stages import trained
from ferminet_fast.vmc import mcmc, stats

SUBDIR = 'dmc'  # <run>/dmc: the DMC checkpoints and their settings.
COLUMNS = ('energy', 'growth', 'acceptance', 'tau_eff', 'nonfinite')  # Per step, StepStats.
# Fix a DMC run's state ('moves': 'all' and 'ecp_moves': 'locality' in the settings.json of
# runs from before those keys; 'ecp_moves' is recorded as None for a system without an ECP).
KEYS = ('tau', 'steps', 'equilibration', 'batch_size', 'parameters', 'moves', 'ecp_moves')
# Steps are run in blocks of at most BLOCK steps per call of the compiled program
# (walk.make_block), each block sized from the last one's time to take about BLOCK_SECONDS,
# so that small systems do not wait on the host between steps, while a stop signal, the
# progress bar and the watchdog are still seen to several times a second.
BLOCK = 64
BLOCK_SECONDS = 0.2


class Setup(NamedTuple):
  """What the DMC runs start from."""
  cfg: object  # The run's settings (frozen) with the DMC overrides.
  system: object
  evaluate: Callable  # (params, x (B, 3N)) -> walk.Walkers
  params: object
  x: jax.Array  # (B, 3N) the run's walkers, the DMC population's start.
  trained_step: int
  which: str  # 'average' or 'last': the parameters taken.
  laplacian: laplacians.Method
  moves: choices.Choice  # A record of walk.MOVES: the walkers' moves.
  psi: Callable  # (params, x (B, 3N)) -> sign, log|psi|, its gradient (walk.make_psi).
  ecp_moves: choices.Choice  # A record of walk.ECP_MOVES: the ECP's non-local part.
  # (params, x (3N,), i, sign, log|psi|, atoms) -> ecp.Elements; None: no non-local part.
  nonlocal_elements: Optional[Callable]


class Progress(NamedTuple):
  """The DMC checkpoint: state at time step `tau_index`, every step's results so far."""
  state: walk.DMCState
  tau_index: jax.Array  # () int32: the time step being run (len(taus) when done).
  series: jax.Array  # (len(taus), equilibration + steps, len(COLUMNS)) per-step results.
  wall: jax.Array  # (len(taus),) seconds spent at each time step.


def settings(run_dir: str, overrides: dict):
  """The run's settings with the DMC ones given (walk.* keys, None: the run's), checked."""
  cfg = rundir.read_config(run_dir)
  if cfg.system.states > 1:
    raise InputError(f'DMC is for one state; the run has system.states = '
                     f'{cfg.system.states}')
  if not checkpoint.has_checkpoint(run_dir):
    raise InputError(f'--run {run_dir!r} holds no checkpoint to start DMC from')
  for key, value in overrides.items():
    if value is not None:
      setattr(cfg.dmc, key, tuple(value) if key == 'tau' else value)
  if cfg.dmc.tau == 'auto':  # Resolved once here; dmc.json and settings.json record it.
    config.validate(cfg)
    cfg.dmc.tau = plan.dmc_time_steps(cfg.system)
  cfg = plan.settings(cfg, later_stage=True)
  d = cfg.dmc
  # Bytes of the per-step record (at most float64), on the device and copied to the host.
  record = 2 * len(d.tau) * (d.equilibration + d.steps) * len(COLUMNS) * 8
  free = memory.free_bytes(jax.devices()[:1])
  if free is not None and record > free:
    raise InputError(f'DMC of {run_dir!r}: {len(d.tau)} time steps of {d.equilibration} + '
                     f'{d.steps} steps need {record / 2**30:.1f} GiB for their record, more '
                     f'than the {free / 2**30:.1f} GiB free; give fewer --steps, '
                     '--equilibration or --tau')
  size = d.batch_size or cfg.batch_size
  given = ('--batch_size' if overrides.get('batch_size') else
           'its dmc.batch_size' if d.batch_size else "its training's batch")
  distributed.check_split(size, f'DMC of {run_dir!r}: a population of {size} walkers ({given})',
                          '--batch_size')
  return cfg


def prepare(cfg, run_dir: str) -> Setup:
  """The trained network with the run's Laplacian and precision, its parameters (averaged
  or last, as evaluation takes them) and walkers, the population's size set."""
  if plan.system_of(cfg).surface is not None:  # Refused before anything is built.
    raise InputError(f'--run {run_dir!r} was trained over a set of geometries: DMC takes one '
                     'geometry (train that geometry alone)')
  run = trained.TrainedRun.load(run_dir, cfg, cfg.dmc.parameters)
  built, system, state = run.built, run.built.system, run.state
  x = state.walkers.x
  size = cfg.dmc.batch_size or cfg.batch_size
  if size != x.shape[0]:  # The run's walkers repeated (or cut) to the population's size.
    x = jnp.asarray(mcmc.cycled(jax.tree.map(np.asarray, state.walkers), 1, size).x)
  ham = built.parts.hamiltonian
  evaluate = walk.make_evaluate(built.network, ham, built.parts.chunk_size)
  return Setup(cfg, system, evaluate, state.params, x, run.trained_step, run.parameters,
               built.parts.laplacian, choices.pick(walk.MOVES, cfg.dmc.moves, 'dmc.moves'),
               walk.make_psi(built.network),
               choices.pick(walk.ECP_MOVES, cfg.dmc.ecp_moves, 'dmc.ecp_moves'),
               ham.nonlocal_elements(built.network.apply))


def fresh(setup: Setup, seed: int) -> Progress:
  """The progress of a DMC run not started: the first time step's state, nothing recorded."""
  d = setup.cfg.dmc
  state = walk.init_state(setup.evaluate, setup.params, setup.x, jax.random.PRNGKey(seed))
  series = jnp.full((len(d.tau), d.equilibration + d.steps, len(COLUMNS)), jnp.nan,
                    setup.x.dtype)
  return Progress(state, jnp.zeros((), jnp.int32), series, jnp.zeros(len(d.tau), setup.x.dtype))


def resume(run_dir: str, like: Progress, setup: Setup) -> Optional[Progress]:
  """The newest DMC checkpoint of the run, or None when DMC has not started; InputError if
  it was made with other DMC settings."""
  where = os.path.join(run_dir, SUBDIR)
  ours = {k: list(v) if isinstance(v, tuple) else v for k, v in
          ((k, getattr(setup.cfg.dmc, k)) for k in KEYS)}
  ecp = setup.system.has_ecp
  ours['ecp_moves'] = setup.ecp_moves.name if ecp else None
  saved = os.path.join(where, 'settings.json')
  if not checkpoint.has_checkpoint(where):
    os.makedirs(where, exist_ok=True)
    rundir.write_json(saved, ours)
    return None
  theirs = rundir.read_json(saved) if os.path.exists(saved) else {}
  if theirs:  # Made before the moves, or the ECP's treatment, could be chosen:
    theirs.setdefault('moves', walk.ALL.name)
    theirs.setdefault('ecp_moves', walk.LOCALITY.name if ecp else None)
  if theirs != ours:
    raise InputError(f'{where} holds a DMC run with other settings ({theirs}); run with '
                     f'those to resume it, or remove {where} to start again')
  return checkpoint.restore_latest(where, like)[1]


def run_taus(setup: Setup, progress: Progress, run_dir: str, stop, watch: watchdog.Watchdog,
             say: Callable, bar=None) -> tuple:
  """Runs (or goes on with) the DMC at each time step in turn; (progress, stopped_by or
  None). Checkpoints every walk.save_every steps, by log.save_frequency minutes, when a
  stop signal arrives (`stop.received`) and at the end of each time step."""
  d, log = setup.cfg.dmc, setup.cfg.log
  total = d.equilibration + d.steps
  saver = checkpoint.Checkpointer(os.path.join(run_dir, SUBDIR), 2, d.save_every,
                                  log.save_frequency)
  series, wall = np.array(progress.series), np.array(progress.wall)
  state, i = progress.state, int(progress.tau_index)
  pack = lambda s, j: Progress(s, jnp.asarray(j, jnp.int32), jnp.asarray(series),  # noqa
                               jnp.asarray(wall))
  stopped = None
  ctx = distributed.context(setup.x.shape[0])
  while i < len(d.tau) and stopped is None:
    tau = float(d.tau[i])
    block, state = _compiled(setup, tau, state, watch)
    t, t0, n = int(state.step), time.perf_counter(), 1
    while t < total:
      n = min(n, total - t, saver.steps_to_due(i * total + t) or n)
      called = time.perf_counter()
      state, out = block(setup.params, state, np.int32(n))
      rows = np.stack([np.asarray(c, np.float64) for c in jax.device_get(out)], axis=1)[:n]
      series[i, t:t + n] = rows
      t += n
      watch.beat(f'the DMC block after step {t} of {total} at tau = {tau} (moves, local '
                 'energies, comb)' if t < total else f'the end of the DMC at tau = {tau}')
      if bar is not None:
        bar.update(n)
        row = rows[-1]
        bar.set_postfix_str(f'tau {tau} E {row[0]:.5f} acc {row[2]:.3f} tau_eff {row[3]:.5f}')
      per_step = (time.perf_counter() - called) / n
      # Every process takes the same number of steps (the comb spans all their walkers).
      n = ctx.smallest(int(max(1, min(BLOCK, BLOCK_SECONDS // max(per_step, 1e-9)))))
      # Every process stops, or saves by time, at the same block (as training does).
      stopping, timed = ctx.agree(stop.received is not None, saver.due_by_time())
      if stopping or timed or saver.due_by_steps(i * total + t):
        wall[i] += time.perf_counter() - t0
        t0 = time.perf_counter()
        saver.save(i * total + t, pack(state, i))
        if stopping:
          stopped = stop.received or 'a stop signal to another process'
          say(f'{stopped} received: checkpointed DMC step {t} at tau = {tau}, stopping')
          break
    if stopped is None:
      wall[i] += time.perf_counter() - t0
      i += 1
      if i < len(d.tau):  # The next time step starts from these walkers and this estimate.
        state = walk.init_state(setup.evaluate, setup.params, state.walkers.x, state.key,
                               state.e_best)
      saver.save(i * total, pack(state, i))
  saver.close()
  return pack(state, i), stopped


def _compiled(setup: Setup, tau: float, state: walk.DMCState, watch) -> tuple:
  """(a block of up to BLOCK DMC steps at `tau` compiled, (params, state, n) -> (state,
  rows); the state laid out for it): the walkers split over the devices
  (environment/distributed.py), everything else replicated."""
  ctx = distributed.context(setup.x.shape[0])
  shardings = jax.tree.map(lambda _: ctx.replicated(), state)
  shardings = shardings._replace(
      walkers=jax.tree.map(lambda _: ctx.walker_sharding(), state.walkers))
  params = jax.tree.map(lambda a: a.sharding, setup.params)
  move = setup.moves(setup.evaluate, setup.psi, tau,
                     setup.ecp_moves(setup.nonlocal_elements, tau), setup.system.boundary.wrap)
  step = walk.make_step(setup.evaluate, tau, setup.system.n_electrons,
                        setup.cfg.dmc.equilibration, move)
  block = jax.jit(walk.make_block(step, BLOCK), in_shardings=(params, shardings, ctx.replicated()),
                  out_shardings=(shardings, ctx.replicated()))
  state = jax.device_put(state, shardings)
  with watch.paused(f'compiling the DMC step at tau = {tau}'):
    return block.lower(setup.params, state, np.int32(1)).compile(), state


def extrapolate(taus, energies, errors) -> Optional[dict]:
  """E(tau) = E0 + b tau fitted with weights 1 / error^2 (two or more time steps): E0, b,
  their standard errors, chi^2 per degree of freedom and the probability `p_linear` of a
  chi^2 that large were E(tau) linear (both None with two time steps). Where the points
  scatter more than their errors say (chi^2 / dof > 1), the standard errors are scaled up
  by sqrt(chi^2 / dof), never down: a fit the data contradict does not keep its error."""
  if len(taus) < 2:
    return None
  taus, energies, errors = (np.asarray(a, np.float64) for a in (taus, energies, errors))
  coef, cov = np.polyfit(taus, energies, 1, w=1.0 / errors, cov='unscaled')
  dof = len(taus) - 2
  chi2_dof = (float(np.sum(((energies - np.polyval(coef, taus)) / errors) ** 2)) / dof
              if dof else None)
  scale = np.sqrt(max(1.0, chi2_dof or 0.0))
  return {'energy': float(coef[1]), 'error': float(scale * np.sqrt(cov[1, 1])),
          'slope': float(coef[0]), 'slope_error': float(scale * np.sqrt(cov[0, 0])),
          'chi2_dof': chi2_dof,
          'p_linear': float(scipy.stats.chi2.sf(chi2_dof * dof, dof)) if dof else None}


# Below this probability of the fit's chi^2 (were E(tau) linear) the run says that the
# energies are not on a line within their errors: then the extrapolation is not to be trusted
# however its error is scaled.
NONLINEAR_P = 0.01


# Below this mean acceptance of the moves a time step's energy carries a time-step error
# that the linear extrapolation does not describe: the error of the drift-diffusion moves
# grows with their rejections (Umrigar, Nightingale and Runge, J. Chem. Phys. 99, 2865
# (1993)), and time steps in the linear regime accept close to all moves. The run says so.
LOW_ACCEPTANCE = 0.9


JACKKNIFE_BLOCKS = 20  # Contiguous blocks of steps of the population correction's errors.


def population_corrected(series: np.ndarray, equilibration: int, tau_eff: float,
                         memory_steps: int) -> Optional[dict]:
  """The energy at one time step with the population control undone, from its per-step
  results `series` (steps, COLUMNS), the first `equilibration` discarded. The fixed
  population renormalises the weights at every step (and E_T moves with the estimate), which
  biases the mixed estimate by O(1 / walkers). Step n's estimate is reweighted by the product
  of the population's mean weights of the `memory_steps` steps up to n, each at a fixed
  reference energy E_ref, exp(tau_eff (E_ref - g_k)), g_k the step's growth estimate
  (Umrigar, Nightingale and Runge, J. Chem. Phys. 99, 2865 (1993), sec. III.D; for the
  comb of stochastic reconfiguration, Assaraf, Caffarel and Khelif, Phys. Rev. E 61, 4566
  (2000)): exact as the memory grows, at the price of variance. Returns energy, error and
  the shift from the mixed estimate with its error (Ha; jackknife over JACKKNIFE_BLOCKS
  blocks of steps, the two estimates paired), and memory_steps; None with too few steps."""
  e, g = series[:, 0], series[:, 1]
  ok = np.isfinite(e) & np.isfinite(g)
  if np.sum(ok[equilibration:]) < 2 * JACKKNIFE_BLOCKS:
    return None
  g = np.where(ok, g, np.nanmean(np.where(ok, g, np.nan)))
  log_w = tau_eff * (np.mean(g[equilibration:]) - g)  # E_ref: the kept mean; cancels.
  window = np.concatenate([[0.0], np.cumsum(log_w)])
  n = np.arange(len(e))
  log_pi = window[n + 1] - window[np.maximum(n + 1 - memory_steps, 0)]
  kept = np.flatnonzero(ok[equilibration:]) + equilibration
  weight, energy = np.exp(log_pi[kept] - np.max(log_pi[kept])), e[kept]
  blocks = np.array_split(np.arange(len(kept)), JACKKNIFE_BLOCKS)
  sums = np.array([[np.sum(weight[b] * energy[b]), np.sum(weight[b]), np.sum(energy[b]),
                    len(b)] for b in blocks])

  def estimates(s):
    corrected = s[0] / s[1]
    return corrected, corrected - s[2] / s[3]

  full = estimates(sums.sum(axis=0))
  leave_out = np.array([estimates(sums.sum(axis=0) - row) for row in sums])
  k = JACKKNIFE_BLOCKS
  errors = np.sqrt((k - 1) / k * np.sum((leave_out - leave_out.mean(axis=0)) ** 2, axis=0))
  return {'energy': float(full[0]), 'error': float(errors[0]), 'shift': float(full[1]),
          'shift_error': float(errors[1]), 'memory_steps': int(memory_steps)}


def population_warnings(per_tau: list) -> list:
  """One line per time step whose population correction moved the energy by more than two
  of its errors and by more than half the energy's own error: the population bias matters
  at the statistics reached."""
  return [f'tau {r["tau"]:g}: the population-corrected energy lies {1e3 * p["shift"]:+.2f} '
          f'+- {1e3 * p["shift_error"]:.2f} mHa from the mixed estimate: the population '
          'bias is resolved; use more walkers (--batch_size)'
          for r in per_tau for p in [r['population']]
          if p and abs(p['shift']) > max(2 * p['shift_error'], 0.5 * r['error'])]


def time_step_warnings(per_tau: list) -> list:
  """One line per time step of `per_tau` (results' entries) whose mean acceptance is below
  LOW_ACCEPTANCE: that time step is too large for the system."""
  return [f'tau {r["tau"]:g}: acceptance {r["acceptance"]:.2f} is below {LOW_ACCEPTANCE}: '
          'this time step is too large for the system (its energy is not in the linear '
          'regime the extrapolation assumes); use smaller time steps, --tau'
          for r in per_tau if r['acceptance'] < LOW_ACCEPTANCE]


def fit_warnings(fit: Optional[dict]) -> list:
  """One line when the linear fit of E(tau) is contradicted by the energies' errors
  (p_linear below NONLINEAR_P), else none."""
  if not fit or fit.get('p_linear') is None or fit['p_linear'] >= NONLINEAR_P:
    return []
  return [f'E(tau) is not linear within its errors (chi^2/dof {fit["chi2_dof"]:.1f}, p = '
          f'{fit["p_linear"]:.1g}): the extrapolation to tau -> 0 is not to be trusted, its '
          'error only widened; use smaller time steps (--tau) or more steps']


def results(setup: Setup, progress: Progress) -> dict:
  """dmc.json's content: the moves and the ECP's treatment; per time step the reblocked
  mixed estimate, tau_eff, acceptance, steps, wall time and ms per step; E(tau -> 0); the
  error against the exact energy; the twist and whether the walk was fixed-phase (a
  complex trial function); the sign check (None when fixed-phase: no sign to check)."""
  d, series = setup.cfg.dmc, np.asarray(progress.series, np.float64)
  per_tau = []
  for i, tau in enumerate(d.tau):
    kept = series[i, d.equilibration:]
    est = stats.reblock(kept[:, 0])
    per_tau.append({
        'tau': float(tau), 'energy': est.mean, 'error': est.error, 'autocorrelation': est.tau,
        'growth_energy': float(np.mean(kept[:, 1])), 'acceptance': float(np.mean(kept[:, 2])),
        'tau_eff': float(kept[-1, 3]), 'nonfinite': int(np.sum(kept[:, 4])),
        'steps': d.steps, 'equilibration': d.equilibration,
        'population': population_corrected(
            series[i], d.equilibration, float(kept[-1, 3]),
            max(1, int(np.ceil(d.population_memory / float(tau))))),
        'wall_s': float(progress.wall[i]),
        'ms_per_step': 1e3 * float(progress.wall[i]) / (d.equilibration + d.steps)})
  fit = extrapolate(*zip(*[(r['tau'], r['energy'], r['error']) for r in per_tau]))
  best = fit or min(per_tau, key=lambda r: r['tau'])
  exact = setup.system.exact_reported_energy
  signs = np.asarray(progress.state.walkers.sign)
  opposite = float(np.mean(signs != signs[0]))
  fixed_phase = bool(setup.system.complex)
  return {'per_tau': per_tau, 'extrapolated': fit, 'energy': best['energy'],
          'error': best['error'], 'exact_energy': exact,
          'error_mha': None if exact is None else 1e3 * (best['energy'] - exact),
          'batch_size': int(setup.x.shape[0]), 'parameters': setup.which,
          'checkpoint_step': setup.trained_step, 'laplacian': setup.laplacian.name,
          'precision': setup.cfg.precision, 'moves': setup.moves.name,
          'ecp': setup.ecp_moves.name if setup.system.has_ecp else None,
          'twist': list(setup.system.boundary.twist), 'fixed_phase': fixed_phase,
          'sign_check': None if fixed_phase else {
              'walkers': int(signs.size), 'fraction_opposite_sign': opposite,
              'nodeless_over_samples': opposite == 0.0},
          'warnings': (time_step_warnings(per_tau) + fit_warnings(fit)
                       + population_warnings(per_tau))}


def write_stats(path: str, taus, series) -> None:
  """dmc_stats.csv: one row per DMC step recorded (equilibration included), by time step."""
  series = np.asarray(series, np.float64)
  with open(path, 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(('tau', 'step') + COLUMNS)
    for i, tau in enumerate(taus):
      for t, row in enumerate(series[i]):
        if np.isfinite(row[0]):
          w.writerow([tau, t] + [f'{v:.10g}' for v in row])


def progress_bar(total: int, done: int, quiet: bool):
  """A progress bar on a terminal (tqdm), else None."""
  if quiet or not sys.stderr.isatty():
    return None
  import tqdm
  return tqdm.tqdm(total=total, initial=done, unit='step')


def say_results(result: dict, say) -> None:
  """Says dmc.json's content `result` line by line."""
  for r in result['per_tau']:
    say(f'  tau {r["tau"]:g}: E {r["energy"]:.6f} +- {r["error"]:.6f} Ha (tau_eff '
        f'{r["tau_eff"]:.5f}, acceptance {r["acceptance"]:.4f}, {r["wall_s"]:.0f} s, '
        f'{r["ms_per_step"]:.1f} ms per step of {result["moves"]} moves)')
    if r.get('population'):
      p = r['population']
      say(f'    population-corrected ({p["memory_steps"]} steps): E {p["energy"]:.6f} +- '
          f'{p["error"]:.6f} Ha, shift {1e3 * p["shift"]:+.3f} +- {1e3 * p["shift_error"]:.3f} '
          'mHa')
  fit = result['extrapolated']
  if fit:
    say(f'  tau -> 0: E {fit["energy"]:.6f} +- {fit["error"]:.6f} Ha (slope '
        f'{fit["slope"]:.4f} +- {fit["slope_error"]:.4f} Ha^2)')
  if result['error_mha'] is not None:
    say(f'  exact {result["exact_energy"]:.6f} Ha: error {result["error_mha"]:+.2f} +- '
        f'{1e3 * result["error"]:.2f} mHa')
  sign = result['sign_check']
  if sign is None:
    say(f'  fixed-phase DMC at twist {tuple(result["twist"])} (complex trial function)')
  else:
    say(f'  trial function sign: {100 * sign["fraction_opposite_sign"]:.1f}% of the '
        f'{sign["walkers"]} walkers opposite the first ('
        + ('nodeless over the samples)' if sign['nodeless_over_samples'] else 'has nodes)'))
  for line in result['warnings']:
    say(f'  warning: {line}')
