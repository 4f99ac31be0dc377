"""The per-step record: stats.csv holds every step once (also across a resume and a
rewind), non-finite steps are counted in a row, and a rejected update is said."""

import csv
from typing import NamedTuple

import numpy as np

from ferminet_fast.runtime import recorder, rundir


class Stats(NamedTuple):  # The fields of vmc.step.StepStats, as host scalars.
  energy: float
  variance: float
  pmove: float
  width: float
  lr: float
  nonfinite: int
  rejected: int
  grad_norm: float = 1.0
  update_norm: float = 0.01
  clipped: float = 0.0
  fisher_step: float = 1e-3
  model_step: float = 1e-3
  energies: object = None  # (G,) over a set of geometries.


def ok(e):
  return Stats(e, 0.1, 0.5, 0.2, 0.01, 0, 0)


def rows(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def test_every_step_once_through_resume_and_rewind(tmp_path):
  path = str(tmp_path / 'stats.csv')
  rec = recorder.Recorder(path, 0, lambda *a: None, resume_from=None)
  for t in range(5):
    rec.push(t, ok(-1.0 - t))
  rec.finish()
  assert [int(r['step']) for r in rows(path)] == list(range(5))
  assert list(rows(path)[0]) == list(rundir.STATS_COLUMNS)

  # Resumed from a checkpoint of step 3: rows 3 and 4 are replaced, not duplicated.
  rec = recorder.Recorder(path, 0, lambda *a: None, resume_from=3)
  assert rec.history['step'] == [0.0, 1.0, 2.0]
  for t in range(3, 8):
    rec.push(t, ok(-2.0))
  rec.rewind(6)  # Back to step 6: the pending step 7 and the recorded step 6 are dropped.
  rec.push(6, ok(-3.0))
  rec.finish()
  steps = [int(r['step']) for r in rows(path)]
  assert steps == list(range(7))
  assert float(rows(path)[6]['energy']) == -3.0
  np.testing.assert_array_equal(rec.history['step'], np.arange(7))


def test_a_run_of_an_older_version_resumes_with_its_rows_kept(tmp_path):
  """Rows written before the diagnostic columns existed are kept on resume, those columns
  empty in the file and NaN in the history; the new rows have them."""
  path = tmp_path / 'stats.csv'
  old = [c for c in rundir.STATS_COLUMNS if c not in rundir.LATER_COLUMNS]
  path.write_text(','.join(old) + '\n' + ''.join(
      ','.join(str(t) if c == 'step' else '0.5' for c in old) + '\n' for t in range(3)))
  rec = recorder.Recorder(str(path), 0, lambda *a: None, resume_from=2)
  assert np.isnan(rec.history['update_norm']).all() and len(rec.history['update_norm']) == 2
  rec.push(2, ok(-1.0))
  rec.finish()
  written = rows(path)
  assert [int(r['step']) for r in written] == [0, 1, 2]
  assert written[0]['update_norm'] == '' and float(written[2]['update_norm']) == 0.01
  assert float(written[0]['energy']) == 0.5


def test_bad_steps_are_counted_in_a_row_and_a_rejection_is_said(tmp_path):
  said = []
  rec = recorder.Recorder(str(tmp_path / 'stats.csv'), 0, said.append, resume_from=None)
  rec.push(0, Stats(np.nan, np.nan, 0.5, 0.2, 0.0, 3, 0))
  rec.push(1, Stats(-1.0, 0.1, 0.5, 0.2, 0.0, 0, 1))
  rec.push(2, ok(-1.0))  # Records step 1 (one step behind).
  assert rec.consecutive_bad == 2 and rec.bad_reason == 'update rejected'
  assert any('update rejected' in s for s in said)
  rec.push(3, ok(-1.0))  # Records step 2, a good one.
  assert rec.consecutive_bad == 0
  rec.finish()


def test_progress_lines_every_print_every_steps(tmp_path):
  said = []
  rec = recorder.Recorder(None, 2, said.append, resume_from=None)  # No file: not process 0.
  for t in range(6):
    rec.push(t, ok(-1.0))
  rec.finish()
  assert [s.split()[1] for s in said] == ['2', '4', '6']
  assert len(rec.history['energy']) == 6


def test_a_sustained_blowup_counts_in_a_row_and_single_outliers_do_not():
  """The variances of our N2 race that collapsed (benchmarks/race.json, 2026-11-28), in
  shape: a median near 2 Ha^2 with single steps far above it, then a run of steps far above
  it. Single outliers end their count at once; the run counts step by step; nothing is
  judged before `blowup_window` steps are recorded."""
  rec = recorder.Recorder(None, 0, lambda *a: None, resume_from=None, blowup_factor=20.0,
                          blowup_window=50)
  variances = np.full(200, 2.0)
  variances[[10, 60, 61, 120]] = [5000.0, 6594.0, 100.0, 1049.0]  # Outliers, as recovered from.
  variances[150:170] = np.linspace(100.0, 790.0, 20)  # Damaged parameters.
  counts = []
  for t, v in enumerate(variances):
    rec.push(t, ok(-109.5)._replace(variance=float(v)))
    counts.append(rec.consecutive_bad)
  counts = np.array(counts[1:] + [0])  # Each step is recorded when the next is pushed.
  assert counts[10] == 0  # Before the window is full.
  assert counts[:150].max() == 2 and counts[60:62].tolist() == [1, 2]
  assert counts[150:169].tolist() == list(range(1, 20))
  assert rec.bad_reason.startswith('variance 7') and 'blowup_factor' in rec.bad_reason


def test_each_geometrys_energy_has_its_column_through_a_resume(tmp_path):
  """Over a set of geometries stats.csv adds each one's energy (energy_0, energy_1, ...), and
  a resume keeps the columns and the rows before its step."""
  path = str(tmp_path / 'stats.csv')
  rec = recorder.Recorder(path, 0, lambda *a: None, resume_from=None, geometries=2)
  for t in range(4):
    rec.push(t, ok(-1.0 - t)._replace(energies=np.array([-1.0 - t, -2.0 - t])))
  rec.finish()
  assert list(rows(path)[0]) == list(rundir.STATS_COLUMNS) + ['energy_0', 'energy_1']
  rec = recorder.Recorder(path, 0, lambda *a: None, resume_from=2, geometries=2)
  assert rec.history['energy_1'] == [-2.0, -3.0]
  rec.push(2, ok(-9.0)._replace(energies=np.array([-8.0, -10.0])))
  rec.finish()
  assert [float(r['energy_1']) for r in rows(path)] == [-2.0, -3.0, -10.0]
