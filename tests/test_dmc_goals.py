"""scripts/dmc_goals.py: each goal judged from the numbers given, and ACCURACY.md's DMC
section written between its markers, before the race section, and kept by a rewrite."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'scripts'))
import dmc_goals  # noqa: E402
import race  # noqa: E402


def entry(row, dmc_mha, dmc_err_mha, vmc_mha, vmc_err_mha=0.1, exact=-2.903724, fn=None,
          dmc_s=100.0):
  per = [{'tau': t, 'energy': exact + 1e-3 * dmc_mha, 'error': 1e-3 * dmc_err_mha}
         for t in dmc_goals.TAUS]
  return {'row': row, 'goal': dmc_goals.ROWS[row][3], 'exact': exact, 'train_s': 60.0,
          'dmc_s': dmc_s, 'dmc_budget_s': dmc_goals.ROWS[row][2],
          'vmc_budget_s': dmc_goals.ROWS[row][1], 'ferminet': fn,
          'vmc': {'energy': exact + 1e-3 * vmc_mha, 'error': 1e-3 * vmc_err_mha,
                  'error_mha': vmc_mha},
          'dmc': {'energy': exact + 1e-3 * dmc_mha, 'error': 1e-3 * dmc_err_mha,
                  'error_mha': dmc_mha, 'per_tau': per,
                  'sign_check': {'nodeless_over_samples': True}},
          'date': '2026-01-01T00:00:00', 'commit': '0123456789abcdef',
          'machine': {'cpu': 'cpu', 'cpu_count': 2}, 'commands': ['python -m ferminet_fast.dmc']}


def test_verdicts():
  assert dmc_goals.verdict(entry('he', 0.03, 0.05, 1.0)) == 'met'
  assert dmc_goals.verdict(entry('he', 0.08, 0.05, 1.0)).startswith('missed: |error| 0.08')
  assert 'budget' in dmc_goals.verdict(entry('he', 0.0, 0.01, 1.0, dmc_s=400.0))
  assert dmc_goals.verdict(entry('be', 5.0, 0.5, 20.0)) == 'met'
  assert 'not 2 error bars below VMC' in dmc_goals.verdict(entry('be', 19.0, 0.5, 20.0))
  ne = entry('ne', 8.0, 1.0, 20.0, exact=-128.9376)
  assert "FermiNet's 1200 s VMC not run" in dmc_goals.verdict(ne)
  ne['ferminet'] = {'error_mha': 12.0, 'stat_mha': 1.0}
  assert dmc_goals.verdict(ne) == 'met'
  ne['dmc']['error_mha'] = 11.0
  assert 'half the VMC error' in dmc_goals.verdict(ne)


def test_section_between_markers_before_the_race(tmp_path):
  path = tmp_path / 'ACCURACY.md'
  path.write_text('# Accuracy\n\ntable\n' + race.MARKER + 'race section\n')
  dmc_goals.write_section(str(path), [entry('he', 0.03, 0.05, 1.0)])
  text = path.read_text()
  assert text.index('## Diffusion Monte Carlo') < text.index(race.MARKER)
  assert text.endswith(race.MARKER + 'race section\n') and '| he |' in text
  dmc_goals.write_section(str(path), [entry('he', 0.03, 0.05, 1.0), entry('he', 0.2, 0.05, 1.0)])
  text = path.read_text()
  assert text.count(dmc_goals.BEGIN) == 1 and '+0.20 ± 0.05' in text  # The newest run.
  kept = dmc_goals.kept_section(str(path))
  assert kept.startswith(dmc_goals.BEGIN) and kept.rstrip().endswith(dmc_goals.END)
