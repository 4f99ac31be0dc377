"""Recovery from NaN and blow-ups: corrupted or damaged parameters are rewound to the last
good state, NaN walkers are restarted, and a run that cannot recover stops with an error,
never checkpointing a non-finite state."""

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

import faults
from conftest import tiny_config
from ferminet_fast import TrainingError, train
from ferminet_fast.runtime import checkpoint

INJECT_AT = 12  # Step at which NaN is injected.


def cfg_for(path, **extra):
  return tiny_config('He', **{'optim.iterations': 40, 'log.save_path': str(path),
                              'optim.snapshot_every': 5, **extra})


def train_injecting(cfg, into):
  with faults.injected(faults.nan_injector(INJECT_AT, into)):
    return train.train(cfg, quiet=True)


def all_finite(tree):
  return all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(tree))


def stats_steps(path):
  return np.loadtxt(path / 'stats.csv', delimiter=',', skiprows=1, usecols=0)


def test_nan_parameters_rewind_to_the_last_good_state(tmp_path):
  result = train_injecting(cfg_for(tmp_path / 'run'), 'params')
  assert result.timings['rewinds'] == 1
  assert all_finite(result.state.params)
  assert np.isfinite(result.history['energy'][-10:]).all()
  # The rewound steps were replaced, not duplicated.
  np.testing.assert_array_equal(stats_steps(tmp_path / 'run'), np.arange(40))


def test_nan_walkers_are_restarted_without_a_rewind(tmp_path):
  result = train_injecting(cfg_for(tmp_path / 'run'), 'walkers')
  assert result.timings['rewinds'] == 0
  assert all_finite(result.state)
  assert result.history['nonfinite'].sum() == 0  # Restarted before any energy was taken.


def test_unrecoverable_run_stops_and_keeps_only_finite_checkpoints(tmp_path):
  path = tmp_path / 'run'
  cfg = cfg_for(path, **{'optim.max_rewinds': 0, 'log.save_every': 2,
                         'log.keep_checkpoints': 20, 'log.save_frequency': 0.0})
  with pytest.raises(TrainingError, match='could not recover'):
    train_injecting(cfg, 'params')
  manager = ocp.CheckpointManager(checkpoint.directory(str(path)))
  steps = manager.all_steps()
  assert steps and max(steps) <= INJECT_AT
  for s in steps:
    assert all_finite(manager.restore(s, args=ocp.args.StandardRestore()))
  manager.close()


def test_damaged_parameters_rewind_to_the_last_good_state(tmp_path):
  """Parameters damaged but finite (each scaled by 1 + 5 z) keep the variance of the local
  energy hundreds of times above its median: the run rewinds to the snapshot before the
  damage and ends as healthy as it was; with the guard off it does not rewind and ends
  damaged."""
  def run(path, factor):
    cfg = cfg_for(path, **{'optim.iterations': 60, 'optim.blowup_window': 10,
                           'optim.blowup_factor': factor})
    with faults.injected(faults.fault_injector(30, lambda s: faults.damage_params(s, 5.0))):
      return train.train(cfg, quiet=True)

  guarded = run(tmp_path / 'guarded', 20.0)
  before = np.median(guarded.history['variance'][20:30])
  assert guarded.timings['rewinds'] == 1
  assert np.median(guarded.history['variance'][-10:]) < 5 * before
  np.testing.assert_array_equal(stats_steps(tmp_path / 'guarded'), np.arange(60))
  unguarded = run(tmp_path / 'unguarded', 0.0)
  assert unguarded.timings['rewinds'] == 0
  assert np.median(unguarded.history['variance'][-10:]) > 20 * before
