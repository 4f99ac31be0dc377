"""environment/dispatch.py: loops that call one compiled program again and again keep only
a few calls in flight, below XLA's CPU limit beyond which a program with collectives on
several devices never finishes."""

import pytest

from ferminet_fast.environment import dispatch
from ferminet_fast.vmc import step


class Call:
  """Stands for a dispatched call's result; counts the calls not yet waited for."""
  in_flight = 0
  most = 0

  def __init__(self):
    self.waited = False
    Call.in_flight += 1
    Call.most = max(Call.most, Call.in_flight)

  def block_until_ready(self):
    if not self.waited:
      self.waited = True
      Call.in_flight -= 1
    return self


@pytest.fixture(autouse=True)
def _count():
  Call.in_flight = Call.most = 0


@pytest.mark.parametrize('depth', [1, 2, dispatch.LIMIT])
def test_calls_in_flight_never_exceed_the_depth_and_are_awaited_oldest_first(depth):
  ahead, calls, returned = dispatch.Bounded(depth), [], []
  for _ in range(3 * dispatch.LIMIT):
    calls.append(Call())
    returned.append(ahead.pushed(calls[-1]))
    assert Call.in_flight <= depth
  assert Call.most == depth + 1  # Only the call just dispatched beyond the depth.
  waited = [r for r in returned if r is not None]
  assert waited == calls[:len(waited)] and len(waited) == len(calls) - depth
  assert ahead.drain() == calls[len(waited):] and Call.in_flight == 0


@pytest.mark.parametrize('depth', [0, dispatch.LIMIT + 1])
def test_a_depth_outside_the_safe_range_is_refused(depth):
  with pytest.raises(ValueError, match='outside'):
    dispatch.Bounded(depth)


@pytest.mark.parametrize('beat', [None, 'watched'])
def test_the_training_burn_in_keeps_two_sweeps_in_flight_at_most(beat):
  """With or without a watchdog: the sweeps' results are waited for one behind."""
  beats = []
  compiled = step.Compiled(train_step=None, mcmc=lambda state: (state + 1, Call()),
                           compile_s=0.0)
  state = step.burn_in(compiled, 0, steps=100, steps_per_sweep=1,
                       beat=beats.append if beat else None)
  assert state == 100 and Call.most <= 2
  assert len(beats) == (99 if beat else 0)
