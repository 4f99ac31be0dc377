"""Training: build (settings -> system -> network -> parts -> state -> compiled step),
loop, report.

  python -m ferminet_fast.train --config configs/li.py --config.optim.iterations=5000

From Python: `ferminet_fast.train.train(cfg)` with `cfg = ferminet_fast.config.default()`.
Running it again with the same `log.save_path` resumes from the latest checkpoint.
"""

import time

_T0 = time.perf_counter()  # Before the heavy imports, so start-up includes them.

import jax  # noqa: E402

from ferminet_fast import plan  # noqa: E402
from ferminet_fast.environment import (blas_threads, cpu_devices, distributed,  # noqa: E402
                                       machine, signals)
from ferminet_fast.physics import systems  # noqa: E402
from ferminet_fast.runtime import (checkpoint, cli, context, profiling, resume,  # noqa: E402
                                   rundir, watchdog)
from ferminet_fast.stages import preflight, relax, report, trained, training  # noqa: E402
from ferminet_fast.stages.report import Result, final_line  # noqa: E402,F401  (the public API)
from ferminet_fast.vmc import mcmc, pretrain, step  # noqa: E402

EXIT_PREEMPTED = cli.EXIT_PREEMPTED


def train(cfg, quiet: bool = False, handle_signals: bool = False) -> Result:
  """Trains the wavefunction described by `cfg` and writes (or resumes) the run directory.

  Raises InputError for bad input, before anything is written. With `handle_signals`,
  SIGTERM/SIGINT/SIGUSR1 (also during start-up) checkpoint at the next step boundary
  and return early (`stopped_by`); a second SIGINT interrupts at once. Run by every
  process of a multi-host job; only process 0 prints and writes files. A step that stops
  completing ends the process (runtime/watchdog.py, exit status 4).
  """
  with signals.StopSignals(handle_signals) as stop, blas_threads.limited():
    return _train(cfg, quiet, stop)


def _train(user_cfg, quiet: bool, stop: signals.StopSignals) -> Result:
  cfg = plan.settings(user_cfg)
  stop.grace_s = cfg.watchdog.signal_grace_s
  distributed.initialize(cfg.distributed)
  ctx = distributed.context(cfg.batch_size)
  system = plan.system_of(cfg)
  preflight.check(cfg, system)  # Before the run directory is made.
  source = resume.decide(ctx, user_cfg, system.name)
  run = context.Run(source.run_dir, ctx, quiet)
  run.say(f'System  {systems.describe(system)}')
  run.say(f'Run dir {run.dir}' + (' (resuming)' if source.resume else ''))
  run.say(f'Devices {ctx.device_count} x {jax.devices()[0].device_kind} in '
          f'{ctx.process_count} process(es); {cfg.batch_size // ctx.device_count} walkers '
          'per device')
  if warning := cpu_devices.fault_warning(ctx.device_count):
    run.say(warning)
  # Start-up and steps are watched from here: a stall ends the run (runtime/watchdog.py, exit 4).
  with watchdog.for_stage('training', cfg.watchdog, cli.EXIT_STALLED, run.dir) as watch:
    return _start_and_train(cfg, user_cfg, run, source, system, stop, watch)


def _start_and_train(cfg, user_cfg, run: context.Run, source: resume.Source, system, stop,
                     watch: watchdog.Watchdog) -> Result:
  # The network, the Laplacian, the parts, the state (fresh, pretrained or restored), the step.
  with watch.paused('building the network and its parts (and timing the Laplacians)'):
    built = plan.build(cfg, jax.random.PRNGKey(cfg.debug.seed), run.ctx, system=system)
  if built.laplacian_ms:
    run.timings['laplacian_auto_ms'] = built.laplacian_ms
    run.say(f'Laplacian auto: {profiling.format_ms(built.laplacian_ms)} -> '
            f'{built.parts.laplacian.name}')
  start, state, finish_pretraining = 0, built.state, lambda beat: None
  if source.restore_from:
    start, state = checkpoint.restore_latest(source.restore_from, state)
    run.say(f'Restored step {start} from {checkpoint.directory(source.restore_from)}')
  elif cfg.log.fine_tune_from:
    with watch.paused(f'loading the parameters of {cfg.log.fine_tune_from}'):
      state = trained.fine_tuned(cfg.log.fine_tune_from, built.parts, state, run.say)
  elif cfg.pretrain.iterations:  # Dispatched; it runs while the step compiles.
    with watch.paused('the Hartree-Fock SCF (pretraining dispatched after it)'):
      state, finish_pretraining = pretrain.pretrain_state(
          cfg.pretrain, cfg.mcmc, system, built.network, built.parts.walkers_log_psi, state,
          run.say)
  # Compiled before anything is written: a step that cannot fit the device's memory stops
  # the run here (or, with energy_chunk_size 'auto', gets smaller chunks of local energies).
  parts, compiled, free_mb, train_step, relaxing = relax.compiled_step(
      cfg, built, system, run, state, source.restore_from, start, watch)
  watch.phase('the first chunk of pretraining steps')
  finish_pretraining(watch.beat)
  run.write(rundir.CONFIG, user_cfg.to_dict())  # Now: a failed resume leaves the old run.
  run.write(plan.RESOLVED, built.plan.record(parts))

  state, timers = _prepare(cfg, run, source, parts, compiled, state, start, free_mb, watch)

  def remeasure(s):
    with watch.paused('the stage timers (compiling and timing the stages)'):
      return timers.measure(compiled, s)

  out = training.train(cfg.log, cfg.optim, run, source, state, start, train_step, stop,
                       remeasure=timers and remeasure, watch=watch,
                       geometries=system.geometry_count, relax=relaxing)
  if relaxing is not None:
    relaxing.finish(out.steps)
  return report.finish(cfg.log.final_fraction, system, run, out, start, _T0)


def _prepare(cfg, run: context.Run, source: resume.Source, parts: step.Parts,
             compiled: step.Compiled, state: step.TrainState, start: int, free_mb,
             watch: watchdog.Watchdog) -> tuple:
  """(state, stage timers or None): the burn-in of a fresh start, the stage timers if
  asked for, and the run's facts in timings.json and on the screen."""
  t_burn = time.perf_counter()
  if not source.restore_from:  # Restored walkers are already equilibrated.
    watch.phase(f'the first sweep of the burn-in ({cfg.mcmc.burn_in} MCMC moves)')
    state = step.burn_in(compiled, state, cfg.mcmc.burn_in, cfg.mcmc.steps, watch.beat)
  timings = run.timings
  timings.update(compile_s=compiled.compile_s, burn_in_s=time.perf_counter() - t_burn)
  timers = None
  if cfg.log.timers or cfg.log.timers_every:  # Before the loop, on the equilibrated state.
    timers = profiling.StageTimers(parts, state)
    with watch.paused('the stage timers (compiling and timing the stages)'):
      timings.update(timers.measure(compiled, state), timers_at_step=start)
    run.say(f'Timers  {profiling.format_timings(timings)}  (at step {start})')
  n_params = int(sum(p.size for p in jax.tree.leaves(state.params)))
  timings.update(profiling.run_facts(run.ctx, cfg.batch_size, cfg.mcmc.steps,
                                     cfg.optim.optimizer, parts, compiled),
                 n_params=n_params, startup_s=time.perf_counter() - _T0, free_memory_mb=free_mb,
                 machine=machine.machine(), versions=machine.versions())
  chunks = f'{parts.chunk_size} walkers' if parts.chunk_size else 'all walkers'
  mem = (f'; step {timings["step_memory_mb"]:.0f} MiB per device' if 'step_memory_mb' in timings
         else '') + (f' ({free_mb:.0f} MiB free)' if free_mb is not None else '')
  run.say(f'Network {n_params} parameters; Laplacian {parts.laplacian.name} on {chunks} at once; '
          f'compiled in {compiled.compile_s:.1f} s{mem}; move width '
          f'{mcmc.width_text(state.walkers.width)} bohr; first step {timings["startup_s"]:.1f} s '
          'after start')
  run.save_timings()
  return state, timers


def run() -> None:
  """Console entry point (ferminet-fast-train, python -m ferminet_fast.train)."""
  cli.run_training(train, preflight.dry_run)


if __name__ == '__main__':
  run()
