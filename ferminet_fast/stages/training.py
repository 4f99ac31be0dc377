"""The training loop: one compiled step per iteration, and around it what keeps a long run
safe: per-step records, checkpoints by steps and minutes, rewinds after bad steps,
stage timers re-measured on request, and stop signals agreed across processes."""

import os
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

from ferminet_fast.errors import TrainingError
from ferminet_fast.optimizers import optim
from ferminet_fast.runtime import checkpoint, context, recorder, resume, watchdog
from ferminet_fast.stages import recovery
from ferminet_fast.vmc import step


class Outcome(NamedTuple):
  state: object  # The TrainState after the last step done.
  steps: int  # Steps done in all (the step counter at the end).
  history: dict  # Column -> (steps recorded,) array, as in stats.csv.
  wall_s: float  # Seconds in the loop.
  rewinds: int  # Rewinds to an earlier all-finite state.
  stopped_by: Optional[str]  # Name of the signal that stopped the loop early, if any.
  # The step at which the time budget (optim.seconds) ended the loop, a normal end; or None.
  budget_step: Optional[int] = None


def train(log_cfg, optim_cfg, run: context.Run, source: resume.Source, state, start: int,
        train_step: Callable, stop, remeasure: Optional[Callable] = None,
        watch: Optional[watchdog.Watchdog] = None, geometries: int = 1,
        relax=None) -> Outcome:
  """Runs `train_step` from step `start` to `optim_cfg.iterations` (or a stop signal, or the
  step that reaches this invocation's budget `optim_cfg.seconds`, a normal end: `_Budget`), with
  records, checkpoints and timers as the `log` settings say and rewinds as the `optim`
  ones say, for `run` (its directory, printing, timings and devices).

  `remeasure(state) -> dict` re-times the stages every `log_cfg.timers_every` steps; each
  result, with its step, goes into the run's timings.json. `watch` is told of every step
  whose results arrived (runtime/watchdog.py). `geometries`: how many the run trains at
  once (each one's energy is recorded). `relax` (stages/relax.Relaxation) moves the nuclei
  after a step, `relax.after_step(t, state) -> state`, before the state is kept or saved,
  and is told of every rewind, `relax.rewound(t)`. Raises TrainingError, with the last good
  state checkpointed, when the run cannot recover from non-finite steps."""
  ctx, relax = run.ctx, relax or _Fixed()
  record = _recorder(log_cfg, optim_cfg, run, source, start, geometries)
  saver = checkpoint.Checkpointer(source.run_dir, log_cfg.keep_checkpoints, log_cfg.save_every,
                                  log_cfg.save_frequency)
  rewinder = recovery.Rewinder(state, optim_cfg.snapshot_every, optim_cfg.rewind_after,
                               optim_cfg.max_rewinds)
  rewinder.offer(start, state)
  if not source.resume:  # From now on a restart resumes here rather than starting over.
    saver.save(start, state)
  if watch is not None:  # Steps of their own length: the limit starts at first_s again.
    watch.phase(f'training step {start} (the first of this run)')
  t0, t, failed, stopped_by, budget_step = time.perf_counter(), start, 0, None, None
  budget = _Budget(ctx, optim_cfg)
  while t < optim_cfg.iterations:
    state, device_stats = train_step(state, *budget.clock())
    record.push(t, device_stats)  # Fetches the previous step's statistics: it completed.
    if watch is not None and t > start:
      watch.beat(f'training step {t} of {optim_cfg.iterations} (the compiled step: MCMC '
                 'sweep, local energies, gradient, update)')
    t += 1
    if rewinder.due(record.consecutive_bad):
      back = rewinder.rewind()
      if back is None:
        failed = record.consecutive_bad  # Read now: finishing the records resets it.
        break
      record.say(f'step {t}: {record.consecutive_bad} bad steps in a row (the last: '
                 f'{record.bad_reason}); rewinding to step {back[0]} (rewind '
                 f'{rewinder.rewinds} of {rewinder.max_rewinds})')
      t, state = back
      record.rewind(t)
      relax.rewound(t)
      continue
    state = relax.after_step(t, state)
    if record.consecutive_bad == 0:  # No snapshot of a state that is going wrong.
      rewinder.offer(t, state)
    if remeasure and log_cfg.timers_every and t % log_cfg.timers_every == 0:
      _remeasured(remeasure(state), t, record, run)
    stopping, timed = ctx.agree(stop.received is not None, saver.due_by_time())
    spent = budget.spent()
    if (saver.due_by_steps(t) or timed or stopping) and rewinder.is_good(state):
      record.flush()
      saver.save(t, state)
    if stopping:
      stopped_by = stop.received or 'a signal to another process'
      record.say(f'{stopped_by} received: checkpointed step {t}, stopping')
      break
    if spent:
      budget_step = _stopped_at_budget(t, optim_cfg, record)
      break
  record.finish()
  if not failed and rewinder.is_good(state):
    saver.save(t, state)
  saver.close()
  if failed:
    raise TrainingError(
        f'training could not recover: {failed} bad steps in a row (the last: '
        f'{record.bad_reason}) at step {t} after '
        f'{rewinder.rewinds} rewinds; '
        f'the last good state is checkpointed in {checkpoint.directory(source.run_dir)} (step '
        f'{saver.last_saved}). Lower optim.lr.rate (or clip harder: a smaller '
        'optim.clip_local_energy) and resume.')
  history = {c: np.asarray(v) for c, v in record.history.items()}
  return Outcome(state, t, history, time.perf_counter() - t0, rewinder.rewinds, stopped_by,
                 budget_step)


class _Budget:
  """This invocation's time budget (optim.seconds), counted from the loop's start on
  process 0's clock, which every process takes: whether it is spent (read after each
  step), and the clock a clocked step takes (optim.anneals_by_clock): the fraction of the
  budget spent by the end of the step before, as data (step.clock); () if unclocked."""

  def __init__(self, ctx, optim_cfg):
    self._ctx, self._seconds = ctx, optim_cfg.seconds
    self._clocked = optim.anneals_by_clock(optim_cfg)
    self._t0, self._elapsed = time.perf_counter(), 0.0

  def clock(self) -> tuple:
    return (step.clock(self._elapsed / self._seconds),) if self._clocked else ()

  def spent(self) -> bool:
    if not self._seconds:
      return False
    self._elapsed = self._ctx.main_value(time.perf_counter() - self._t0)
    return self._elapsed >= self._seconds


def _stopped_at_budget(t: int, optim_cfg, record: recorder.Recorder) -> int:
  """Says that the loop stops at step `t`, its time budget spent; returns `t`. The budget
  is per invocation (a resumed run gets optim.seconds afresh, and anneals towards its end
  afresh: optim.anneal_factor)."""
  record.say(f'time budget reached (optim.seconds = {optim_cfg.seconds:g} s): stopping at '
             f'step {t} of {optim_cfg.iterations} as at the last step')
  return t


class _Fixed:
  """The nuclei of a run that does not relax them: nothing moves, nothing to rewind."""

  def after_step(self, t: int, state):
    return state

  def rewound(self, t: int) -> None:
    pass


def _recorder(log_cfg, optim_cfg, run: context.Run, source: resume.Source, start: int,
              geometries: int) -> recorder.Recorder:
  """The run's per-step records (stats.csv on the main process, progress, TensorBoard)."""
  return recorder.Recorder(
      os.path.join(source.run_dir, 'stats.csv') if run.ctx.is_main else None,
      log_cfg.print_every, run.say, resume_from=start if source.resume else None,
      total=optim_cfg.iterations, progress=log_cfg.progress and not run.quiet,
      tensorboard_dir=(os.path.join(source.run_dir, 'tensorboard') if log_cfg.tensorboard
                       else None),
      blowup_factor=optim_cfg.blowup_factor, blowup_window=optim_cfg.blowup_window,
      geometries=geometries)


def _remeasured(result: dict, t: int, record: recorder.Recorder, run: context.Run) -> None:
  """The stage timers' `result` at step `t`: printed and added to timings.json."""
  record.say(f'Timers  step {t}: ' + '  '.join(f'{k}={v:.3f}' for k, v in result.items()))
  run.timings.setdefault('remeasured', []).append({'step': t, **result})
  run.save_timings()
  record.last = time.perf_counter()  # The timers' time is not the next step's.
