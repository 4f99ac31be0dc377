"""How far the host may run ahead of the devices when it calls one compiled program again
and again (MCMC burn-in, evaluation sweeps, pretraining chunks).

JAX dispatches asynchronously: a call returns before its program has run. XLA's CPU client
admits a bounded number of executions in flight per device (its
max_inflight_computations_per_device, 32); a call beyond that blocks the host in the
middle of launching the program on the devices. On several CPU devices
(environment/cpu_devices.py), with a program that has collectives (the mean energy over
walkers, an all-gather of the walkers), one device's execution then waits at the
collective for the other's, which is never launched: "Expected 2 threads to join the
rendezvous ... only 1 of them arrived", and XLA aborts the process after 40 s. It happened
to evaluation burn-ins on two cores shared with other processes. Every loop that
dispatches a program repeatedly keeps a few calls in flight at most, waiting for the
oldest before it dispatches more: the devices stay busy and never reach the limit."""

import collections
from typing import Any

import jax

AHEAD = 2  # Calls in flight at most in a loop: the devices never idle, the queue stays short.
LIMIT = 16  # At most, for any caller: half of XLA's per-device limit of executions in flight.


class Bounded:
  """Keeps at most `depth` dispatched results un-awaited: `pushed(result)` after each call
  waits for the oldest beyond that and returns it (None while the queue fills)."""

  def __init__(self, depth: int = AHEAD):
    if not 1 <= depth <= LIMIT:
      raise ValueError(f'depth {depth} outside 1 to {LIMIT}')
    self.depth = depth
    self._queue = collections.deque()

  def pushed(self, result: Any) -> Any:
    self._queue.append(result)
    if len(self._queue) <= self.depth:
      return None
    return jax.block_until_ready(self._queue.popleft())

  def drain(self) -> list:
    """Waits for every result still in flight; them, oldest first."""
    done = [jax.block_until_ready(r) for r in self._queue]
    self._queue.clear()
    return done
