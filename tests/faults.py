"""Faults injected into real training runs, for the reliability tests (and scripts/chaos.py).

In-process, `injected(wrap)` makes the training loop (stages/training.py) call `wrap(compiled
step)` in place of the compiled step; the injectors below are such wraps. Through the
command line, this file runs the training entry point with one of them:

  python tests/faults.py stall@8 --config configs/he.py ...      # the step at 8 hangs
  python tests/faults.py nan-params@12 ...                       # NaN into the parameters
  python tests/faults.py nan-walkers@12 ...                      # NaN into half the walkers

(the rest of the arguments as for `python -m ferminet_fast.train`).
"""

import contextlib
import inspect
import sys
import threading
from typing import Callable

import jax
import jax.numpy as jnp

from ferminet_fast.stages import training
from ferminet_fast.vmc import step as step_lib


@contextlib.contextmanager
def injected(wrap: Callable):
  """Within it, each training run calls `wrap(train_step)` (train_step: the compiled step,
  state -> (state, stats)) in place of its compiled step."""
  original = training.train
  signature = inspect.signature(original)

  def train(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.arguments['train_step'] = wrap(bound.arguments['train_step'])
    return original(*bound.args, **bound.kwargs)

  training.train = train
  try:
    yield
  finally:
    training.train = original


def inject_nan(state: step_lib.TrainState, into: str) -> step_lib.TrainState:
  """NaN into every parameter ('params') or into the positions of half of the walkers
  ('walkers'); shardings are kept."""
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
  """Every parameter p becomes p (1 + scale z), z standard normal (a fixed draw), finite (a
  wavefunction damaged as by a run of bad updates)."""
  shardings, _ = step_lib.shardings_of(state)

  def damage(s):
    leaves, tree = jax.tree.flatten(s.params)
    keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
    noisy = [p * (1 + scale * jax.random.normal(k, p.shape, p.dtype))
             for p, k in zip(leaves, keys)]
    return s._replace(params=jax.tree.unflatten(tree, noisy))

  return jax.jit(damage, out_shardings=shardings)(state)


def fault_injector(at_step: int, fault: Callable):
  """A wrap for `injected`: the first time the step counter reaches `at_step`,
  `fault(state) -> state` (inject_nan, damage_params) is applied before the step runs."""

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
  """A wrap for `injected`: when the step counter reaches `at_step` the step never
  returns, as a compiled step that deadlocked would not (for runtime/watchdog.py)."""

  def wrap(train_step):

    def wrapped(state):
      if int(state.step) == at_step:
        threading.Event().wait()  # Forever: only the watchdog or a signal ends the process.
      return train_step(state)

    return wrapped

  return wrap


INJECTORS = {'stall': stall_injector,
             'nan-params': lambda at: nan_injector(at, 'params'),
             'nan-walkers': lambda at: nan_injector(at, 'walkers')}


def main() -> None:
  """`python tests/faults.py FAULT@STEP [training arguments]`: the training command line
  with FAULT (a key of INJECTORS) at step STEP."""
  fault, at = sys.argv[1].split('@')
  sys.argv = [sys.argv[0]] + sys.argv[2:]
  from ferminet_fast import train
  with injected(INJECTORS[fault](int(at))):
    train.run()


if __name__ == '__main__':
  main()
