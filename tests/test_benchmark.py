"""scripts/benchmark.py's loop-period timing: FermiNet's per-step absl log lines and our
stats.csv give the time of each step's end, and the period between two steps is the step
time; scripts/ferminet_launch.py's replacement for jax.device_put_replicated puts one copy
per device along a new leading axis, as the removed function did."""

import os
import sys

import jax
import numpy as np
import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'scripts')
sys.path.insert(0, SCRIPTS)
import benchmark  # noqa: E402
import ferminet_launch  # noqa: E402


def _line(day, clock, step):
  return (f'I11{day:02d} {clock} 140 train.py:1055] Step {step:05d}: -128.1 E_h, exp. '
          f'variance=1.2 E_h^2, pmove=0.53')


def test_step_times_read_ferminet_log():
  # Steps every 0.25 s across midnight, with other log lines between them.
  lines, t = [], 23 * 3600 + 59 * 60 + 59.0
  for step in range(10):
    day, s = 27 + int(t // 86400), t % 86400
    clock = f'{int(s // 3600):02d}:{int(s % 3600 // 60):02d}:{s % 60:09.6f}'
    lines += [_line(day, clock, step), f'I11{day:02d} {clock} 140 x.py:1] other']
    t += 0.25
  times = benchmark.step_times('\n'.join(lines))
  assert sorted(times) == list(range(10))
  assert benchmark.loop_period_ms(times, 2, 10) == pytest.approx(250.0, abs=1e-6)


def test_loop_period_needs_both_ends():
  with pytest.raises(RuntimeError, match='not recorded'):
    benchmark.loop_period_ms({0: 0.0, 1: 0.1}, 0, 5)


def test_device_put_replicated_replacement():
  x = {'a': np.arange(6.0).reshape(2, 3), 'b': np.float32(2.5)}
  devices = jax.local_devices()
  out = ferminet_launch.device_put_replicated(x, devices)
  n = len(devices)
  assert out['a'].shape == (n, 2, 3) and out['b'].shape == (n,)
  np.testing.assert_array_equal(np.asarray(out['a'])[0], x['a'])
  assert {d for s in out['a'].addressable_shards for d in [s.device]} == set(devices)
