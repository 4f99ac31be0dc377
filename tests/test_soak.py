"""The soak's collapse criteria on variance series shaped like the races' records: single
outlying steps (a walker near a nucleus or a node) pass, a run of blown-up steps or a
rewind is a collapse, and damaged parameters at the end are named."""

import numpy as np
import pytest

from scripts import soak


def healthy(n=3000, seed=0):
  """Variances of 2-4 Ha^2 with an isolated step 200 times larger every 150 steps and two
  in a row once (the most the healthy N2 races had)."""
  v = np.random.default_rng(seed).uniform(2.0, 4.0, n)
  v[700::150] = 600.0
  v[1601] = 600.0
  return v


def test_isolated_outliers_are_not_a_collapse():
  out = soak.judge(healthy(), [], -109.50, -109.5423)
  assert out['blown_up_steps'] > 10 and out['longest_run_of_blown_up'] == 2
  assert not out['collapsed'] and not out['damaged_at_end'] and out['collapses'] == []


def test_a_run_of_blown_up_steps_is_a_collapse_and_damage_at_the_end_is_named():
  v = healthy()
  v[2000:2004] = 500.0  # Four in a row: under the guard's five.
  assert not soak.judge(v, [], -109.5, -109.5423)['collapsed']
  v[2000:2005] = 500.0
  out = soak.judge(v, [], -109.5, -109.5423)
  assert out['collapsed'] and out['collapses'] == [{'step': 2000, 'length': 5}]
  assert not out['damaged_at_end']
  v[-110:] = 300.0  # The collapsed N2 race: every step blown up to the end.
  out = soak.judge(v, [], -104.6, -109.5423)
  assert out['damaged_at_end'] and out['collapses'][-1] == {'step': 2890, 'length': 110}


def test_a_rewind_or_a_damaged_evaluation_counts_though_the_curve_looks_healthy():
  rewound = soak.judge(healthy(), [{'to_step': 1200, 'at_s': 600.0}], -109.5, -109.5423)
  assert rewound['collapsed'] and not rewound['damaged_at_end']
  damaged = soak.judge(healthy(), [], -104.6, -109.5423)  # Evaluated 4.9 Ha above.
  assert damaged['damaged_at_end'] and not damaged['collapsed']


def test_the_curve_keeps_each_windows_median_and_largest_variance():
  v = healthy()[:900]
  rows = [{'energy': -109.5, 'variance': x, 'pmove': 0.5, 'move_width': 0.1, 'lr': 0.01}
          for x in v]
  c = soak.curve(rows)
  assert len(c['step']) == min(len(rows), soak.CURVE_WINDOWS) and c['step'][0] == 0
  assert max(c['variance_max']) == 600.0 and max(c['variance']) < 5.0


def test_a_system_without_an_exact_energy_is_reported_in_hartree():
  from scripts import race
  assert race.reference_of('C2H4') is None  # Ethene: no exact energy to measure errors from.
  assert abs(race.reference_of('N2') - -109.5423) < 1e-4
  shown = soak._evaluated({'energy_ha': -78.5712, 'error_mha': None, 'stat_mha': 1.5})
  assert shown == '-78.5712 ± 0.0015 Ha'


def test_the_ratio_of_realised_to_model_fisher_lengths_is_summarised():
  """Each step's fisher_step over its model_step: median, 99th percentile, the largest and
  its step; a rejected update (model 0) and a run of an older version (no columns) left
  out."""
  rows = [{'step': str(t), 'fisher_step': str(0.02 * (10 if t == 77 else 1)),
           'model_step': '0.001'} for t in range(200)]
  rows[5]['model_step'] = '0'  # Rejected: not a ratio.
  r = soak.fisher_ratio(rows)
  assert r['median'] == pytest.approx(20.0) and r['max'] == pytest.approx(200.0)
  assert r['max_step'] == 77 and 20.0 <= r['p99'] <= 200.0
  assert soak.fisher_ratio([{'step': '0', 'energy': '-1'}]) is None
