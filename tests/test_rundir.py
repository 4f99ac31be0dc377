"""The run directory's JSON files are strict JSON: what has no value (the error bar of a run
too short to reblock) is null, never the NaN token that strict readers refuse."""

import json
import math
import os
import shutil

import numpy as np
import pytest

from ferminet_fast import InputError
from ferminet_fast.runtime import rundir


def _refuse(token):
  raise ValueError(f'{token} is not JSON')


def test_non_finite_numbers_are_written_as_null(tmp_path):
  path = str(tmp_path / 'result.json')
  rundir.write_json(path, {'energy': -2.9, 'error': float('nan'), 'tau': np.float32('inf'),
                           'per_tau': [{'error': np.float64('nan')}, (1.5, -math.inf)],
                           'step': np.int64(3), 'label': 'He'})
  with open(path) as f:
    text = f.read()
  assert json.loads(text, parse_constant=_refuse) == {
      'energy': -2.9, 'error': None, 'tau': None, 'per_tau': [{'error': None}, [1.5, None]],
      'step': 3.0, 'label': 'He'}
  assert rundir.read_json(path)['energy'] == -2.9


def test_a_value_json_cannot_hold_is_refused_and_leaves_the_earlier_file(tmp_path):
  path = str(tmp_path / 'eval.json')
  rundir.write_json(path, {'energy': -2.9})
  with pytest.raises(TypeError):
    rundir.write_json(path, {'energy': object()})
  assert rundir.read_json(path) == {'energy': -2.9}
  assert [p.name for p in tmp_path.iterdir()] == ['eval.json']


def test_a_file_that_cannot_take_the_place_of_the_path_leaves_no_temporary(tmp_path):
  (tmp_path / 'out.json').mkdir()
  with pytest.raises(OSError):
    rundir.write_json(str(tmp_path / 'out.json'), {'energy': -2.9})
  assert [p.name for p in tmp_path.iterdir()] == ['out.json']


def test_a_saved_config_that_is_not_settings_is_refused(tmp_path):
  (tmp_path / rundir.CONFIG).write_text('[]')
  with pytest.raises(InputError, match='config.json is not as ferminet_fast writes it'):
    rundir.saved_config(str(tmp_path))


def test_checkpoints_without_their_config_are_not_overwritten(tmp_path):
  """A directory holding checkpoints but no config.json (an earlier run's, partly removed)
  is refused as a new run's path: the new run's checkpoints would retire the old ones."""
  run = tmp_path / 'run'
  shutil.copytree(os.path.join(os.path.dirname(__file__), 'data', 'run_jax0.8.3_kfac'), run)
  for name in rundir.RUN_FILES:  # Only the checkpoints are left.
    if (run / name).exists():
      (run / name).unlink()
  before = sorted(str(p) for p in run.rglob('*'))
  with pytest.raises(InputError, match='holds checkpoints but no config.json'):
    rundir.prepare(str(run), 'He', {})
  assert sorted(str(p) for p in run.rglob('*')) == before
