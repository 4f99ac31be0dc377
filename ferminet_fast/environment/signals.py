"""Stop signals: what SLURM and a user's Ctrl-C send turn into a checkpoint at the next
step boundary and a clean exit, instead of a lost run.

Python runs a signal's handler on the main thread, between bytecodes: while that thread
is blocked in native code (a compiled step that does not return) the handler waits, and a
SIGTERM would be followed by the scheduler's SIGKILL with nothing said. So the signals are
also seen from a thread of their own (signal.set_wakeup_fd, written by the C-level handler
at once): `grace_s` after a SIGTERM the process ends if the stage has not stopped by then,
and a second Ctrl-C while the first still waits ends it at once. Both say why on stderr and
leave the run directory as it was (checkpoints are written atomically).
"""

import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Optional

STOP_SIGNALS = ('SIGTERM', 'SIGINT', 'SIGUSR1')
GRACE_S = 25.0  # Default: within SLURM's default KillWait of 30 s.
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped by a signal (checkpointed); rerun to resume.
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it.
SECOND_INTERRUPT_S = 3.0  # After a second Ctrl-C, the wait for its KeyboardInterrupt.


class StopSignals:
  """While active, SIGTERM / SIGINT / SIGUSR1 only set `received` (the signal's name), so
  the loop can checkpoint at the next step boundary and exit cleanly; a second SIGINT
  raises KeyboardInterrupt. Inactive off the main thread (signal handlers can only be
  installed there) or when not `enabled`.

  A stage that has not stopped `grace_s` seconds after a SIGTERM, or that gets a second
  SIGINT before the first one's handler could run, ends the process (EXIT_PREEMPTED for the
  first, EXIT_INTERRUPTED for the second; module docstring). `grace_s` may be set after
  entering (the settings are read after the handlers are installed)."""

  def __init__(self, enabled: bool, grace_s: float = GRACE_S):
    self.enabled = enabled and threading.current_thread() is threading.main_thread()
    self.received: Optional[str] = None
    self.grace_s = grace_s
    self._previous = {}
    self._wakeup = None  # (reader, writer, previous wakeup fd) while active.
    self._done = threading.Event()
    self._thread = None

  def _handle(self, signum, frame):
    del frame
    if signum == signal.SIGINT and self.received == 'SIGINT':
      raise KeyboardInterrupt  # Ctrl-C twice: the user does not want to wait.
    self.received = signal.Signals(signum).name

  def __enter__(self):
    if self.enabled:
      for name in STOP_SIGNALS:
        sig = getattr(signal, name)
        self._previous[sig] = signal.signal(sig, self._handle)
      reader, writer = socket.socketpair()
      reader.setblocking(False)
      writer.setblocking(False)
      previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
      self._wakeup = (reader, writer, previous)
      self._thread = threading.Thread(target=self._watch, name='stop signals', daemon=True)
      self._thread.start()
    return self

  def __exit__(self, *exc):
    self._done.set()
    if self._wakeup is not None:
      reader, writer, previous = self._wakeup
      signal.set_wakeup_fd(previous)
      self._thread.join()
      reader.close()
      writer.close()
      self._wakeup = None
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous = {}
    return False

  def _watch(self) -> None:
    """Reads the signal numbers the C-level handler writes; ends the process when a stop
    does not come in time (class docstring)."""
    reader = self._wakeup[0]
    deadline, why, code, interrupts = None, '', 0, 0
    while not self._done.is_set():
      timeout = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
      ready, _, _ = select.select([reader], [], [], timeout)
      if self._done.is_set():
        return
      try:
        data = reader.recv(64) if ready else b''
      except (BlockingIOError, InterruptedError):
        data = b''
      for signum in data:
        if signum == signal.SIGTERM and code != EXIT_INTERRUPTED and deadline is None:
          deadline, code = time.monotonic() + self.grace_s, EXIT_PREEMPTED
          why = (f'SIGTERM arrived {self.grace_s:g} s ago (watchdog.signal_grace_s) and the '
                 'stage has not stopped: its step did not return')
        elif signum == signal.SIGINT:
          interrupts += 1
          if interrupts == 2:  # Its KeyboardInterrupt needs the main thread: a moment.
            deadline, code = time.monotonic() + SECOND_INTERRUPT_S, EXIT_INTERRUPTED
            why = 'a second SIGINT arrived while the stage was blocked in native code'
      if deadline is not None and time.monotonic() >= deadline:
        self._end(why, code)
        return

  def _end(self, why: str, code: int) -> None:
    try:
      sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stdout must not stop the report.
      pass
    print(f'error: {why}; ending the process without a new checkpoint. The run directory '
          'keeps its newest checkpoint: run the same command again to resume from it.',
          file=sys.stderr, flush=True)
    os._exit(code)
