"""Walkers sharded over devices and processes give the single-device result; a checkpoint
restores onto another device count; an indivisible batch is one clear error.

Device counts are fixed when JAX starts, so the multi-device runs are subprocesses
(XLA's host-platform device count on CPU; two processes joined by
jax.distributed on localhost)."""

import json
import os
import socket
import stat
import subprocess
import sys

import jax
import numpy as np
import pytest

from conftest import tiny_config, xla_flags
from ferminet_fast import train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Trains the tiny He config with the given overrides in a fresh process with `devices`
# CPU devices and writes the final parameters (its first device's copy) to
# <save_path>/params.npz (process 0) or params_p<i>.npz (process i).
WORKER = '''
import json, os, sys
sys.path.insert(0, {tests!r})
from conftest import tiny_config
from ferminet_fast import InputError, train
import jax, numpy as np
cfg = tiny_config('He', **json.loads(sys.argv[1]))
try:
  r = train.train(cfg, quiet=True)
except InputError as e:
  print('InputError:', e)
  sys.exit(2)
name = 'params.npz' if jax.process_index() == 0 else f'params_p{{jax.process_index()}}.npz'
np.savez(os.path.join(cfg.log.save_path, name),
         *[np.asarray(p.addressable_data(0)) for p in jax.tree.leaves(r.state.params)])
print('devices', jax.device_count(), 'processes', jax.process_count())
print('XLA_FLAGS', os.environ.get('XLA_FLAGS', ''))
'''.format(tests=os.path.join(REPO, 'tests'))


def run_worker(overrides: dict, devices: int = 2, processes: int = 1, timeout=300,
               flags=None):
  """The worker in `processes` fresh processes of `devices` CPU devices each (or with XLA_FLAGS
  = `flags`, when given)."""
  env = dict(os.environ, XLA_FLAGS=xla_flags(devices) if flags is None else flags)
  if processes == 1:
    return [subprocess.run([sys.executable, '-c', WORKER, json.dumps(overrides)], env=env,
                           capture_output=True, text=True, timeout=timeout, cwd=REPO)]
  with socket.socket() as s:
    s.bind(('localhost', 0))
    port = s.getsockname()[1]
  procs = [subprocess.Popen(
      [sys.executable, '-c', WORKER, json.dumps({
          **overrides, 'distributed.coordinator': f'localhost:{port}',
          'distributed.num_processes': processes, 'distributed.process_id': i})],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
      for i in range(processes)]
  out = []
  for p in procs:
    stdout, stderr = p.communicate(timeout=timeout)
    out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
  return out


def params_of(path, name='params.npz'):
  with np.load(os.path.join(path, name)) as f:
    return [f[k] for k in sorted(f.files, key=lambda k: int(k.split('_')[1]))]


def overrides(path, iterations=20, **extra):
  return {'optim.iterations': iterations, 'log.save_path': str(path), **extra}


@pytest.fixture(scope='module')
def single(tmp_path_factory):
  """The reference: one device, this process."""
  path = tmp_path_factory.mktemp('one') / 'run'
  result = train.train(tiny_config('He', **overrides(path)), quiet=True)
  return path, [np.asarray(p) for p in jax.tree.leaves(result.state.params)], result


def assert_close(a, b):
  # Sums over walkers are split differently, so agreement is to float32 rounding.
  for x, y in zip(a, b):
    np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-5)


def test_two_devices_equal_one_device(tmp_path, single):
  # Local energies in chunks of 16 walkers (8 from each device): the same result.
  [r] = run_worker(overrides(tmp_path / 'run', **{'optim.energy_chunk_size': 16}))
  assert r.returncode == 0, r.stderr[-2000:]
  assert 'devices 2 processes 1' in r.stdout
  assert_close(params_of(tmp_path / 'run'), single[1])
  timings = json.loads((tmp_path / 'run' / 'timings.json').read_text())
  assert timings['devices'] == 2 and timings['walkers_per_device'] == 32


@pytest.mark.jax_range
def test_two_processes_on_localhost_equal_one_device(tmp_path, single):
  results = run_worker(overrides(tmp_path / 'run'), devices=1, processes=2)
  for r in results:
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'devices 2 processes 2' in r.stdout
  assert_close(params_of(tmp_path / 'run'), single[1])
  # Process 1 writes no run files (regression: it once wrote its timings "to /dev/null"
  # by an atomic rename that replaced the device with a regular file).
  assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
  # Process 0 alone wrote the statistics: one row per step.
  steps = np.loadtxt(tmp_path / 'run' / 'stats.csv', delimiter=',', skiprows=1, usecols=0)
  np.testing.assert_array_equal(steps, np.arange(20))


@pytest.mark.jax_range
def test_processes_anneal_by_one_clock_and_stop_at_one_step(tmp_path):
  """A time budget with the rate annealed towards it: every process takes process 0's
  clock, so the replicated parameters stay the same on both, bit for bit, and both stop
  after the same step."""
  results = run_worker(overrides(tmp_path / 'run', iterations=100000, **{
      'optim.seconds': 2.0, 'optim.lr.anneal': 1.0, 'batch_size': 16,
      'network.ferminet.hidden_dims': ((8, 4),)}), devices=1, processes=2)
  for r in results:
    assert r.returncode == 0, r.stderr[-2000:]
  for a, b in zip(params_of(tmp_path / 'run'), params_of(tmp_path / 'run', 'params_p1.npz')):
    np.testing.assert_array_equal(a, b)
  saved = json.loads((tmp_path / 'run' / 'result.json').read_text())
  lr = np.loadtxt(tmp_path / 'run' / 'stats.csv', delimiter=',', skiprows=1, usecols=5)
  assert saved['stopped_at_time_budget'] == len(lr) > 2 and lr[-1] < 0.5 * lr[0]


def test_checkpoint_restores_onto_another_device_count(tmp_path, single):
  path = tmp_path / 'run'
  train.train(tiny_config('He', **overrides(path, iterations=10)), quiet=True)
  [r] = run_worker(overrides(path, iterations=20))  # Resumed on two devices.
  assert r.returncode == 0, r.stderr[-2000:]
  assert_close(params_of(path), single[1])


@pytest.mark.jax_range
def test_batch_not_divisible_by_devices_is_a_clear_error(tmp_path):
  [r] = run_worker(overrides(tmp_path / 'run', **{'batch_size': 63}))
  assert r.returncode == 2
  assert 'batch_size = 63 does not divide evenly over the 2 devices' in r.stdout
  assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('processes,index,words', [
    (2, 2, 'process_id = 2 is not one of the 2 processes'),
    (0, 0, 'num_processes .>= 1. and process_id .>= 0. must be set too'),
    (2, -1, 'num_processes .>= 1. and process_id .>= 0. must be set too')])
def test_a_process_index_out_of_its_count_is_a_clear_error(processes, index, words):
  """With a coordinator given, the process count and this process's index are checked with
  the settings, before jax.distributed.initialize, which would otherwise wait for processes
  that never come."""
  from ferminet_fast import config
  from ferminet_fast.errors import InputError
  cfg = tiny_config('He', **{'distributed.coordinator': 'localhost:1',
                             'distributed.num_processes': processes,
                             'distributed.process_id': index})
  with pytest.raises(InputError, match=words):
    config.validate(cfg)
