"""Fresh start or resume: a new directory starts fresh, another run's files are refused
before anything is written, a restore path without a checkpoint is refused, and a
checkpoint made with settings of other shapes is refused with the keys named."""

import os

import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config
from ferminet_fast.environment import distributed
from ferminet_fast.runtime import resume, rundir


@pytest.fixture(scope='module')
def ctx():
  return distributed.context(64)


def test_a_new_directory_starts_fresh(tmp_path, ctx):
  cfg = tiny_config('He', **{'log.save_path': str(tmp_path / 'new')})
  source = resume.decide(ctx, cfg, 'He')
  assert source == resume.Source(str(tmp_path / 'new'), False, '')
  assert os.path.isdir(tmp_path / 'new')


def test_another_runs_files_are_refused_and_kept(tmp_path, ctx):
  run = tmp_path / 'old'
  run.mkdir()
  (run / 'result.json').write_text('{"energy": -2.9}\n')
  cfg = tiny_config('He', **{'log.save_path': str(run)})
  with pytest.raises(InputError, match="another run's files"):
    resume.decide(ctx, cfg, 'He')
  assert (run / 'result.json').read_text() == '{"energy": -2.9}\n'


def test_a_restore_path_without_checkpoint_is_refused(tmp_path, ctx):
  cfg = tiny_config('He', **{'log.save_path': str(tmp_path / 'new'),
                             'log.restore_path': str(tmp_path)})
  with pytest.raises(InputError, match='holds no checkpoint'):
    resume.decide(ctx, cfg, 'He')
  assert not os.path.exists(tmp_path / 'new')


def test_shapes_must_match_to_resume(tmp_path):
  saved = tiny_config('He').to_dict()
  rundir.write_json(str(tmp_path / 'config.json'), saved)
  resume.check_compatible(str(tmp_path), tiny_config('He', **{'optim.iterations': 99}))
  with pytest.raises(InputError, match=r'network.determinants: 2 -> 3'):
    resume.check_compatible(str(tmp_path), tiny_config('He', **{'network.determinants': 3}))
  assert config.structural_differences(saved, tiny_config('He', **{
      'batch_size': 32, 'network.ferminet.hidden_dims': ((8, 4),)}).to_dict()) == [
          'batch_size: 64 -> 32',
          'network.ferminet.hidden_dims: ((16, 4), (16, 4)) -> ((8, 4),)']
