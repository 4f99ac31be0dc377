"""scripts/pes_race.py: each geometry's energy from DeepQMC's log of sampled geometries, the
mean absolute errors and the verdict judged from them, and an empty artifact rendering as not
measured."""

import numpy as np
import pytest

from ferminet_fast.vmc import stats
from scripts import pes_race


def test_each_geometry_takes_its_own_steps_after_its_burn_in():
  """Geometry k's energies are the walker means of the steps that sampled k, its first
  BURN_IN left out; a geometry never sampled has none."""
  rng = np.random.default_rng(0)
  n = pes_race.BURN_IN + 50
  indices = np.array([[0, 1]] * n)  # Two of three geometries sampled each step.
  means = np.where(indices == 0, -1.0, -2.0) + 0.01 * rng.standard_normal(indices.shape)
  means[:pes_race.BURN_IN] += 5.0  # Not equilibrated: must be discarded.
  rows = pes_race.per_geometry(means, indices, 3, pes_race.BURN_IN)
  assert [r['sweeps'] for r in rows] == [50, 50, 0] and rows[2]['energy'] is None
  assert rows[0]['energy'] == pytest.approx(stats.reblock(means[pes_race.BURN_IN:, 0]).mean)
  assert rows[1]['energy'] == pytest.approx(-2.0, abs=0.01)
  # Non-finite local energies, left out of the means, are counted after the burn-in only.
  bad = np.zeros(indices.shape, int)
  bad[0, 1], bad[-1, 1] = 4, 1
  rows = pes_race.per_geometry(means, indices, 3, pes_race.BURN_IN, bad)
  assert [r['nonfinite'] for r in rows] == [0, 1, 0]


def entry(ours, peer, error=0.1e-3):
  side = lambda es: {'steps': 10, 'geometries': [{'energy': e, 'error': error, 'sweeps': 500}
                                                  for e in es]}
  return {'row': 'h2', 'seconds': 600.0, 'reference': {'energies': [-1.0, -1.1]},
          'ours': side(ours), 'deepqmc': side(peer)}


def test_verdicts():
  """Mean absolute errors 0.5 and 3 mHa, each with error 0.1 / sqrt(2) mHa: ours lower by
  2.5 mHa, beyond twice the combined 0.1 mHa; lower by 0.15 mHa is within it and misses;
  a missing energy or a training that ended before the budget is not judged."""
  met = entry([-1.0005, -1.1005], [-0.997, -1.103])
  assert pes_race.verdict(met) == 'met: ours lower by 2.50 ± 0.10 mHa'
  assert pes_race.verdict(entry([-1.0005, -1.1005], [-1.00065, -1.10065])).startswith('missed')
  assert pes_race.verdict(entry([-1.0, None], [-1.0, -1.1])).startswith('not judged')
  failed = entry([-1.0, -1.1], [-1.0, -1.1])
  failed['deepqmc'].update(ended_early=True, steps=None, geometries=[])
  assert 'DeepQMC ended before the budget' in pes_race.verdict(failed)
  assert '(ended before the budget)' in pes_race.row_line(failed)
  assert '0.50 ± 0.07 (10 steps)' in pes_race.row_line(met)


def test_an_empty_artifact_renders_as_not_measured(tmp_path):
  assert pes_race.render_table(str(tmp_path / 'none.json')).startswith('Not measured yet')


def test_deepqmc_is_evaluated_from_its_newest_checkpoint_within_the_budget(tmp_path):
  """A checkpoint DeepQMC wrote after the budget (while being stopped) is not taken; with
  none written in time the race has nothing to evaluate."""
  import os
  for steps, written in ((0, 100.0), (50, 200.0), (100, 300.0), (150, 400.0)):
    path = tmp_path / f'chkpt-{steps}.pt'
    path.write_bytes(b'')
    os.utime(path, (written, written))
  (tmp_path / 'result.h5').write_bytes(b'')
  assert pes_race.deepqmc_checkpoint(str(tmp_path), 350.0) == ('chkpt-100.pt', 100)
  assert pes_race.deepqmc_checkpoint(str(tmp_path), 400.0) == ('chkpt-150.pt', 150)
  with pytest.raises(RuntimeError, match='no checkpoint'):
    pes_race.deepqmc_checkpoint(str(tmp_path), 50.0)
