"""stages/preflight.py: --dry-run refuses what a run refuses before it writes anything, and
writes nothing."""

import pytest

from ferminet_fast import InputError
from ferminet_fast.runtime import cli
from ferminet_fast.stages import preflight


def test_a_dry_run_refuses_what_the_run_refuses(tmp_path):
  """The system built (geometries drawn, walkers split over them), a relaxation, the run
  restored from, one both restored and fine-tuned: each refused, nothing written."""
  two = "--config.system.geometries=('H 0 0 0; H 0 0 1.4','H 0 0 0; H 0 0 1.6')"
  (tmp_path / 'empty').mkdir()
  run = tmp_path / 'run'
  for args, words in (([two, '--config.optim.geometries_per_step=3', '--config.batch_size=8'],
                       'geometries_per_step = 3 exceeds the 2 geometries'),
                      ([two, '--config.batch_size=7'], 'does not split evenly'),
                      (['--config.system.molecule=H 0 0 0', '--config.system.spin=1',
                        '--config.system.relax=True'], 'one nucleus has no geometry'),
                      ([f'--config.log.restore_path={tmp_path / "empty"}'],
                       'holds no checkpoint'),
                      ([f'--config.log.restore_path={tmp_path / "empty"}',
                        f'--config.log.fine_tune_from={tmp_path / "empty"}'],
                       'restore_path and config.log.fine_tune_from are both given')):
    with pytest.raises(InputError, match=words):
      preflight.dry_run(cli.resolve(['train', *args, f'--config.log.save_path={run}']))
    assert not run.exists()
  assert 'batch_size: 8' in preflight.dry_run(cli.resolve(['train', two,
                                                            '--config.batch_size=8']))
