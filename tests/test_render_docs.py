"""scripts/render_docs.py: every rendered table in the docs is what its artifact gives (a
hand edit of a rendered table, or an artifact changed without re-rendering, fails here),
and a change of an artifact changes the rendered text (so the check can fail)."""

import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'scripts'))
import artifacts  # noqa: E402
import render_docs  # noqa: E402


def test_docs_equal_what_the_artifacts_render():
  differs = render_docs.render_all(check=True)
  assert not differs, f'run python scripts/render_docs.py: {differs}'


def test_every_marked_block_names_a_rendered_table():
  known = render_docs.tables()
  for doc in render_docs.documents(known):
    text = open(os.path.join(REPO, doc), encoding='utf-8').read()
    for m in render_docs.BLOCK.finditer(text):
      assert known[m.group('name')][0] == doc


def test_a_changed_artifact_changes_the_rendered_table(tmp_path, monkeypatch):
  import accuracy
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
