"""Evaluation: frozen parameters, reblocked energy written to eval.json, clean errors."""

import json
import os

import jax
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, evaluate, train
from ferminet_fast.run import checkpoint


def test_evaluation_freezes_parameters_and_reports(tmp_path):
  path = tmp_path / 'run'
  cfg = tiny_config('He', **{'optim.iterations': 150, 'batch_size': 128,
                             'log.save_path': str(path)})
  trained = train.train(cfg, quiet=True)
  files_before = {f: os.path.getmtime(os.path.join(dp, f))
                  for dp, _, fs in os.walk(path / 'checkpoints') for f in fs}
  est = evaluate.evaluate(str(path), steps=60, burn_in=10, quiet=True)
  result = json.loads((path / 'eval.json').read_text())
  assert result['checkpoint_step'] == 150 and result['steps'] == 60
  assert np.isfinite(est.mean) and est.error > 0
  assert est.mean > -2.9037 - 5 * est.error  # Variational.
  # Same parameters as training's end: evaluation restores, never writes, the checkpoint.
  _, restored = checkpoint.restore_latest(str(path), trained.state)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(restored.params),
                                                  jax.tree.leaves(trained.state.params)))
  assert files_before == {f: os.path.getmtime(os.path.join(dp, f))
                          for dp, _, fs in os.walk(path / 'checkpoints') for f in fs}
  # Frozen parameters: the evaluated energy agrees with training's last steps roughly.
  assert abs(est.mean - trained.history['energy'][-30:].mean()) < 0.1
  # By default the parameters averaged over the last 3% of the updates
  # (optim.average_fraction): 4.5 of 150; on request the last.
  assert result['parameters'] == 'average' and result['average_updates'] == pytest.approx(4.5)
  last = evaluate.evaluate(str(path), steps=60, burn_in=10, quiet=True, parameters='last')
  assert json.loads((path / 'eval.json').read_text())['parameters'] == 'last'
  assert last.mean > -2.9037 - 5 * last.error and abs(last.mean - est.mean) < 0.1
  with pytest.raises(InputError, match="--parameters 'first' is not one of average, last"):
    evaluate.evaluate(str(path), steps=60, quiet=True, parameters='first')


def test_evaluating_a_directory_without_checkpoint_is_an_error(tmp_path):
  with pytest.raises(InputError, match='holds no checkpoint'):
    evaluate.evaluate(str(tmp_path), steps=10, quiet=True)
