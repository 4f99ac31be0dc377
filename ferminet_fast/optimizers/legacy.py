"""Optimizer states in the layouts of earlier checkpoints, so that such runs resume:

- before the parameter average: reject_nonfinite(scaled_by_schedule(direction)), the
  state of today's (optim.py) without its AverageState; restored with no average yet;
- before every optimizer was composed that way, each method's own layout:
- adam: optax.adam(schedule)'s (ScaleByAdamState, ScaleByScheduleState);
- sgd: optax.sgd(schedule)'s (EmptyState, ScaleByScheduleState);
- kfac: KfacState(count, lr, weight, factors, diagonal, inverses);
- spring: SpringState(step, previous).
`to_legacy` gives a method's own earlier layout of a state of today's (the shapes to
restore into); `from_legacy` turns a restored one into today's. The counter carries over;
the rate of the update before the checkpoint, which only statistics read, where it was kept.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from ferminet_fast.optimizers import kfac as kfac_lib
from ferminet_fast.optimizers import optim


class KfacState(NamedTuple):
  count: Any
  lr: Any
  weight: Any
  factors: Any
  diagonal: Any
  inverses: Any


class SpringState(NamedTuple):
  step: Any
  previous: Any


# method -> (today's ScheduleState -> the earlier state, the earlier state -> (count, the
# rate kept or None, the direction's state of today's)).
LAYOUTS = {
    'adam': (lambda s: (s.inner, optax.ScaleByScheduleState(s.count)),
             lambda old: (old[1].count, None, old[0])),
    'sgd': (lambda s: (optax.EmptyState(), optax.ScaleByScheduleState(s.count)),
            lambda old: (old[1].count, None, old[0])),
    'kfac': (lambda s: KfacState(s.count, s.lr, *s.inner),
             lambda old: (old.count, old.lr, kfac_lib.KfacState(
                 old.weight, old.factors, old.diagonal, old.inverses))),
    'spring': (lambda s: SpringState(s.count, s.inner.previous),
               lambda old: (old.step, None, optim.SpringState(old.previous))),
}


def _layout(method: str) -> tuple:
  if method not in LAYOUTS:
    raise ValueError(f'no earlier layout for optimizer {method!r}')
  return LAYOUTS[method]


def without_average(state: optim.RejectState) -> optim.RejectState:
  """Today's state -> the layout before the parameter average."""
  return optim.RejectState(state.rejected, optim.schedule_state(state))


def with_average(old: optim.RejectState, like: optim.RejectState) -> optim.RejectState:
  """A state in the layout before the parameter average -> today's, with no update averaged
  yet (optim.averaged_params then gives the parameters themselves)."""
  average = optim.average_state(like)
  return optim.RejectState(old.rejected, optim.AverageState(
      average.params, jnp.zeros_like(average.count), optim.schedule_state(old)))


def to_legacy(method: str, state: optim.RejectState):
  """Today's state -> the same content in the earlier layout of `method`."""
  return _layout(method)[0](optim.schedule_state(state))


def from_legacy(method: str, old, like: optim.RejectState) -> optim.RejectState:
  """A state restored in the earlier layout of `method` -> today's (dtypes and layout of
  `like`, a state of today's from the same settings)."""
  count, lr, inner = _layout(method)[1](old)
  lr = jnp.zeros_like(optim.learning_rate(like)) if lr is None else lr
  state = with_average(optim.RejectState(jnp.zeros_like(like.rejected),
                                         optim.ScheduleState(count, lr, inner)), like)
  # Same tree as `like` (e.g. optax's EmptyState restored as the class of today's).
  return jax.tree.unflatten(jax.tree.structure(like), jax.tree.leaves(state))


def upgrade(method: str, like: optim.RejectState) -> list:
  """[(to_old, from_old), ...] for checkpoint.restore_latest, newest layout first: the maps
  of each earlier layout of `method`, `like` today's state."""
  return [(without_average, lambda old: with_average(old, like)),
          ((lambda state: to_legacy(method, state)), (lambda old: from_legacy(method, old, like)))]
