"""Training: wires config, system, network and the compiled step into a loop.

  python -m ferminet_fast.train --config configs/li.py --config.optim.iterations=5000

From Python: `ferminet_fast.train.train(cfg)` with `cfg = ferminet_fast.config.default()`.
Running it again with the same `log.save_path` resumes from the latest checkpoint.
"""

import time

_T0 = time.perf_counter()  # Before the heavy imports, so start-up includes them.

import logging  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from typing import NamedTuple, Optional  # noqa: E402

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
import jax  # noqa: E402
from ml_collections import config_flags  # noqa: E402
import numpy as np  # noqa: E402

from ferminet_fast import (InputError, TrainingError, checkpoint, cli, config,  # noqa: E402
                           distributed, hartree_fock, monitor, pretrain, recovery, rundir,
                           stats, step, systems, xla_flags)

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped by a signal after checkpointing; rerun to resume.


class Result(NamedTuple):
  estimate: stats.Estimate  # Energy (Ha) over the last `log.final_fraction` of training.
  exact_energy: Optional[float]  # Ha, if known.
  history: dict  # Column -> (steps recorded,) array, as in stats.csv.
  timings: dict  # As in timings.json.
  state: step.TrainState
  run_dir: str
  stopped_by: Optional[str] = None  # Name of the signal that stopped training early.

  @property
  def error_mha(self) -> Optional[float]:
    if self.exact_energy is None:
      return None
    return 1e3 * (self.estimate.mean - self.exact_energy)


def final_line(result: Result, iterations: int) -> str:
  est = result.estimate
  line = (f'Energy {est.mean:.6f} +- {est.error:.6f} Ha (last {est.n} of {iterations} steps, '
          f'reblocked, tau={est.tau:.1f})')
  if result.exact_energy is not None:
    line += (f' | exact {result.exact_energy:.6f} Ha | error {result.error_mha:+.2f} '
             f'+- {1e3 * est.error:.2f} mHa')
  return line


def _check_compatible(source_dir: str, cfg) -> None:
  """The run in source_dir must have the state shapes cfg would build."""
  saved = rundir.read_json(os.path.join(source_dir, 'config.json'))
  diffs = checkpoint.structural_differences(saved, cfg.to_dict())
  if diffs:
    raise InputError(f'the checkpoint in {source_dir!r} was made with a different '
                     f'{"; ".join(diffs)} (these fix the saved state\'s shapes); '
                     'use a new log.save_path or the original settings')


def _prepare_run_dir(ctx: distributed.Context, cfg, name: str) -> tuple:
  """(run_dir, resume), decided by process 0 (the only one that writes) for all."""
  decided = None
  if ctx.is_main:
    try:
      decided = rundir.prepare(cfg.log.save_path, name, cfg.to_dict())
    except InputError as e:
      decided = e
  decided = ctx.broadcast(decided)
  if isinstance(decided, InputError):
    raise decided
  return decided


def train(cfg, quiet: bool = False, handle_signals: bool = False) -> Result:
  """Trains the wavefunction described by `cfg` and writes (or resumes) the run directory.

  Raises InputError for bad input, before anything is written. With `handle_signals`,
  SIGTERM/SIGINT/SIGUSR1 (also during start-up) checkpoint at the next step boundary
  and return early (`stopped_by`); a second SIGINT interrupts at once.
  Run by every process of a multi-host job; only process 0 prints and writes files.
  """
  with monitor.StopSignals(handle_signals) as signals:
    return _train(cfg, quiet, signals)


def _train(cfg, quiet: bool, signals: monitor.StopSignals) -> Result:
  config.validate(cfg)
  if cfg.debug.deterministic and not xla_flags.request(xla_flags.GPU_DETERMINISTIC):
    raise InputError('config.debug.deterministic needs XLA_FLAGS to hold '
                     f'{xla_flags.GPU_DETERMINISTIC} before JAX starts, and JAX has already '
                     'started in this process: set the environment variable before importing '
                     'jax (or run from the command line)')
  distributed.initialize(cfg.distributed)
  ctx = distributed.context(cfg.batch_size)
  quiet = quiet or not ctx.is_main
  say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
  if cfg.precision == 'float64':
    jax.config.update('jax_enable_x64', True)
  system = systems.make_system(cfg.system)
  if cfg.log.restore_path:  # Checked before the run directory is made.
    if not checkpoint.has_checkpoint(cfg.log.restore_path):
      raise InputError(f'config.log.restore_path {cfg.log.restore_path!r} holds no checkpoint')
    _check_compatible(cfg.log.restore_path, cfg)
  if cfg.pretrain.iterations and pretrain.available():  # Before the run directory is made.
    hartree_fock.check_basis(cfg.pretrain.basis, system)
  run_dir, resume = _prepare_run_dir(ctx, cfg, system.name)
  source = run_dir if resume else cfg.log.restore_path
  if resume:
    _check_compatible(run_dir, cfg)
  say(f'System  {systems.describe(system)}')
  say(f'Run dir {run_dir}' + (' (resuming)' if resume else ''))
  say(f'Devices {ctx.device_count} x {jax.devices()[0].device_kind} in {ctx.process_count} '
      f'process(es); {cfg.batch_size // ctx.device_count} walkers per device')

  parts = step.make_parts(cfg, system)
  state = step.init_state(parts, cfg, system, jax.random.PRNGKey(cfg.debug.seed), ctx)
  start = 0
  if source:
    start, state = checkpoint.restore_latest(source, state)
    say(f'Restored step {start} from {checkpoint.directory(source)}')
  if not source and cfg.pretrain.iterations:
    state = _pretrain(cfg, system, parts, state, say)

  def write(name, obj):
    """A JSON file of the run directory; only process 0 writes."""
    if ctx.is_main:
      rundir.write_json(os.path.join(run_dir, name), obj)

  # Written once the state is in hand, so a failed resume leaves the earlier run as it was.
  write('config.json', cfg.to_dict())
  n_params = sum(p.size for p in jax.tree.leaves(state.params))
  timings = {}
  if cfg.optim.laplacian == 'auto':
    method, timings['laplacian_auto_ms'] = step.choose_laplacian(cfg, parts, system, state)
    parts = step.make_parts(cfg, system, method)
    say('Laplacian auto: ' + ', '.join(f'{m} {t:.2f} ms' for m, t in
                                       timings['laplacian_auto_ms'].items()) + f' -> {method}')
  compiled = step.compile_step(parts, state)
  t_burn = time.perf_counter()
  if not source:  # Restored walkers are already equilibrated.
    state = step.burn_in(compiled, state, cfg.mcmc.burn_in, cfg.mcmc.steps)
  timings.update(compile_s=compiled.compile_s, burn_in_s=time.perf_counter() - t_burn)
  timers = None
  if cfg.log.timers or cfg.log.timers_every:  # Before the loop, on the equilibrated state.
    timers = monitor.StageTimers(parts, state)
    timings.update(timers.measure(compiled, state), timers_at_step=start)
    say(f'Timers  {monitor.format_timings(timings)}  (at step {start})')
  timings.update({'n_params': int(n_params), 'batch_size': cfg.batch_size,
                  'devices': ctx.device_count, 'processes': ctx.process_count,
                  'walkers_per_device': cfg.batch_size // ctx.device_count,
                  'mcmc_steps': cfg.mcmc.steps, 'laplacian': parts.laplacian,
                  'optimizer': cfg.optim.optimizer, **step.memory_mb(compiled.train_step),
                  'startup_s': time.perf_counter() - _T0,
                  'machine': monitor.machine(), 'versions': monitor.versions()})
  say(f'Network {n_params} parameters; Laplacian {parts.laplacian}; compiled in '
      f'{compiled.compile_s:.1f} s; move width {float(state.walkers.width):.3f} bohr; '
      f'first step {timings["startup_s"]:.1f} s after start')
  write('timings.json', timings)

  recorder = monitor.Recorder(
      os.path.join(run_dir, 'stats.csv') if ctx.is_main else None, cfg.log.print_every, say,
      resume_from=start if resume else None, total=cfg.optim.iterations,
      progress=cfg.log.progress and not quiet,
      tensorboard_dir=os.path.join(run_dir, 'tensorboard') if cfg.log.tensorboard else None)

  def remeasure(t):
    """Stage timers again on the current state (log.timers_every)."""
    result = timers.measure(compiled, state)
    timings.setdefault('remeasured', []).append({'step': t, **result})
    recorder.say(f'Timers  step {t}: ' + '  '.join(f'{k}={v:.3f}' for k, v in result.items()))
    write('timings.json', timings)
    recorder.last = time.perf_counter()

  saver = checkpoint.Checkpointer(run_dir, cfg.log.keep_checkpoints, cfg.log.save_every,
                                  cfg.log.save_frequency)
  rewinder = recovery.Rewinder(state, cfg.optim.snapshot_every, cfg.optim.rewind_after,
                               cfg.optim.max_rewinds)
  rewinder.offer(start, state)
  if not resume:  # From now on a restart resumes here rather than starting over.
    saver.save(start, state)
  inject = cfg.debug.inject_nan and start <= cfg.debug.inject_nan_step < cfg.optim.iterations
  t_loop, t, failed, stopped_by = time.perf_counter(), start, 0, None
  while t < cfg.optim.iterations:
    if inject and t == cfg.debug.inject_nan_step:
      state, inject = recovery.inject_nan(state, cfg.debug.inject_nan), False
      recorder.say(f'step {t}: injected NaN into the {cfg.debug.inject_nan}')
    state, device_stats = compiled.train_step(state)
    recorder.push(t, device_stats)
    t += 1
    if rewinder.due(recorder.consecutive_bad):
      back = rewinder.rewind()
      if back is None:
        failed = recorder.consecutive_bad  # Read now: finishing the records resets it.
        break
      recorder.say(f'step {t}: {recorder.consecutive_bad} bad steps in a row; rewinding to step '
          f'{back[0]}, the last all-finite state (rewind {rewinder.rewinds} of '
          f'{rewinder.max_rewinds})')
      t, state = back
      recorder.rewind(t)
      continue
    rewinder.offer(t, state)
    if cfg.log.timers_every and t % cfg.log.timers_every == 0:
      remeasure(t)
    stop, timed = ctx.agree(signals.received is not None, saver.due_by_time())
    if (saver.due_by_steps(t) or timed or stop) and rewinder.is_good(state):
      recorder.flush()
      saver.save(t, state)
    if stop:
      stopped_by = signals.received or 'a signal to another process'
      recorder.say(f'{stopped_by} received: checkpointed step {t}, stopping')
      break
  recorder.finish()
  if not failed and rewinder.is_good(state):
    saver.save(t, state)
  saver.close()
  if failed:
    raise TrainingError(
        f'training could not recover: {failed} bad steps in a row (rejected '
        f'updates or non-finite local energies) at step {t} after {rewinder.rewinds} rewinds; '
        f'the last good state is checkpointed in {checkpoint.directory(run_dir)} (step '
        f'{saver.last_saved}). Lower optim.lr.rate (or clip harder: a smaller '
        'optim.clip_local_energy) and resume.')
  wall = time.perf_counter() - t_loop

  history = {c: np.asarray(v) for c, v in recorder.history.items()}
  energies = history['energy'][:t]
  n_final = max(1, int(round(cfg.log.final_fraction * len(energies))))
  estimate = (stats.reblock(energies[-n_final:]) if len(energies) else
              stats.Estimate(float('nan'), float('nan'), float('nan'), 0, 1))
  timings.update({'train_loop_s': wall, 'iterations_per_s': (t - start) / wall
                  if wall > 0 else 0.0, 'total_s': time.perf_counter() - _T0,
                  'rewinds': rewinder.rewinds,
                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
  write('timings.json', timings)
  result = Result(estimate, system.exact_energy, history, timings, state, run_dir, stopped_by)
  write('result.json', {
      'energy': estimate.mean, 'error': estimate.error, 'tau': estimate.tau,
      'samples': estimate.n, 'exact_energy': system.exact_energy,
      'error_mha': result.error_mha, 'iterations': t, 'complete': not stopped_by,
      'wall_s': timings['total_s']})
  say(f'Trained steps {start}-{t} in {wall:.1f} s ({timings["iterations_per_s"]:.1f} it/s); '
      f'total {timings["total_s"]:.1f} s')
  say(final_line(result, t))
  return result


def _pretrain(cfg, system, parts: step.Parts, state: step.TrainState, say) -> step.TrainState:
  """Hartree-Fock pretraining of a fresh state (pretrain.py); the state keeps its layout."""
  if not pretrain.available():
    say(f'Pretrain skipped: config.pretrain.iterations = {cfg.pretrain.iterations} needs the '
        "optional package pyscf (pip install 'ferminet_fast[pyscf]')")
    return state
  t0 = time.perf_counter()
  key, k_pre = jax.random.split(state.key)
  params, x, _ = pretrain.pretrain(cfg, system, parts.network, state.params, state.walkers.x,
                                   k_pre, say)
  walkers = state.walkers._replace(x=x, log_psi=parts.batch_log_psi(params, x))
  shardings, _ = step.shardings_of(state)
  say(f'Pretrain done in {time.perf_counter() - t0:.1f} s')
  return jax.device_put(state._replace(params=params, walkers=walkers, key=key), shardings)


_DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), 'config.py')


def main(argv) -> None:
  absl_logging.set_verbosity(absl_logging.WARNING)  # Library INFO chatter stays out of the log.
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)  # No 'no TPU' notices.
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])} (options are --config FILE, '
          '--config.KEY=VALUE, --dry-run)', file=sys.stderr)
    sys.exit(2)
  cfg = flags.FLAGS.config
  try:
    if flags.FLAGS.dry_run:
      config.validate(cfg)
      print(cfg)
      return
    result = train(cfg, handle_signals=True)
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  except TrainingError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(3)
  if result.stopped_by:
    sys.exit(EXIT_PREEMPTED)


def run() -> None:
  """Console entry point. Flags are defined here, not at import, so that importing this
  module from Python registers nothing, and only after the arguments were checked."""
  sys.argv = [('--dry_run' if a == '--dry-run' else a) for a in sys.argv]
  cli.precheck(sys.argv, _DEFAULT_CONFIG)
  config_flags.DEFINE_config_file(
      'config', _DEFAULT_CONFIG,
      'Config file exposing get_config(); override keys with --config.KEY=VALUE.')
  flags.DEFINE_bool('dry_run', False, 'Print the resolved config and exit (also --dry-run).')
  app.run(main)


if __name__ == '__main__':
  run()
