"""Evaluation: the energy (and other observables) of a trained wavefunction with honest
error bars.

  python -m ferminet_fast.evaluate --run runs/li [--steps 4000] [--observables s2,dipole]

Loads the run's config and newest checkpoint, takes its parameters (by default their
moving average over the last updates, config.optim.average_fraction; `--parameters last`
for the last ones) and freezes them, equilibrates the
walkers with the move width fixed, then records the mean local energy of every MCMC
sweep for `--steps` sweeps (default: the run's config.evaluation), and the walker mean of
each requested observable (physics/observables.py). Each estimate is the reblocked mean
with its standard error and integrated autocorrelation time, written to <run>/eval.json.
Unlike the running mean of training, the parameters do not move while it is measured.
"""

import os
import sys
import time
import warnings
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import config
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import legacy, optim
from ferminet_fast.physics import excited_states
from ferminet_fast.physics import observables as observables_lib
from ferminet_fast.physics import systems
from ferminet_fast.run import checkpoint, cli, rundir, watchdog
from ferminet_fast.vmc import ordering, stats, step
from ferminet_fast.wavefunction import networks


def evaluate(run_dir: str, steps: Optional[int] = None, burn_in: Optional[int] = None,
             quiet: bool = False, seed: int = 1, observables: Sequence[str] = (),
             parameters: str = 'average') -> stats.Estimate:
  """Evaluates the newest checkpoint of run_dir; returns the energy estimate and writes
  eval.json. steps, burn_in: sweeps recorded and discarded; None takes the run's
  config.evaluation. observables: names from observables.OBSERVABLES, estimated too.
  parameters: 'average' (the moving average of the parameters, optim.averaged) or 'last'."""
  say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
  unknown = [n for n in observables if n not in observables_lib.OBSERVABLES]
  if unknown:
    raise InputError(f'unknown observable {unknown[0]!r} (known: '
                     f'{", ".join(observables_lib.OBSERVABLES)})')
  if not checkpoint.has_checkpoint(run_dir):
    raise InputError(f'--run {run_dir!r} holds no checkpoint to evaluate')
  cfg = config.from_json(rundir.read_json(os.path.join(run_dir, 'config.json')))
  config.validate(cfg)
  steps = cfg.evaluation.steps if steps is None else steps
  burn_in = cfg.evaluation.burn_in if burn_in is None else burn_in
  if parameters not in PARAMETERS:
    raise InputError(f'--parameters {parameters!r} is not one of {", ".join(PARAMETERS)}')
  if steps < 2 or burn_in < 0:
    raise InputError(f'evaluation needs steps >= 2 and burn_in >= 0, got {steps}, {burn_in}')
  if cfg.precision == 'float64':
    jax.config.update('jax_enable_x64', True)
  system = systems.make_system(cfg.system)
  if system.states > 1:  # The states' report holds these for every state; others are refused.
    other = [n for n in observables if n not in STATES_OBSERVABLES]
    if other:
      raise InputError(f'--observables {",".join(other)}: with {system.states} states '
                       'evaluation estimates ' + ' and '.join(STATES_OBSERVABLES) + ' (each '
                       "state's <S^2> and the transition dipoles); the others are for one "
                       'state')
    observables = ()
  network = networks.make_network(cfg.network, system, step.DTYPES[cfg.precision])
  # The Laplacian does not change the energy; 'auto' (timed by training) takes 'best' here.
  laplacian = config.resolve_laplacian('best' if cfg.optim.laplacian == 'auto'
                                       else cfg.optim.laplacian)
  chosen = {name: observables_lib.OBSERVABLES[name].make(network, system, laplacian)
            for name in observables}  # name -> observables.Estimator
  if system.states > 1:  # The local matrices of every state (excited_states.py).
    chosen[STATES] = observables_lib.Estimator(
        excited_states.make_local_matrices(network, system, laplacian), (),
        excited_states.reduce)
  estimators = {name: jax.vmap(est.per_config, in_axes=(None, 0))
                for name, est in chosen.items()}
  parts = step.make_parts(system, network, cfg.mcmc, cfg.optim, laplacian)
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
  trained_step, state, averaged = _restore(run_dir, state, cfg.optim.optimizer)
  if parameters == 'average' and averaged:
    params = optim.averaged_params(state.opt_state, state.params)
    walkers = state.walkers._replace(log_psi=parts.batch_log_psi(params, state.walkers.x))
    state = state._replace(params=params, walkers=walkers)
  elif parameters == 'average':
    say(f'Step {trained_step} of {run_dir} holds no average of the parameters: evaluating '
        'the last ones')
  state = state._replace(key=jax.random.PRNGKey(seed))
  def move(s):
    """One MCMC sweep at fixed width and fixed parameters (all that burn-in does)."""
    key, k = jax.random.split(s.key)
    walkers, pmove = parts.sweep(s.params, s.walkers, k)
    return s._replace(walkers=walkers, key=key), pmove

  k = system.states

  def sweep(s):
    """A move, then the mean local energy (non-finite ones left out, as in training) and
    each observable's estimate from the sweep's walkers (its `reduce`). With several states
    the local energy is the trace of the local-energy matrix, not computed a second time.

    The estimates are made one after the other (vmc/ordering.py: side by side, two
    batched determinant factorisations deadlock jaxlib 0.10.0-0.11.0 on CPU)."""
    s, pmove = move(s)
    x, means, done = s.walkers.x, {}, ()
    if STATES not in chosen:
      mean, _ = parts.energy(s.params, x)
      done = mean
    for name, f in estimators.items():
      x = ordering.after(x, done)
      means[name] = done = chosen[name].reduce(f(s.params, x))  # (B, k) -> estimate
    if STATES in means:
      mean = jnp.trace(means[STATES][:k * k].reshape(k, k))
    return s, (mean, pmove, means)

  # Compiled before the clock and the watchdog start: a sweep that never completes (the
  # compilation is not a sweep) ends the process with a report (run/watchdog.py).
  sweep = jax.jit(sweep, donate_argnums=0).lower(state).compile()
  move = jax.jit(move, donate_argnums=0).lower(state).compile() if burn_in else None
  energies, pmoves, values, sums, pending = [], [], [], {}, None

  def record(out):
    e, pmove, means = jax.device_get(out)
    energies.append(float(e))
    pmoves.append(float(pmove))
    for name in [n for n in means if chosen[n].accumulate]:  # Summed, not kept per sweep.
      sums[name] = sums.get(name, 0.0) + np.asarray(means.pop(name), np.float64)
    values.append(means)

  what = 'a sweep (MCMC moves, local energies' + ''.join(f', {n}' for n in chosen) + ')'
  t0 = time.perf_counter()
  with watchdog.for_stage('evaluation', cfg.watchdog, cli.EXIT_STALLED, run_dir) as watch:
    watch.waiting_for(f'the burn-in ({burn_in} sweeps at fixed parameters)')
    for _ in range(burn_in):
      state, _ = move(state)
    state = jax.block_until_ready(state)
    watch.beat(f'evaluation sweep 1 of {steps}: {what}')
    for i in range(steps):
      state, out = sweep(state)
      if pending is not None:  # Fetched one sweep behind, so the device never waits.
        record(pending)
        watch.beat(f'evaluation sweep {i + 1} of {steps}: {what}')
      pending = out
    record(pending)
  wall = time.perf_counter() - t0
  estimate = stats.reblock(np.asarray(energies))
  exact = system.exact_reported_energy
  result = {'energy': estimate.mean, 'error': estimate.error, 'tau': estimate.tau,
            'block_size': estimate.block_size, 'steps': steps, 'burn_in': burn_in,
            'batch_size': cfg.batch_size, 'mcmc_steps_per_sweep': cfg.mcmc.steps,
            'checkpoint_step': trained_step,
            'parameters': 'average' if parameters == 'average' and averaged else 'last',
            'average_updates': (optim.average_horizon(state.opt_state,
                                                      cfg.optim.average_fraction)
                                if parameters == 'average' and averaged else 1.0),
            'pmove': float(np.mean(pmoves)),
            'exact_energy': exact,
            'error_mha': None if exact is None else 1e3 * (estimate.mean - exact),
            'wall_s': wall}
  for name, obs in chosen.items():
    if name == STATES:
      result['states'] = _report_states(
          np.stack([np.asarray(v[name]) for v in values]), system.states, say)
      result['states']['exact_ground_energy'] = system.exact_energy
      continue
    unit = observables_lib.OBSERVABLES[name].unit
    if obs.accumulate:  # Only the mean over sweeps; the report says where it went.
      summary = obs.report(run_dir, sums[name] / steps, None)
      result.setdefault('observables', {})[name] = {'unit': unit, 'summary': summary}
      say(f'  {name}: {summary}')
      continue
    series = np.stack([np.asarray(v[name]) for v in values])  # (steps, k)
    est = [stats.reblock(series[:, c]) for c in range(series.shape[1])]
    result.setdefault('observables', {})[name] = {
        'labels': list(obs.labels), 'unit': unit, 'value': [e.mean for e in est],
        'error': [e.error for e in est], 'tau': [e.tau for e in est]}
    if obs.report:
      say(f'  {name}: ' + obs.report(run_dir, [e.mean for e in est], [e.error for e in est]))
    else:
      say(f'  {name}: ' + ', '.join(f'{label} {e.mean:.5f} +- {e.error:.5f}'
                                    for label, e in zip(obs.labels, est)) + f' {unit}'.rstrip())
  rundir.write_json(os.path.join(run_dir, 'eval.json'), result)
  total = 'the sum of the states, ' if system.states > 1 else ''
  which = (f'parameters averaged over ~{result["average_updates"]:.0f} updates, '
           if result['parameters'] == 'average' else '')
  line = (f'Evaluated step {trained_step} ({which or "last parameters, "}'
          f'{steps} sweeps x {cfg.batch_size} walkers): {total}{estimate.mean:.6f} +- '
          f'{estimate.error:.6f} Ha (reblocked, tau={estimate.tau:.1f})')
  if exact is not None:
    line += f' | exact {exact:.6f} Ha | error {result["error_mha"]:+.2f} +- {1e3 * estimate.error:.2f} mHa'
  say(line)
  return estimate


STATES = 'states'  # Key of the several states' matrices among the estimators.
# What the several states' evaluation estimates for every state (its `states` report).
STATES_OBSERVABLES = ('s2', 'dipole')
PARAMETERS = ('average', 'last')  # Which parameters of a checkpoint are evaluated.
EV_PER_HA = 27.211386246  # CODATA 2018.


def _restore(run_dir: str, like: step.TrainState, method: str) -> tuple:
  """(step, state, averaged) from the newest checkpoint that restores: parameters, walkers
  and, where it restores (it holds the parameters' average), the optimizer state; averaged
  says whether it did. Without it (an optimizer state from another version of a library)
  the parameters and walkers alone."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    try:
      found, state = checkpoint.restore_latest(run_dir, like, ('params', 'opt_state', 'walkers'),
                                               legacy.upgrade(method, like.opt_state))
    except InputError:
      found = None
  if found is not None:
    for w in caught:  # A damaged newer checkpoint skipped: said as restore_latest says it.
      warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return found, state, bool(optim.averaged_updates(state.opt_state) > 0)
  found, state = checkpoint.restore_latest(run_dir, like, ('params', 'walkers'))
  return found, state, False


def _report_states(series: np.ndarray, k: int, say) -> dict:
  """Each state's energy, excitation energy, <S^2> and oscillator strength from the series
  of sweep estimates of the local matrices (steps, 5 K^2), with jackknife errors; printed
  and returned for eval.json (lists, Ha and e bohr)."""
  values, errors = excited_states.jackknife(series, k)
  say(f'  {k} states (NES-VMC; errors by jackknife over {excited_states.JACKKNIFE_BLOCKS} '
      'blocks of sweeps):')
  for i in range(k):
    line = (f'    state {i}: E {values["energy"][i]:.6f} +- {errors["energy"][i]:.6f} Ha, '
            f'<S^2> {values["s2"][i]:.3f} +- {errors["s2"][i]:.3f}')
    if i:
      de, dde = values['excitation_energy'][i - 1], errors['excitation_energy'][i - 1]
      line += (f', excitation {de:.6f} +- {dde:.6f} Ha ({de * EV_PER_HA:.4f} eV), '
               f'|d_0{i}|^2 {values["transition_dipole_sq"][i - 1]:.4f} +- '
               f'{errors["transition_dipole_sq"][i - 1]:.4f} e^2 bohr^2, oscillator strength '
               f'{values["oscillator_strength"][i - 1]:.4f} +- '
               f'{errors["oscillator_strength"][i - 1]:.4f}')
    say(line)
  if k > 2:
    say(f'    oscillator strengths summed over states 1-{k - 1}: '
        f'{values["oscillator_strength_sum"][0]:.4f} +- {errors["oscillator_strength_sum"][0]:.4f}')
  return {name: {'value': values[name].tolist(), 'error': errors[name].tolist()}
          for name in values}


def main(argv) -> None:
  from absl import flags, logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])}', file=sys.stderr)
    sys.exit(cli.EXIT_INPUT)
  f = flags.FLAGS
  try:
    names = [n.strip() for n in (f.observables or '').split(',') if n.strip()]
    evaluate(f.run, f.steps, f.burn_in, seed=f.seed, observables=names,
             parameters=f.parameters)
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(cli.EXIT_INPUT)


def run() -> None:
  from absl import app, flags
  flags.DEFINE_string('run', None, 'Run directory (with checkpoints) to evaluate.', required=True)
  flags.DEFINE_integer('steps', None, 'MCMC sweeps whose energies are recorded '
                       "(default: the run's config.evaluation.steps).")
  flags.DEFINE_integer('burn_in', None, 'Sweeps discarded before recording '
                       "(default: the run's config.evaluation.burn_in).")
  flags.DEFINE_integer('seed', 1, 'Seed of the evaluation chain.')
  flags.DEFINE_string('parameters', 'average', "'average': the parameters averaged over the "
                      "last updates (the run's config.optim.average_fraction); 'last': the "
                      'parameters of the last update.')
  flags.DEFINE_string('observables', '', 'Comma-separated observables to estimate besides the '
                      'energy: s2 (total spin <S^2>), dipole (e bohr), density (radial '
                      'profile of an atom to density.csv; a molecule\'s on a grid to '
                      'density.cube), forces (on the nuclei, Ha/bohr, '
                      'zero-variance zero-bias), forces_warp (the same by space-warp finite '
                      'differences, 6 M local energies per walker: a check). Default: none.')
  app.run(main)


if __name__ == '__main__':
  run()
