"""Checkpoints: resume equals an uninterrupted run bitwise; damaged checkpoints are skipped;
config changes that alter the state's shapes are refused; SIGTERM checkpoints and exits."""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings

import jax
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, train
from ferminet_fast.optimizers import optim

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cfg_for(path, iterations, **extra):
  return tiny_config('He', **{'optim.iterations': iterations, 'log.save_path': str(path),
                              'log.save_every': 10, 'log.save_frequency': 0.0, **extra})


def leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope='module')
def straight(tmp_path_factory):
  """An uninterrupted 30-step run."""
  return train.train(cfg_for(tmp_path_factory.mktemp('a') / 'run', 30), quiet=True)


@pytest.mark.jax_range
def test_resumed_run_is_bitwise_the_uninterrupted_run(tmp_path, straight):
  path = tmp_path / 'run'
  train.train(cfg_for(path, 20), quiet=True)
  resumed = train.train(cfg_for(path, 30), quiet=True)
  assert leaves_equal(resumed.state.params, straight.state.params)
  assert leaves_equal(resumed.state.walkers.x, straight.state.walkers.x)
  np.testing.assert_array_equal(resumed.history['energy'], straight.history['energy'])
  steps = np.loadtxt(path / 'stats.csv', delimiter=',', skiprows=1, usecols=0)
  np.testing.assert_array_equal(steps, np.arange(30))


def test_only_the_last_checkpoints_are_kept(tmp_path):
  path = tmp_path / 'run'
  train.train(cfg_for(path, 50, **{'log.keep_checkpoints': 2}), quiet=True)
  assert sorted(int(d) for d in os.listdir(path / 'checkpoints') if d.isdigit()) == [40, 50]
  assert not os.listdir(path / 'checkpoints' / 'retired')  # Retired ones are deleted.


def test_damaged_latest_checkpoint_is_skipped(tmp_path, straight):
  path = tmp_path / 'run'
  train.train(cfg_for(path, 20), quiet=True)
  for f in glob.glob(str(path / 'checkpoints' / '20' / '**' / '*'), recursive=True):
    if os.path.isfile(f) and 'METADATA' not in f and not f.endswith('.txt'):
      with open(f, 'r+b') as fh:
        fh.truncate(max(0, os.path.getsize(f) // 3))
  with pytest.warns(UserWarning, match='cannot be restored'):
    resumed = train.train(cfg_for(path, 30), quiet=True)
  assert leaves_equal(resumed.state.params, straight.state.params)  # Redone from step 10.
  steps = np.loadtxt(path / 'stats.csv', delimiter=',', skiprows=1, usecols=0)
  np.testing.assert_array_equal(steps, np.arange(30))


def test_changing_the_network_on_resume_is_refused(tmp_path):
  path = tmp_path / 'run'
  train.train(cfg_for(path, 10), quiet=True)
  before = {f: os.path.getmtime(path / f) for f in ('config.json', 'stats.csv')}
  with pytest.raises(InputError, match='network.determinants'):
    train.train(cfg_for(path, 20, **{'network.determinants': 3}), quiet=True)
  assert before == {f: os.path.getmtime(path / f) for f in ('config.json', 'stats.csv')}


def test_restore_path_starts_from_another_run(tmp_path, straight):
  result = train.train(cfg_for(tmp_path / 'new', 30, **{'log.restore_path': straight.run_dir}),
                       quiet=True)
  assert int(result.state.step) == 30 and len(result.history['energy']) == 0
  with pytest.raises(InputError, match='holds no checkpoint'):
    train.train(cfg_for(tmp_path / 'x', 5, **{'log.restore_path': str(tmp_path)}), quiet=True)


@pytest.mark.parametrize('key,begins_at', [('log.restore_path', 30), ('log.fine_tune_from', 0)])
def test_a_resubmitted_job_resumes_once_its_source_is_gone(tmp_path, straight, key, begins_at):
  """A job restored or fine-tuned from another run and stopped, then resubmitted with the
  same command, continues its own checkpoint, also once the other run is gone."""
  source, run = tmp_path / 'source', tmp_path / 'run'
  shutil.copytree(straight.run_dir, source)
  train.train(cfg_for(run, begins_at + 10, **{key: str(source)}), quiet=True)
  shutil.rmtree(source)
  result = train.train(cfg_for(run, begins_at + 20, **{key: str(source)}), quiet=True)
  steps = np.loadtxt(run / 'stats.csv', delimiter=',', skiprows=1, usecols=0)
  assert int(result.state.step) == begins_at + 20
  np.testing.assert_array_equal(steps, np.arange(begins_at, begins_at + 20))


def test_sigterm_checkpoints_then_exits_for_requeue(tmp_path):
  path = tmp_path / 'run'
  args = [sys.executable, '-m', 'ferminet_fast.train', '--config.optim.iterations=100000',
          f'--config.log.save_path={path}', '--config.log.timers=false',
          '--config.network.ferminet.hidden_dims=((8,4),)', '--config.batch_size=32',
          '--config.mcmc.burn_in=10']
  proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 120
  while time.time() < deadline:
    stats = path / 'stats.csv'
    if stats.exists() and stats.stat().st_size > 200:
      break
    time.sleep(0.2)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == train.EXIT_PREEMPTED, err
  assert 'SIGTERM received' in out
  saved = max(int(d) for d in os.listdir(path / 'checkpoints') if d.isdigit())
  rows = (path / 'stats.csv').read_text().splitlines()
  assert saved == len(rows) - 1 > 0  # Checkpoint at the last recorded step.


def test_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
  path = tmp_path / 'run'
  cfg = cfg_for(path, 10)
  path.mkdir()
  # What a run killed during start-up leaves: its config and a partial stats.csv.
  (path / 'config.json').write_text(json.dumps(cfg.to_dict()))
  (path / 'stats.csv').write_text('step,energy\n0,-2.0\n')
  result = train.train(cfg, quiet=True)
  assert int(result.state.step) == 10
  steps = np.loadtxt(path / 'stats.csv', delimiter=',', skiprows=1, usecols=0)
  np.testing.assert_array_equal(steps, np.arange(10))
  # Another config's leftovers are not overwritten.
  other = tmp_path / 'other'
  other.mkdir()
  (other / 'config.json').write_text(json.dumps(cfg_for(other, 99).to_dict()))
  with pytest.raises(InputError, match="another run's files"):
    train.train(cfg_for(other, 10), quiet=True)


@pytest.mark.jax_range
def test_checkpoint_written_under_the_oldest_jax_resumes_and_evaluates(tmp_path):
  """tests/data/run_jax0.8.3_kfac: 3 KFAC steps of a tiny Li run saved under jax 0.8.3 (the
  oldest supported) in today's layout. Whatever JAX runs this test restores all of it
  (optimizer state included), continues training from step 3 and evaluates it."""
  import shutil
  import warnings
  from ferminet_fast import evaluate
  from ferminet_fast.runtime import checkpoint, rundir
  run = tmp_path / 'old'
  shutil.copytree(os.path.join(REPO, 'tests', 'data', 'run_jax0.8.3_kfac'), run)
  saved = json.loads((run / 'timings.json').read_text())['versions']
  assert saved['jax'] == '0.8.3'
  cfg = rundir.read_config(str(run))
  cfg.optim.iterations = 6
  cfg.log.save_path = str(run)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    result = train.train(cfg, quiet=True)
  skipped = [str(w.message) for w in caught if 'cannot be restored' in str(w.message)]
  assert not skipped, skipped  # The newest checkpoint itself restored.
  assert [int(s) for s in result.history['step']] == list(range(6))
  assert np.all(np.isfinite(result.history['energy']))
  assert int(optim.applied_updates(result.state.opt_state)) == 6  # The counter went on from 3.
  estimate = evaluate.evaluate(str(run), steps=4, burn_in=1, quiet=True)
  assert np.isfinite(estimate.mean)
  assert checkpoint.has_checkpoint(str(run))


def test_checkpoint_of_an_earlier_layout_is_refused_and_left_intact(tmp_path, capfd):
  """A checkpoint whose optimizer state has another structure (here that of the optimizer
  before the parameters' average: reject_nonfinite(scaled_by_schedule(direction))) is
  refused by training, its command line and evaluation alike with one message naming the
  run and the incompatible version, and the run's files are left byte for byte."""
  import hashlib
  import shutil
  from ferminet_fast import evaluate
  from ferminet_fast.runtime import checkpoint, cli
  path = tmp_path / 'run'
  cfg = cfg_for(path, 3)
  _, state = checkpoint.restore_latest(str(path), train.train(cfg, quiet=True).state)
  old = optim.RejectState(state.opt_state.rejected, optim.schedule_state(state.opt_state))
  shutil.rmtree(path / 'checkpoints')
  saver = checkpoint.Checkpointer(str(path), 3, 0, 0.0)
  saver.save(3, state._replace(opt_state=old))
  saver.close()

  def files():
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob('*')) if f.is_file()}

  before = files()
  refusal = (f'the checkpoint of step 3 in {checkpoint.directory(str(path))} was written by '
             'an earlier, incompatible version')
  cfg.optim.iterations = 5
  capfd.readouterr()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    with pytest.raises(InputError, match=re.escape(refusal)):
      train.train(cfg, quiet=True)
    with pytest.raises(SystemExit) as exited, cli.exit_on_error():
      train.train(cfg, quiet=True)
    with pytest.raises(InputError, match=re.escape(refusal)):
      evaluate.evaluate(str(path), steps=4, burn_in=1, quiet=True)
  assert exited.value.code == cli.EXIT_INPUT
  err = capfd.readouterr().err
  assert err.count('error: ') == 1 and refusal in err and 'Traceback' not in err, err
  assert not [w for w in caught if 'cannot be restored' in str(w.message)]  # No other message.
  assert files() == before
