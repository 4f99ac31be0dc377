"""Recovery from non-finite numbers and blow-ups: rewind to the last good state.

Inside the step, non-finite local energies are left out of the energy and gradient
(loss.py) and an update that would make a parameter non-finite is not applied (step.py).
What the step cannot repair itself (walkers stuck at NaN positions, parameters corrupted
from outside, an optimizer state that keeps producing non-finite updates) shows as
consecutive bad steps, and so does a finite blow-up (parameters damaged by a run of bad
updates keep the local energy's variance far above its recent median; run/recorder.py);
after `optim.rewind_after` of them the run goes back to the last state that was entirely
finite and taken outside such a run of bad steps, kept in device memory every
`optim.snapshot_every` steps, with a different random stream so that it does not walk
into the same trouble.
After `optim.max_rewinds` rewinds it stops with an error.
"""

import threading
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


def inject_nan(state: step_lib.TrainState, into: str) -> step_lib.TrainState:
  """Fault injection for reliability tests: NaN into every parameter ('params') or into
  the positions of half of the walkers ('walkers'); shardings are kept."""
  shardings, _ = step_lib.shardings_of(state)

  def corrupt(s):
    if into == 'params':
      return s._replace(params=jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), s.params))
    half = jnp.arange(s.walkers.x.shape[0]) % 2 == 0
    x = jnp.where(half[:, None], jnp.nan, s.walkers.x)
    return s._replace(walkers=s.walkers._replace(x=x, log_psi=jnp.where(half, jnp.nan,
                                                                         s.walkers.log_psi)))

  return jax.jit(corrupt, out_shardings=shardings)(state)


def damage_params(state: step_lib.TrainState, scale: float):
  """Fault injection for reliability tests: every parameter p becomes p (1 + scale z), z
  standard normal (a fixed draw), finite (a wavefunction damaged as by a run of bad updates)."""
  shardings, _ = step_lib.shardings_of(state)

  def damage(s):
    leaves, tree = jax.tree.flatten(s.params)
    keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
    noisy = [p * (1 + scale * jax.random.normal(k, p.shape, p.dtype))
             for p, k in zip(leaves, keys)]
    return s._replace(params=jax.tree.unflatten(tree, noisy))

  return jax.jit(damage, out_shardings=shardings)(state)


def fault_injector(at_step: int, fault):
  """A `wrap_step` for train.train: the first time the step counter reaches `at_step`,
  `fault(state) -> state` (inject_nan, damage_params) is applied before the step runs. For
  reliability tests."""

  def wrap(train_step):
    pending = [True]

    def wrapped(state):
      if pending[0] and int(state.step) == at_step:
        state, pending[0] = fault(state), False
      return train_step(state)

    return wrapped

  return wrap


def nan_injector(at_step: int, into: str):
  """fault_injector with NaN into the state (see inject_nan)."""
  return fault_injector(at_step, lambda state: inject_nan(state, into))


def stall_injector(at_step: int):
  """A `wrap_step` for train.train: when the step counter reaches `at_step` the step never
  returns, as a compiled step that deadlocked would not. For tests of run/watchdog.py."""

  def wrap(train_step):

    def wrapped(state):
      if int(state.step) == at_step:
        threading.Event().wait()  # Forever: only the watchdog ends the process.
      return train_step(state)

    return wrapped

  return wrap
