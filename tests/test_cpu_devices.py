"""The CPU split into devices: 'auto' takes one device per core that splits the batch, a
count the user gave JAX wins, the split trains to the one-device result, and a count that
can no longer take effect is one clear error."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from conftest import tiny_config, xla_flags
from ferminet_fast import InputError, config, evaluate, plan, train
from ferminet_fast.environment import cpu_devices
from test_distributed import REPO, assert_close, overrides, params_of, run_worker

# The suite's flags without a device count.
NO_COUNT = ' '.join(f for f in xla_flags().split()
                    if not f.startswith('--xla_force_host_platform_device_count'))


@pytest.mark.parametrize('batch, cores, expected', [
    (256, 2, 2), (256, 16, 16), (64, 6, 4), (63, 2, 1), (7, 16, 7), (4096, 1, 1)])
@pytest.mark.jax_range
def test_auto_takes_the_most_devices_that_split_the_batch(batch, cores, expected):
  assert cpu_devices.count('auto', batch, cores, {}, False, faulty=False) == expected


@pytest.mark.parametrize('version, faulty', [
    ((0, 8, 3), False), ((0, 9, 2), False), ((0, 10, 0), True), ((0, 10, 2), True),
    ((0, 11, 0), True), ((0, 11, 1), False), ((0, 12, 0), False)])
@pytest.mark.jax_range
def test_auto_keeps_one_device_on_the_jaxlib_whose_lapack_deadlocks(version, faulty):
  """jaxlib 0.10.0-0.11.0 deadlock two devices' batched LU factorisations side by side
  (tests/test_ordering.py reproduces it): 'auto' keeps one device there; a count the user
  asks for is still taken."""
  assert cpu_devices.lapack_fault(version) == faulty
  assert cpu_devices.count('auto', 256, 2, {}, False, faulty=faulty) == (1 if faulty else 2)
  assert cpu_devices.count(2, 256, 2, {}, False, faulty=faulty) == 2


@pytest.mark.parametrize('environ, multi_process', [
    ({'XLA_FLAGS': '--xla_force_host_platform_device_count=3'}, False),
    ({'JAX_NUM_CPU_DEVICES': '1'}, False),
    ({}, True)])
@pytest.mark.jax_range
def test_auto_leaves_a_users_count_and_multi_process_runs_alone(environ, multi_process):
  assert cpu_devices.count('auto', 256, 2, environ, multi_process) is None
  assert cpu_devices.count(3, 256, 2, environ, multi_process) == 3  # A number is taken.


@pytest.mark.parametrize('value', [0, -1, 'two', 1.5, True])
@pytest.mark.jax_range
def test_a_bad_count_is_one_clear_error(value):
  with pytest.raises(InputError, match='distributed.cpu_devices'):
    config.validate(tiny_config('He', **{'distributed.cpu_devices': value}))


def test_auto_trains_and_evaluates_on_one_device_per_core_to_the_one_device_result(tmp_path):
  """Fresh processes with no count given: 'auto' splits the 2-core CI machine into two
  devices, one thread each, records the count, and trains to the parameters of one device
  and evaluates to its energy (the sums over walkers are split differently: equal to float32
  rounding)."""
  reference = tmp_path / 'one'
  result = train.train(tiny_config('He', **overrides(reference)), quiet=True)
  expected = cpu_devices.count('auto', 64, cpu_devices.cores(), {}, False)  # This jaxlib's.
  [r] = run_worker(overrides(tmp_path / 'run'), flags=NO_COUNT)
  assert r.returncode == 0, r.stderr[-2000:]
  assert f'devices {expected} processes 1' in r.stdout
  one_thread_each = cpu_devices.ONE_THREAD_EACH in r.stdout
  assert one_thread_each == (expected > 1)
  resolved = json.loads((tmp_path / 'run' / plan.RESOLVED).read_text())
  assert resolved['distributed.cpu_devices'] == expected
  assert_close(params_of(tmp_path / 'run'),
               [np.asarray(p) for p in jax.tree.leaves(result.state.params)])
  # Evaluation splits the same way, and gives the one-device evaluation's energy.
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={tmp_path}/run',
                         '--steps=4', '--burn_in=1'], env=dict(os.environ, XLA_FLAGS=NO_COUNT),
                        cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  split = json.loads((tmp_path / 'run' / 'eval.json').read_text())['energy']
  one = evaluate.evaluate(str(tmp_path / 'run'), steps=4, burn_in=1, quiet=True).mean
  np.testing.assert_allclose(split, one, rtol=1e-5)


@pytest.mark.jax_range
def test_a_count_that_does_not_split_the_batch_is_one_clear_error(tmp_path):
  [r] = run_worker(overrides(tmp_path / 'run', **{'distributed.cpu_devices': 3}),
                   flags=NO_COUNT)
  assert r.returncode == 2
  assert 'batch_size = 64 does not divide evenly over the 3 devices' in r.stdout
  assert not (tmp_path / 'run').exists()


@pytest.mark.jax_range
def test_a_count_after_jax_started_is_kept_or_refused():
  """This process's JAX has started with one CPU device: 'auto' and 1 keep it; 2 cannot
  take effect any more and says so when training asks for it."""
  jax.numpy.ones(1).block_until_ready()
  assert len(jax.devices('cpu')) == 1
  for value in ('auto', 1):
    plan.settings(tiny_config('He', **{'distributed.cpu_devices': value}))
  with pytest.raises(InputError, match='cpu_devices = 2: JAX has already started'):
    plan.settings(tiny_config('He', **{'distributed.cpu_devices': 2}))
  # A trained run's count, read by evaluation or DMC, is kept as it is.
  plan.settings(tiny_config('He', **{'distributed.cpu_devices': 2}), later_stage=True)
  assert len(jax.devices('cpu')) == 1
