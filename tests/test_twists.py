"""stages/twists.py: a twist average reads each run's result, and refuses one that is not."""

import pytest

from ferminet_fast import InputError
from ferminet_fast.runtime import rundir
from ferminet_fast.stages import twists


def test_a_result_without_its_energy_is_named(tmp_path):
  rundir.write_json(str(tmp_path / 'eval.json'), {'error': 0.001})
  with pytest.raises(InputError, match='not as ferminet_fast writes it .no energy, '
                     'checkpoint_step.; run python -m ferminet_fast.evaluate --run'):
    twists.result_of(str(tmp_path), 'eval.json')
  result = {'energy': -1.0, 'error': 0.001, 'checkpoint_step': 10}
  rundir.write_json(str(tmp_path / 'eval.json'), result)
  assert twists.result_of(str(tmp_path), 'eval.json') == result


@pytest.mark.parametrize('out,words', [('.', 'is a directory'),
                                       ('no/average.json', 'no folder'),
                                       ('run/average.json', 'inside one of the runs')])
def test_an_output_it_cannot_write_is_refused(tmp_path, out, words):
  (tmp_path / 'run').mkdir()
  with pytest.raises(InputError, match=words):
    twists.check_out([str(tmp_path / 'run')], str(tmp_path / out))
  twists.check_out([str(tmp_path / 'run')], str(tmp_path / 'average.json'))
