"""A watchdog for long-running stages: a stage whose steps stop completing is reported and
the process ends, instead of waiting forever.

A compiled step that never returns (a deadlock inside the runtime, a device that stopped
answering, a collective whose peer died) leaves the main thread blocked in native code,
where no Python exception can reach it. A batch job would then burn its allocation and
report nothing. The watchdog is a daemon thread that the stage tells, after each completed
step, that it is still moving (`beat`) and what it waits for next (`waiting_for`). When no
step completes within the limit it writes, to stderr, what the stage was waiting for, how
long, the limit and its reasons, and every thread's Python stack, then ends the process
with `exit_code` (os._exit: the blocked main thread cannot unwind). Files are left as they
are: checkpoints are written atomically, stats.csv line by line.

The limit: before any step of the current phase (`phase`: the pretraining's chunks, the
burn-in's sweeps, the training's steps, each of its own length) has completed, `first_s`;
after, `multiple` times the median of the phase's recent step intervals, but never less
than `floor_s` (host work between steps, such as a checkpoint, shows up in those intervals
only now and then). `paused()` holds the clock for host work of unknown length (the SCF,
compiling the step or the stage timers).

Where the devices are the host's own cores (one process on the CPU), a stall is also told
by the process's CPU time, whatever the limits: a deadlock leaves every thread asleep,
while compiling, an SCF or a step keeps at least one core busy. When the process has used
less than `IDLE_FRACTION` of one core for `idle_s` seconds (paused or not), the stage has
stalled. A gap in the watchdog's own polling (the process was stopped, or the machine
slept) starts the count again.
"""

import contextlib
import faulthandler
import os
import statistics
import sys
import threading
import time
from collections import deque
from typing import Callable, Optional

import jax

RECENT = 20  # Step intervals whose median is the expected step time.
IDLE_FRACTION = 0.01  # Of one core: less CPU than this over idle_s is a stall.


class Watchdog:
  """Ends the process when `beat` is not called within the limit (module docstring).

  stage: what is watched, for the message ('training', 'evaluation'). `on_stall(message)`
  replaces the default ending (print, stacks, os._exit) in tests of the watchdog itself."""

  def __init__(self, stage: str, multiple: float, floor_s: float, first_s: float,
               exit_code: int, enabled: bool = True, context: str = '',
               on_stall: Optional[Callable[[str], None]] = None, poll_s: float = 1.0,
               idle_s: float = 0.0, cpu_time: Callable[[], float] = time.process_time):
    self.stage, self.multiple, self.floor_s, self.first_s = stage, multiple, floor_s, first_s
    self.exit_code, self.enabled, self.context = exit_code, enabled, context
    self.idle_s, self._cpu_time = idle_s, cpu_time  # idle_s 0: CPU time not watched.
    self._samples = deque()  # (wall, cpu) at each poll, the last idle_s of them.
    self._on_stall = on_stall or self._end_process
    self._poll_s = poll_s
    self._intervals = deque(maxlen=RECENT)
    self._lock = threading.Lock()
    self._last = time.monotonic()
    self._steps = 0
    self._paused = 0
    self._waiting = 'the first step'
    self._done = threading.Event()
    self._thread = None

  def __enter__(self) -> 'Watchdog':
    if self.enabled:
      self._last = time.monotonic()
      self._thread = threading.Thread(target=self._watch, name=f'{self.stage} watchdog',
                                      daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._done.set()
    if self._thread is not None:
      self._thread.join()

  def waiting_for(self, what: str) -> None:
    """Says what the stage waits for now (printed if it never comes)."""
    with self._lock:
      self._waiting = what

  def beat(self, next_wait: Optional[str] = None) -> None:
    """A step completed; `next_wait`, if given, is what the stage waits for next."""
    now = time.monotonic()
    with self._lock:
      if self._steps:
        self._intervals.append(now - self._last)
      self._steps += 1
      self._last = now
      if next_wait is not None:
        self._waiting = next_wait

  def phase(self, what: str) -> None:
    """Steps of another kind (and length) begin, the first of them `what`: the limit is
    `first_s` again until their own time is known."""
    with self._lock:
      self._intervals.clear()
      self._steps = 0
      self._last = time.monotonic()
      self._waiting = what

  @contextlib.contextmanager
  def paused(self, what: str):
    """Host work of unknown length (`what`) that is not a step: the clock restarts after."""
    with self._lock:
      self._paused += 1
      before = self._waiting
      self._waiting = what
    try:
      yield
    finally:
      with self._lock:
        self._paused -= 1
        self._last = time.monotonic()
        self._waiting = before

  def limit(self) -> tuple:
    """(seconds, why): the current limit and how it was set."""
    with self._lock:
      intervals = list(self._intervals)
      steps = self._steps
    if not intervals:
      if steps:  # One step done: its interval from the start included burn-in.
        return self.first_s, 'watchdog.first_s, before the step time is known'
      return self.first_s, 'watchdog.first_s, before any step completed'
    typical = statistics.median(intervals)
    if self.multiple * typical >= self.floor_s:
      return (self.multiple * typical,
              f'watchdog.multiple = {self.multiple:g} x the median step time {typical:.3g} s')
    return self.floor_s, (f'watchdog.floor_s; watchdog.multiple = {self.multiple:g} x the '
                          f'median step time {typical:.3g} s is less')

  def asleep(self, now: float) -> Optional[float]:
    """Seconds the process has been all but idle on the CPU (less than IDLE_FRACTION of a
    core) if that has lasted idle_s, else None; records this poll's CPU time."""
    if not self.idle_s:
      return None
    cpu, samples = self._cpu_time(), self._samples
    if samples and now - samples[-1][0] > 5 * self._poll_s + 1:
      samples.clear()  # The process (or machine) was stopped: not a stall.
    samples.append((now, cpu))
    while len(samples) > 1 and now - samples[1][0] >= self.idle_s:
      samples.popleft()
    span = now - samples[0][0]
    if span >= self.idle_s and cpu - samples[0][1] < IDLE_FRACTION * span:
      return span
    return None

  def _watch(self) -> None:
    while not self._done.wait(self._poll_s):
      now = time.monotonic()
      asleep = self.asleep(now)
      with self._lock:
        paused = self._paused
        idle = now - self._last
        waiting, steps = self._waiting, self._steps
      if asleep is not None:
        self._on_stall(self._message(
            idle, None, f'the process used less than {IDLE_FRACTION:.0%} of a core for '
            f'{asleep:.0f} s (watchdog.idle_s): every thread asleep, a deadlock', waiting,
            steps))
        return
      if paused:
        continue
      limit, why = self.limit()
      if idle > limit:
        self._on_stall(self._message(idle, limit, why, waiting, steps))
        return

  def _message(self, idle, limit, why, waiting, steps) -> str:
    over = f'over the limit of {limit:.0f} s ({why})' if limit is not None else why
    message = (f'error: {self.stage} stalled: nothing completed for {idle:.0f} s, {over}; '
               f'it was waiting for {waiting} after {steps} completed step(s).')
    if self.context:
      message += ' ' + self.context
    return message

  def _end_process(self, message: str) -> None:
    try:
      sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stdout must not stop the report.
      pass
    print(message, file=sys.stderr, flush=True)
    print('Python stacks of every thread (the main thread shows where it waits):',
          file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    os._exit(self.exit_code)


def host_cpu_only() -> bool:
  """Whether every device of the run is one of this host's CPU cores (one process on the
  CPU backend): then an idle process is a stalled one (module docstring)."""
  return jax.default_backend() == 'cpu' and jax.process_count() == 1


def for_stage(stage: str, watchdog_cfg, exit_code: int, run_dir: str) -> Watchdog:
  """The watchdog of a stage from the run's `watchdog` settings (config.py); its CPU time
  watched where the devices are this host's cores."""
  return Watchdog(stage, watchdog_cfg.multiple, watchdog_cfg.floor_s, watchdog_cfg.first_s,
                  exit_code, enabled=watchdog_cfg.enabled,
                  idle_s=watchdog_cfg.idle_s if host_cpu_only() else 0.0,
                  context=f'The run directory {run_dir} is left as it was (resume from its '
                          'newest checkpoint); watchdog.* sets the limits.')
