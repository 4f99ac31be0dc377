"""scripts/dmc_goals.py: each goal judged from the recorded energies against the package's
exact energies (not a number stored with the run), the newest run of each row rendered
from the artifact, and ACCURACY.md's DMC table being what the artifact gives."""

import json
import os

from scripts import artifacts
from scripts import dmc_goals
from scripts import render_docs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HE_EXACT = -2.903724  # Ha: Pekeris (1959), Drake: -2.9037243770.
H2_EXACT = -1.174475  # Ha at R = 1.4 bohr: Kolos & Wolniewicz (1968).


def entry(row, dmc_mha, dmc_err_mha, vmc_mha, vmc_err_mha=0.1, exact=HE_EXACT, fn=None,
          dmc_s=100.0):
  """A run's data as run_row records it: energies in Ha, `*_mha` offsets from `exact`."""
  config, vmc_budget, dmc_budget, goal = dmc_goals.ROWS[row]
  per = [{'tau': t, 'energy': exact + 1e-3 * dmc_mha, 'error': 1e-3 * dmc_err_mha}
         for t in dmc_goals.time_steps(config)]
  return {'row': row, 'config': config, 'goal': goal, 'train_s': 60.0, 'dmc_s': dmc_s,
          'dmc_budget_s': dmc_budget, 'vmc_budget_s': vmc_budget, 'ferminet': fn,
          'vmc': {'energy': exact + 1e-3 * vmc_mha, 'error': 1e-3 * vmc_err_mha},
          'dmc': {'energy': exact + 1e-3 * dmc_mha, 'error': 1e-3 * dmc_err_mha,
                  'per_tau': per, 'sign_check': {'nodeless_over_samples': True}},
          'commands': ['train', 'evaluate', f'python -m ferminet_fast.dmc --run=/x/{row}']}


def test_exact_energies_are_the_published_ones():
  assert abs(dmc_goals.exact_energy('configs/he.py') - HE_EXACT) < 1e-6
  assert abs(dmc_goals.exact_energy('configs/h2.py') - H2_EXACT) < 1e-6


def test_verdicts():
  v = dmc_goals.verdict
  assert v(entry('he', 0.03, 0.05, 1.0), HE_EXACT) == 'met'
  assert v(entry('he', 0.08, 0.05, 1.0), HE_EXACT).startswith('missed: |error| 0.08')
  assert v(entry('he', -0.08, 0.05, 1.0), HE_EXACT).startswith('missed: |error| 0.08')
  # The same energies against an exact energy 0.1 mHa lower: the error is what moved.
  assert v(entry('he', 0.03, 0.05, 1.0), HE_EXACT - 1e-4).startswith('missed: |error| 0.13')
  assert 'budget' in v(entry('he', 0.0, 0.01, 1.0, dmc_s=400.0), HE_EXACT)
  assert v(entry('be', 5.0, 0.5, 20.0), HE_EXACT) == 'met'
  assert 'not 2 error bars below VMC' in v(entry('be', 19.0, 0.5, 20.0), HE_EXACT)
  ne = entry('ne', 8.0, 1.0, 20.0, exact=-128.9376)
  assert "FermiNet's 1200 s VMC not run" in v(ne, -128.9376)  # Recorded before 1800 s.
  ne['ferminet_seconds'] = 1800.0
  assert "FermiNet's 1800 s VMC not run" in v(ne, -128.9376)
  ne['ferminet'] = {'error_mha': 12.0, 'stat_mha': 1.0}
  assert v(ne, -128.9376) == 'met'
  for r in ne['dmc']['per_tau']:  # 11 mHa at every time step: more than half VMC's 20 mHa.
    r['energy'] += 3e-3
  assert 'half the VMC error' in v(ne, -128.9376)
  assert v(entry('n2', 20.0, 2.0, 50.0, exact=-109.5423), -109.5423) == 'met'
  assert 'half the VMC error' in v(entry('n2', 30.0, 2.0, 50.0, exact=-109.5423), -109.5423)
  # Half the VMC error by the figure (20 < 24.5 mHa) but not by the error bar (about 9.8).
  assert 'does not resolve half the VMC error, 24.5 mHa' in v(
      entry('n2', 20.0, 8.0, 49.0, exact=-109.5423), -109.5423)
  # The ECP row: T-move DMC 3 combined errors below VMC (here 3.5 and 2.5 of them).
  si = entry('si_ccecp', 1.0, 0.1, 1.5, vmc_err_mha=0.1, exact=-3.76205)
  assert v(si, -3.76205) == 'met'
  si['vmc']['energy'] -= 0.1e-3
  assert 'not 3 combined errors below VMC' in v(si, -3.76205)


def test_the_electron_gas_is_judged_against_its_vmc_alone():
  """No exact energy: DMC must lie 3 combined errors below VMC, and the row shows hartrees."""
  base = -0.3  # Ha per cell: any energy; the offsets below are what is judged.
  # DMC 5 mHa below VMC; extrapolated from three errors of 1 mHa to 1.22 mHa (tau_i = 4, 2,
  # 1 units: sqrt(21 / 14)), combined with VMC's 1 mHa 1.58: 3.2 combined errors.
  heg = entry('heg', 10.0, 1.0, 15.0, vmc_err_mha=1.0, exact=base)
  assert dmc_goals.exact_energy('configs/heg.py') is None
  assert dmc_goals.verdict(heg, None) == 'met'
  heg['vmc']['energy'] -= 1e-3  # 4 mHa: 2.5 combined errors.
  assert 'not 3 combined errors below VMC' in dmc_goals.verdict(heg, None)
  line = dmc_goals.row_line(heg, None)
  assert '-0.28600 ± 0.00100 Ha' in line and '-0.29000 ± 0.00122 Ha' in line  # VMC, DMC.
  assert line.replace(r'\|', '').count('|') == 11


def test_scatter_beyond_the_errors_widens_the_extrapolated_error():
  li = entry('li', 0.05, 0.1, 0.5, exact=-7.47806)
  consistent = dmc_goals.extrapolated(li['dmc'])
  assert consistent['chi2_dof'] < 1e-12
  li['dmc']['per_tau'][1]['energy'] -= 0.4e-3  # tau = 0.01 four error bars below the others.
  scattered = dmc_goals.extrapolated(li['dmc'])
  assert scattered['chi2_dof'] > 5
  assert abs(scattered['error'] / consistent['error'] - scattered['chi2_dof'] ** 0.5) < 1e-9
  assert 'chi^2/dof' in dmc_goals.row_line(li, -7.47806)
  assert 'does not resolve 0.2 mHa' in dmc_goals.verdict(li, -7.47806)


def test_table_renders_the_newest_run_of_each_row(tmp_path, monkeypatch):
  path = str(tmp_path / 'dmc_goals.json')
  artifacts.append(path, entry('h2', 0.02, 0.03, 0.5, exact=H2_EXACT))
  artifacts.append(path, entry('he', 0.03, 0.05, 1.0))
  artifacts.append(path, entry('he', 0.20, 0.05, 1.0))
  text = dmc_goals.render_table(path)
  rows = [line for line in text.splitlines() if line.startswith('| h')]
  assert [r.split(' | ')[0] for r in rows] == ['| he', '| h2']  # In ROWS' order.
  assert '+0.20 ± 0.05' in rows[0] and '+0.03 ± 0.05' not in text  # The newest He run.
  assert rows[0].endswith('does not resolve 0.1 mHa |') and rows[1].endswith('| met |')
  assert r'missed: \|error\| 0.20 mHa' in rows[0]  # Escaped: a bare | splits the cell.
  assert all(r.replace(r'\|', '').count('|') == 11 for r in rows)
  assert '0.005: +0.20 ± 0.05' in rows[0] and '+1.00 ± 0.10' in rows[0]
  assert 'From `' in text and 'commit' in text and 'dmc --run=/x/h2' in text
  si = entry('si_ccecp', 1.0, 0.1, 1.5, exact=-3.76205)
  si['locality'] = {'dmc': entry('si_ccecp', -0.5, 0.2, 1.5, exact=-3.76205)['dmc'],
                    'dmc_s': 100.0}
  line = dmc_goals.row_line(si, -3.76205)
  assert 'locality approximation, tau -> 0: -0.50 ± 0.24' in line  # Extrapolated.
  assert line.replace(r'\|', '').count('|') == 11
  # Judged at rendering against the package's exact energy, not a stored one.
  monkeypatch.setattr(dmc_goals, 'exact_energy', lambda config: H2_EXACT + 1e-3)
  assert '-0.98 ± 0.03' in dmc_goals.render_table(path)
  assert dmc_goals.render_table(str(tmp_path / 'none.json')).startswith('Not measured yet')


def test_adopt_turns_the_old_records_into_meta(tmp_path):
  old = tmp_path / 'old.json'
  e = entry('he', 0.03, 0.05, 1.0)
  e.update(date='2026-11-25T06:00:20', commit='0aa5adf', verdict='met', exact=HE_EXACT,
           machine={'cpu': 'AMD EPYC', 'cpu_count': 2},
           versions={'python': '3.11.7', 'jax': '0.10.2', 'numpy': '2.4.6'})
  h2 = {**entry('h2', 0.02, 0.03, 0.5, exact=H2_EXACT), **{k: e[k] for k in (
      'date', 'commit', 'verdict', 'exact', 'versions')}, 'machine': None}
  old.write_text(json.dumps([e, h2]))
  path = str(tmp_path / 'new.json')
  dmc_goals.adopt(str(old), 'python -m scripts.dmc_goals --rows he', path)
  runs = artifacts.read(path)
  assert [r.meta['recorded'] for r in runs] == [True, False]
  m, d = runs[0].meta, runs[0].data
  assert m['date'] == '2026-11-25T06:00:20' and m['commit'] == '0aa5adf'
  assert m['versions'] == {'python': '3.11.7', 'jax': '0.10.2'} and m['dirty'] is None
  assert m['command'] == 'python -m scripts.dmc_goals --rows he'
  assert not {'date', 'commit', 'machine', 'versions', 'verdict', 'exact'} & set(d)
  assert 'AMD EPYC, 2 cores' in dmc_goals.render_table(path)


def test_accuracy_md_table_is_the_rendered_one():
  assert render_docs.tables()['dmc_goals'][0] == 'ACCURACY.md'
  text = open(os.path.join(REPO, 'ACCURACY.md'), encoding='utf-8').read()
  assert text.count('<!-- rendered: dmc_goals -->') == 1 and 'dmc_goals.py writes' not in text
  assert text.index('## Diffusion Monte Carlo') < text.index('<!-- rendered: dmc_goals -->')
  assert ('ACCURACY.md', 'dmc_goals') not in render_docs.render_all(check=True)


def test_recorded_errors_agree_with_the_packages_exact_energies():
  """Each recorded run's own error (against the exact energy of its day) is the one the
  table computes now: the package's exact energies have not moved under the table."""
  for run in artifacts.read(dmc_goals.JSON):
    d, exact = run.data['dmc'], dmc_goals.exact_energy(run.data['config'])
    if exact is None:
      assert d['error_mha'] is None, run.data['row']
      continue
    assert abs(1e3 * (d['energy'] - exact) - d['error_mha']) < 1e-6, run.data['row']


def test_a_row_with_a_time_budget_trains_until_the_budget(monkeypatch):
  """Ne, N2 and the electron gas train for their budget, not for their configs' iterations
  (configs/heg.py's 2000 end before 600 s); the rows without a budget train the config's."""
  trained = {}

  def run(cmd, seconds=None):
    if cmd[2] == 'ferminet_fast.train':
      trained[cmd[4]] = (seconds, [a for a in cmd if 'optim.iterations' in a])
    return 1.0

  monkeypatch.setattr(dmc_goals, '_run', run)
  monkeypatch.setattr(dmc_goals, '_read', lambda run, name: {'checkpoint_step': 1})
  monkeypatch.setattr(dmc_goals, 'dmc_steps', lambda run, budget, taus: 100)
  for row in ('heg', 'li'):
    dmc_goals.run_row(row, '/nonexistent', None)
  assert trained['configs/heg.py'] == (600.0, ['--config.optim.iterations=1000000'])
  assert trained['configs/li.py'] == (None, [])


def test_a_short_probe_is_run_again_for_long_enough(monkeypatch, tmp_path):
  """A probe whose loop carries a first call's cost (50 ms, then 3 ms a step) is run again
  for longer, and the steps are planned from the difference of the two: within 1% of those
  the true step time gives, where the 20-step probe alone would plan 45% fewer."""
  probes = []

  def run(cmd, seconds=None):
    steps = int([a for a in cmd if a.startswith('--steps=')][0].split('=')[1])
    probes.append(steps)
    (tmp_path / 'dmc').mkdir()
    (tmp_path / 'dmc.json').write_text(json.dumps(
        {'per_tau': [{'wall_s': 0.05 + 0.003 * steps}]}))
    (tmp_path / 'dmc_stats.csv').write_text('')
    return 10.0 + 0.05 + 0.003 * steps

  monkeypatch.setattr(dmc_goals, '_run', run)
  steps = dmc_goals.dmc_steps(str(tmp_path), 300.0, (0.02, 0.01, 0.005))
  true = (dmc_goals.BUDGET_FILL * 300.0 - 10.0 - 10.0) / (3 * 0.003)
  assert len(probes) == 2 and probes[0] == dmc_goals.PROBE_STEPS
  assert probes[1] * 0.003 > 0.5 * dmc_goals.PROBE_SECONDS
  assert abs(steps / true - 1) < 0.01, (steps, true)
