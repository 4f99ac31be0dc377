"""Training: set up (config -> system -> parts -> state -> compiled step), loop, report.

  python -m ferminet_fast.train --config configs/li.py --config.optim.iterations=5000

From Python: `ferminet_fast.train.train(cfg)` with `cfg = ferminet_fast.config.default()`.
Running it again with the same `log.save_path` resumes from the latest checkpoint.
"""

import time

_T0 = time.perf_counter()  # Before the heavy imports, so start-up includes them.

import os  # noqa: E402
from typing import Callable, Optional  # noqa: E402

import jax  # noqa: E402

from ferminet_fast import config  # noqa: E402
from ferminet_fast.environment import (blas_threads, distributed, machine,  # noqa: E402
                                       signals, xla_flags)
from ferminet_fast.errors import InputError  # noqa: E402
from ferminet_fast.optimizers import legacy  # noqa: E402
from ferminet_fast.physics import hartree_fock, systems  # noqa: E402
from ferminet_fast.run import (checkpoint, cli, loop, memory, profiling, report,  # noqa: E402
                               resume, rundir, watchdog)
from ferminet_fast.run.report import Result, final_line  # noqa: E402,F401  (the public API)
from ferminet_fast.vmc import mcmc, pretrain, step  # noqa: E402
from ferminet_fast.wavefunction import networks  # noqa: E402

EXIT_PREEMPTED = cli.EXIT_PREEMPTED


def train(cfg, quiet: bool = False, handle_signals: bool = False,
          wrap_step: Optional[Callable] = None) -> Result:
  """Trains the wavefunction described by `cfg` and writes (or resumes) the run directory.

  Raises InputError for bad input, before anything is written. With `handle_signals`,
  SIGTERM/SIGINT/SIGUSR1 (also during start-up) checkpoint at the next step boundary
  and return early (`stopped_by`); a second SIGINT interrupts at once. `wrap_step`, if
  given, maps the compiled step to the function called in its place (fault injection in
  tests). Run by every process of a multi-host job; only process 0 prints and writes files.
  """
  with signals.StopSignals(handle_signals) as stop, blas_threads.limited():
    return _train(cfg, quiet, stop, wrap_step)


def _train(user_cfg, quiet: bool, stop: signals.StopSignals,
           wrap_step: Optional[Callable]) -> Result:
  config.validate(user_cfg)
  cfg = config.freeze(user_cfg)  # 'best' resolved; each module gets its own block from here.
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
  if cfg.pretrain.iterations and pretrain.available():  # Before the run directory is made.
    hartree_fock.check_basis(cfg.pretrain.basis, system, cfg.pretrain.ecp_basis)
  source = resume.decide(ctx, user_cfg, system.name)
  say(f'System  {systems.describe(system)}')
  say(f'Run dir {source.run_dir}' + (' (resuming)' if source.resume else ''))
  say(f'Devices {ctx.device_count} x {jax.devices()[0].device_kind} in {ctx.process_count} '
      f'process(es); {cfg.batch_size // ctx.device_count} walkers per device')

  def write(name, obj):  # Only process 0 writes the run directory.
    if ctx.is_main:
      rundir.write_json(os.path.join(source.run_dir, name), obj)

  # Setup: the network, the Laplacian, the step's parts, the state (fresh, pretrained or
  # restored), then the step compiled for it.
  key = jax.random.PRNGKey(cfg.debug.seed)
  network = networks.make_network(cfg.network, system, step.DTYPES[cfg.precision])
  laplacian, timings = cfg.optim.laplacian, {}
  if laplacian == 'auto':
    params = network.init(key)
    x = mcmc.init_positions(key, system, cfg.batch_size, cfg.mcmc.init_width, network.dtype)
    laplacian, timings['laplacian_auto_ms'] = profiling.choose_laplacian(
        network, system, params, x, cfg.optim.energy_chunk_size)
    say('Laplacian auto: ' + ', '.join(f'{m} {t:.2f} ms' for m, t in
                                       timings['laplacian_auto_ms'].items()) + f' -> {laplacian}')
  parts = step.make_parts(system, network, cfg.mcmc, cfg.optim, laplacian)
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, key, ctx)
  start = 0
  if source.restore_from:
    start, state = checkpoint.restore_latest(  # Also from an earlier optimizer-state layout.
        source.restore_from, state, upgrades=legacy.upgrade(cfg.optim.optimizer, state.opt_state))
    say(f'Restored step {start} from {checkpoint.directory(source.restore_from)}')
  elif cfg.pretrain.iterations:
    state = pretrain.pretrain_state(cfg.pretrain, cfg.mcmc, system, network,
                                    parts.batch_log_psi, state, say)
  # Compiled before anything is written: a step that cannot fit the device's memory stops
  # the run here (or, with energy_chunk_size 'auto', gets smaller chunks of local energies).
  parts, compiled, free_mb = memory.compile_to_fit(
      lambda chunk: step.make_parts(system, network, cfg.mcmc, cfg.optim, laplacian, chunk),
      parts.chunk_size, cfg.optim.energy_chunk_size == 'auto', state, agree=ctx.smallest)
  write('config.json', user_cfg.to_dict())  # Now: a failed resume leaves the old run as it was.
  # From here every step is watched: one that never completes ends the run (exit 4).
  with watchdog.for_stage('training', cfg.watchdog, cli.EXIT_STALLED, source.run_dir) as watch:
    return _loop(cfg, user_cfg, ctx, source, system, parts, compiled, state, start, timings,
                 free_mb, stop, wrap_step, watch, write, say, quiet)


def _loop(cfg, user_cfg, ctx, source, system, parts, compiled, state, start, timings, free_mb,
          stop, wrap_step, watch, write, say, quiet) -> Result:
  """Burn-in, the stage timers, the loop and the report, with `watch` told of each step."""
  t_burn = time.perf_counter()
  if not source.restore_from:  # Restored walkers are already equilibrated.
    watch.waiting_for(f'the burn-in ({cfg.mcmc.burn_in} MCMC moves)')
    state = step.burn_in(compiled, state, cfg.mcmc.burn_in, cfg.mcmc.steps)
  timings.update(compile_s=compiled.compile_s, burn_in_s=time.perf_counter() - t_burn)
  timers = None
  if cfg.log.timers or cfg.log.timers_every:  # Before the loop, on the equilibrated state.
    timers = profiling.StageTimers(parts, state)
    with watch.paused('the stage timers (compiling and timing the stages)'):
      timings.update(timers.measure(compiled, state), timers_at_step=start)
    say(f'Timers  {profiling.format_timings(timings)}  (at step {start})')
  n_params = int(sum(p.size for p in jax.tree.leaves(state.params)))
  timings.update(profiling.run_facts(ctx, cfg.batch_size, cfg.mcmc.steps, cfg.optim.optimizer,
                                     parts, compiled),
                 n_params=n_params, startup_s=time.perf_counter() - _T0, free_memory_mb=free_mb,
                 machine=machine.machine(), versions=machine.versions())
  chunks = f'{parts.chunk_size} walkers' if parts.chunk_size else 'all walkers'
  mem = (f'; step {timings["step_memory_mb"]:.0f} MiB per device' if 'step_memory_mb' in timings
         else '') + (f' ({free_mb:.0f} MiB free)' if free_mb is not None else '')
  say(f'Network {n_params} parameters; Laplacian {parts.laplacian} on {chunks} at once; '
      f'compiled in {compiled.compile_s:.1f} s{mem}; move width {float(state.walkers.width):.3f} '
      f'bohr; first step {timings["startup_s"]:.1f} s after start')
  write('timings.json', timings)

  # The loop: one compiled step per iteration; records, checkpoints, rewinds, stop signals.
  train_step = wrap_step(compiled.train_step) if wrap_step else compiled.train_step
  def remeasure(s):
    with watch.paused('the stage timers (compiling and timing the stages)'):
      return timers.measure(compiled, s)

  out = loop.run(cfg.log, cfg.optim, ctx, source, state, start, train_step, stop, say, quiet,
                 remeasure=timers and remeasure, watch=watch,
                 on_timings=lambda r: (timings.setdefault('remeasured', []).append(r),
                                       write('timings.json', timings)))

  # The report: the final estimate, result.json and the closing lines.
  return report.finish(cfg.log.final_fraction, system, source.run_dir, out, start, timings,
                       _T0, write, say)


def run() -> None:
  """Console entry point (ferminet-fast-train, python -m ferminet_fast.train)."""
  cli.run_training(train)


if __name__ == '__main__':
  run()
