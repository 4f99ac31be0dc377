"""The run directory's JSON files are strict JSON: what has no value (the error bar of a run
too short to reblock) is null, never the NaN token that strict readers refuse."""

import json
import math

import numpy as np
import pytest

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
