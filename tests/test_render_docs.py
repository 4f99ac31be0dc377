"""scripts/render_docs.py: every rendered table in the docs is what its artifact gives (a
hand edit of a rendered table, or an artifact changed without re-rendering, fails here),
and a change of an artifact changes the rendered text (so the check can fail)."""

import importlib.util
import json
import os
import shutil
import sys
import types

from scripts import artifacts
from scripts import render_docs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_docs_equal_what_the_artifacts_render():
  differs = render_docs.render_all(check=True)
  assert not differs, f'run python -m scripts.render_docs: {differs}'


def test_every_marked_block_names_a_rendered_table():
  known = render_docs.tables()
  for doc in render_docs.documents(known):
    text = open(os.path.join(REPO, doc), encoding='utf-8').read()
    for m in render_docs.BLOCK.finditer(text):
      assert known[m.group('name')][0] == doc


def test_a_changed_artifact_changes_the_rendered_table(tmp_path, monkeypatch):
  from scripts import accuracy
  path = tmp_path / 'accuracy.json'
  shutil.copy(accuracy.JSON, path)
  before = accuracy.render_full(str(path))
  doc = json.loads(path.read_text())
  doc['runs'][-1]['data']['full'][0]['energy'] -= 0.001  # He 1 mHa lower.
  path.write_text(json.dumps(doc))
  after = accuracy.render_full(str(path))
  assert before != after and '-2.90473' in after
  # The check sees it: a document rendered from the original artifact now differs.
  text = f'x\n<!-- rendered: accuracy -->\n{before}\n<!-- /rendered -->\ny\n'
  new, changed = render_docs.render_text(text, {'accuracy': lambda: after})
  assert changed == ['accuracy'] and new.startswith('x\n') and new.endswith('\ny\n')
  assert render_docs.render_text(new, {'accuracy': lambda: after})[1] == []


def test_check_exits_1_on_a_hand_edited_table(tmp_path, monkeypatch, capsys):
  doc = tmp_path / 'DOC.md'
  doc.write_text('<!-- rendered: t -->\n| a |\n<!-- /rendered -->\n')
  monkeypatch.setattr(render_docs, 'tables', lambda: {'t': ('DOC.md', lambda: '| b |')})
  monkeypatch.setattr(render_docs, 'REPO', str(tmp_path))
  assert render_docs.render_all(check=True, repo=str(tmp_path)) == [('DOC.md', 't')]
  assert doc.read_text().count('| a |') == 1  # --check changes nothing.
  render_docs.render_all(repo=str(tmp_path))
  assert '| b |' in doc.read_text() and render_docs.render_all(True, str(tmp_path)) == []


def test_artifact_runs_are_appended_and_meta_recorded(tmp_path):
  path = str(tmp_path / 'a.json')
  artifacts.append(path, {'x': 1})
  artifacts.append(path, {'x': 2})
  runs = artifacts.read(path)
  assert [r.data for r in runs] == [{'x': 1}, {'x': 2}]
  m = runs[0].meta
  assert m['recorded'] and m['date'].endswith('+00:00') and m['machine']['cpu_count'] >= 1
  assert {'python', 'jax', 'jaxlib', 'flax', 'optax'} <= set(m['versions'])
  assert 'commit' in m and 'dirty' in m and m['command'].startswith('python ')
  artifacts.write(path, {'x': 3})
  assert [r.data for r in artifacts.read(path)] == [{'x': 3}]
  assert 'From `' in artifacts.provenance(path) and 'commit' in artifacts.provenance(path)


def test_a_script_run_as_a_module_records_and_shows_its_module_command(monkeypatch):
  main = types.ModuleType('__main__')
  main.__spec__ = importlib.util.find_spec('scripts.race')
  monkeypatch.setitem(sys.modules, '__main__', main)
  monkeypatch.setattr(sys, 'argv', ['/repo/scripts/race.py', '--system', 'Ne'])
  assert artifacts._argv() == ['-m', 'scripts.race', '--system', 'Ne']
  # Commands recorded when the scripts ran as files are shown as they are typed now.
  assert (artifacts.runnable('python scripts/race.py --system Ne --seconds 600')
          == 'python -m scripts.race --system Ne --seconds 600')
  assert artifacts.runnable('python scripts/chaos.py') == 'python -m scripts.chaos'
  assert artifacts.runnable('python -m scripts.race') == 'python -m scripts.race'
  assert artifacts.runnable('python -m ferminet_fast.train --config configs/ne.py') == (
      'python -m ferminet_fast.train --config configs/ne.py')
  assert artifacts.runnable(None) is None
