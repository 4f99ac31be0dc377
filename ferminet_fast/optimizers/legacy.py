"""Optimizer states in the layout of checkpoints written before every optimizer was composed
as reject_nonfinite(scaled_by_schedule(direction)) (optim.py), so that such runs resume.

Each method's earlier layout, and the two maps between it and today's state:
- adam: optax.adam(schedule)'s (ScaleByAdamState, ScaleByScheduleState);
- sgd: optax.sgd(schedule)'s (EmptyState, ScaleByScheduleState);
- kfac: KfacState(count, lr, weight, factors, diagonal, inverses);
- spring: SpringState(step, previous).
`to_legacy` gives the earlier layout of a state of today's (the shapes to restore into);
`from_legacy` turns a restored earlier state into today's. The counter carries over; the
rate of the update before the checkpoint, which only statistics read, where it was kept.
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


def to_legacy(method: str, state: optim.RejectState):
  """Today's state -> the same content in the earlier layout of `method`."""
  return _layout(method)[0](state.inner)


def from_legacy(method: str, old, like: optim.RejectState) -> optim.RejectState:
  """A state restored in the earlier layout of `method` -> today's (dtypes and layout of
  `like`, a state of today's from the same settings)."""
  count, lr, inner = _layout(method)[1](old)
  lr = jnp.zeros_like(like.inner.lr) if lr is None else lr
  state = optim.RejectState(jnp.zeros_like(like.rejected), optim.ScheduleState(count, lr, inner))
  # Same tree as `like` (e.g. optax's EmptyState restored as the class of today's).
  return jax.tree.unflatten(jax.tree.structure(like), jax.tree.leaves(state))


def upgrade(method: str, like: optim.RejectState) -> tuple:
  """(to_old, from_old) for checkpoint.restore_latest: `method`'s maps, `like` today's state."""
  return (lambda state: to_legacy(method, state)), (lambda old: from_legacy(method, old, like))
