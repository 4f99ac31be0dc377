"""Stop signals: what SLURM and a user's Ctrl-C send turn into a checkpoint at the next
step boundary and a clean exit, instead of a lost run."""

import signal
import threading
from typing import Optional

STOP_SIGNALS = ('SIGTERM', 'SIGINT', 'SIGUSR1')


class StopSignals:
  """While active, SIGTERM / SIGINT / SIGUSR1 only set `received` (the signal's name), so
  the loop can checkpoint at the next step boundary and exit cleanly; a second SIGINT
  raises KeyboardInterrupt. Inactive off the
  main thread (signal handlers can only be installed there) or when not `enabled`."""

  def __init__(self, enabled: bool):
    self.enabled = enabled and threading.current_thread() is threading.main_thread()
    self.received: Optional[str] = None
    self._previous = {}

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
    return self

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    return False
