"""The schedule study's arms are settings the entry point takes, with the budget they are
given, and its table lists every training and compares each arm with the default arm on
the same seeds only."""

import os

from ferminet_fast.runtime import cli
from scripts import artifacts
from scripts import ferminet_reference as reference
from scripts import schedule_study as study


def test_every_arm_resolves_through_the_command_line_with_its_budget(tmp_path, monkeypatch):
  monkeypatch.chdir(study.race.REPO)  # The config files' paths are the repository's.
  for arm, (_, settings) in study.ARMS.items():
    cfg = cli.resolve(['train', *reference.ours('Ne', str(tmp_path / arm),
                                                study.keys_of(arm, 9800, 3))])
    assert cfg.debug.seed == 3
    assert cfg.optim.iterations * cfg.batch_size == 9800 * 256  # Walker-steps held.
    for key, value in settings.items():
      node = cfg
      for part in key.split('.'):
        node = node[part]
      if isinstance(node, bool):
        assert node == (value == 'true'), (arm, key)
      else:
        assert str(node) == value if isinstance(node, str) else float(node) == float(value), (
            arm, key)


def test_the_table_lists_every_run_and_compares_arms_on_shared_seeds(tmp_path):
  path = str(tmp_path / 'study.json')
  meta = {'date': '2026-12-03T00:00:00+00:00', 'commit': 'abc', 'machine': {}}

  def record(arm, seed, averaged_mha):
    ev = {'error_mha': averaged_mha, 'stat_mha': 2.0}
    artifacts.append(path, {'system': 'Ne', 'arm': arm, 'arm_text': study.ARMS[arm][0],
                            'seed': seed, 'budget_steps': 9800,
                            'steps': study.steps_of(arm, 9800), 'evaluated_averaged': ev,
                            'evaluated_last': {'error_mha': averaged_mha + 30, 'stat_mha': 2.0}},
                     meta)

  record('default', 0, 20.0)
  record('anneal', 0, 14.0)
  record('default', 1, 26.0)
  record('anneal', 1, 21.0)
  record('anneal', 2, 10.0)  # No default run at seed 2: left out of the comparison.
  table = study.render_table(path)
  assert table.count('| Ne | 9800 |') == 5 + 2
  anneal = next(line for line in table.splitlines() if line.startswith('| Ne | 9800 | anneal |')
                and '| 0, 1, 2 |' in line)
  assert '| +15.0 | +23.0 | -6.0, -5.0 |' in anneal  # Mean of 14, 21, 10; default on 0, 1.
  assert '| +45.0 | +53.0 | -6.0, -5.0 |' in anneal  # The last parameters, 30 mHa above.
  assert os.path.basename(path) in table


def test_an_arm_that_changed_meaning_is_its_own_row(tmp_path):
  """Runs of one arm name recorded with another text (an earlier version's) are summed
  apart."""
  path = str(tmp_path / 'study.json')
  meta = {'date': '2026-12-03T00:00:00+00:00', 'commit': 'abc', 'machine': {}}
  for text, seed, err in (('old meaning', 0, 20.0), (study.ARMS['anneal'][0], 0, 10.0)):
    ev = {'error_mha': err, 'stat_mha': 2.0}
    artifacts.append(path, {'system': 'Ne', 'arm': 'anneal', 'arm_text': text, 'seed': seed,
                            'budget_steps': 9800, 'steps': 9800, 'evaluated_averaged': ev,
                            'evaluated_last': ev}, meta)
  summary = [line for line in study.render_table(path).splitlines()
             if line.startswith('| Ne | 9800 | anneal |') and line.count('|') == 12]
  assert len(summary) == 2 and any('old meaning' in line for line in summary)
