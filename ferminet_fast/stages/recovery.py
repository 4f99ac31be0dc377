"""Recovery from non-finite numbers and blow-ups: rewind to the last good state.

Inside the step, non-finite local energies are left out of the energy and gradient
(loss.py) and an update that would make a parameter non-finite is not applied (step.py).
What the step cannot repair itself (walkers stuck at NaN positions, parameters corrupted
from outside, an optimizer state that keeps producing non-finite updates) shows as
consecutive bad steps, and so does a finite blow-up (parameters damaged by a run of bad
updates keep the local energy's variance far above its recent median; runtime/recorder.py);
after `optim.rewind_after` of them the run goes back to the last state that was entirely
finite and taken outside such a run of bad steps, kept in device memory every
`optim.snapshot_every` steps, with a different random stream so that it does not walk
into the same trouble.
After `optim.max_rewinds` rewinds it stops with an error.
"""

from typing import Optional

import jax
import jax.numpy as jnp

from ferminet_fast.vmc import step as step_lib


def _all_finite(state: step_lib.TrainState) -> jax.Array:
  leaves = jax.tree.leaves((state.params, state.walkers))
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in leaves]))


def _copy(state):
  return jax.tree.map(jnp.copy, state)


class Rewinder:
  """Keeps the newest all-finite state (every `every` steps) and rewinds to it."""

  def __init__(self, state: step_lib.TrainState, every: int, after: int, max_rewinds: int):
    shardings, replicated = step_lib.shardings_of(state)
    self._finite = jax.jit(_all_finite, out_shardings=replicated)
    self._reseed = jax.jit(
        lambda s, i: s._replace(key=jax.random.fold_in(s.key, i)), out_shardings=shardings)
    self.every, self.after, self.max_rewinds = every, after, max_rewinds
    self.rewinds = 0
    self._good: Optional[tuple] = None  # (step, state copy)

  def is_good(self, state: step_lib.TrainState) -> bool:
    """Whether parameters and walkers are all finite (waits for the state)."""
    return bool(self._finite(state))

  def offer(self, t: int, state: step_lib.TrainState) -> None:
    """Keeps a copy of `state` (after `t` steps) if it is time to and it is all finite."""
    if (self._good is None or t % self.every == 0) and self.is_good(state):
      self._good = (t, _copy(state))

  def due(self, consecutive_bad: int) -> bool:
    return consecutive_bad >= self.after

  def rewind(self) -> Optional[tuple]:
    """(step, state) to continue from, with a fresh random stream; None when out of
    rewinds or without a good state."""
    if self._good is None or self.rewinds >= self.max_rewinds:
      return None
    self.rewinds += 1
    t, good = self._good
    return t, self._reseed(_copy(good), self.rewinds)

