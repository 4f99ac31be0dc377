"""scripts/dmc_step_time.py: the table gives each system's newest row, the ratio of the
medians over the repeats with the spread of the per-repeat ratios, and bad input is one
message."""

import pytest

from scripts import artifacts
from scripts import dmc_step_time


def row(system, base, ours):
  return {'system': system, 'walkers': 256, 'tau': 0.02, 'steps': 400,
          'baseline': {'ms_per_step': base, 'process_s': [20.0] * len(base)},
          'ours': {'ms_per_step': ours, 'process_s': [19.0] * len(ours)}}


def test_the_table_takes_the_newest_row_and_the_medians(tmp_path):
  path = str(tmp_path / 'step_time.json')
  artifacts.append(path, {'baseline_commit': 'a' * 40, 'rows': [row('He', [9.0], [9.0])]},
                   {'date': '2026-01-01'})
  artifacts.append(path, {'baseline_commit': 'b' * 40 + ' with uncommitted changes',
                          'rows': [row('He', [4.0, 5.0, 6.0], [2.0, 3.0, 6.0])]},
                   {'date': '2026-01-02'})
  text = dmc_step_time.render(path)
  he = [r for r in text.splitlines() if r.startswith('| He |')]
  assert len(he) == 1
  cells = [c.strip() for c in he[0].split('|')[1:-1]]
  assert cells[4:8] == ['5.00', '3.00', '**0.60**', '0.50–1.00 (n = 3)']
  assert 'commit bbbbbbb with uncommitted changes' in text and 'aaaaaaa' not in text


@pytest.mark.parametrize('argv,message', [
    (['--baseline', '.', '--systems', 'He', 'Xe'], 'not Xe'),
    (['--baseline', '/nonexistent'], 'not a checkout')])
def test_bad_input_is_one_message(monkeypatch, argv, message):
  monkeypatch.setattr('sys.argv', ['dmc_step_time', *argv])
  with pytest.raises(SystemExit) as e:
    dmc_step_time.main()
  assert message in str(e.value)
