"""scripts/dmc_moves.py: each kind of move is reported with its extrapolation fitted again
from its time steps' records, in mHa from exact where there is one and in Ha where not."""

import pytest

from scripts import artifacts
from scripts import dmc_moves


def kind(moves, energies, error=1e-3):
  taus = (0.02, 0.01, 0.005)
  per = [{'tau': t, 'energy': e, 'error': error, 'acceptance': 0.99, 'tau_eff': 0.98 * t,
          'autocorrelation': 3.0, 'steps': 100, 'equilibration': 25, 'wall_s': 10.0,
          'ms_per_step': 100.0} for t, e in zip(taus, energies)]
  return {'moves': moves, 'wall_s': 30.0, 'energy': 0.0, 'error': 0.0, 'per_tau': per,
          'command': 'python -m ferminet_fast.dmc'}


def test_the_table_extrapolates_each_kind(tmp_path):
  path = str(tmp_path / 'moves.json')
  # E(tau) = E0 + 0.5 tau exactly: the fit gives E0 (the stored 0.0 is not used).
  line = [-2.9 + 0.5 * t for t in (0.02, 0.01, 0.005)]
  artifacts.append(path, {'system': 'He', 'exact_energy': -2.9, 'budget_s': 30.0,
                          'taus': [0.02, 0.01, 0.005],
                          'kinds': [kind('electron', line), kind('all', line, 2e-3)]},
                   {'date': '2026-01-01'})
  artifacts.append(path, {'system': 'gas', 'exact_energy': None, 'budget_s': 30.0,
                          'taus': [0.02, 0.01, 0.005], 'kinds': [kind('all', [8.0] * 3)]},
                   {'date': '2026-01-01'})
  text = dmc_moves.render_table(path)
  he = [r for r in text.splitlines() if r.startswith('| He | electron | 0.02 ')][0]
  assert '+0.00 ± 1.' in he.split('|')[-2]  # E(tau -> 0) on exact, in mHa.
  assert '+10.00 ± 1.00 mHa' in he  # E(0.02) is 10 mHa above.
  gas = [r for r in text.splitlines() if r.startswith('| gas | all | 0.02 ')][0]
  assert '8.00000 ± 0.00' in gas.split('|')[-2] and 'Ha' in gas


def test_unknown_moves_are_refused(monkeypatch, capsys):
  monkeypatch.setattr('sys.argv', ['dmc_moves', '--run', '/x', '--moves', 'electron,some'])
  with pytest.raises(SystemExit) as e:
    dmc_moves.main()
  assert 'electron, all' in str(e.value)
