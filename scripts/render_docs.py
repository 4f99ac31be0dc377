"""Renders every measured table of the docs from its artifact under benchmarks/.

  python -m scripts.render_docs            # rewrite the tables in the docs
  python -m scripts.render_docs --check    # exit 1 naming each table that differs

A rendered table sits between markers in a markdown file (README.md, ACCURACY.md,
BENCHMARKS.md, RELIABILITY.md, COMPARISON.md, docs/...):

  <!-- rendered: NAME -->
  ...the table and a one-line provenance note, written by this script...
  <!-- /rendered -->

NAME is a key of the TABLES dict of a module listed in SCRIPTS: each measuring script owns
the function that renders its tables from its artifact (scripts/artifacts.py), so that the
script can also render right after measuring; benchmark.py's are in benchmark_tables.py.
Text outside the markers is left alone.
"""

import argparse
import importlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Scripts whose TABLES are rendered ({name: (document relative to the repo, function)}).
SCRIPTS = ('accuracy', 'race', 'convergence', 'dmc_goals', 'chaos', 'compare', 'benchmark_tables',
           'step_cost', 'peak_memory', 'standing', 'precision', 'observables', 'accuracy_states',
           'startup', 'pes_goals', 'force_noise', 'dmc_population', 'soak', 'replay',
           'outliers', 'schedule_study', 'dmc_moves', 'pes_race', 'step_length', 'dmc_step_time')
BLOCK = re.compile(r'(<!-- rendered: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /rendered -->)',
                   re.S)


def tables() -> dict:
  """{name: (document, render function)} over every script in SCRIPTS."""
  out = {}
  for script in SCRIPTS:
    module = importlib.import_module(f'scripts.{script}')
    for name, entry in module.TABLES.items():
      if name in out:
        raise ValueError(f'table {name!r} is rendered by two scripts')
      out[name] = entry
  return out


def render_text(text: str, renderers: dict, document: str = '') -> tuple:
  """`text` with every marked block re-rendered, and the names of the blocks that changed.
  A marker naming no known table is an error (a typo would otherwise go unchecked)."""
  changed = []

  def fill(m):
    name = m.group('name')
    if name not in renderers:
      raise KeyError(f'{document}: no script renders a table named {name!r}')
    body = renderers[name]().strip('\n') + '\n'
    if body != m.group('body'):
      changed.append(name)
    return m.group(1) + body + m.group(4)

  return BLOCK.sub(fill, text), changed


def documents(table_map: dict) -> list:
  return sorted({doc for doc, _ in table_map.values()})


def render_all(check: bool = False, repo: str = REPO) -> list:
  """Renders each document; writes it unless `check`. Returns [(document, table name)] of
  the tables whose rendered text differs from what the document held, and of tables
  declared by a script but missing from their document."""
  table_map = tables()
  differs = []
  for doc in documents(table_map):
    path = os.path.join(repo, doc)
    with open(path, encoding='utf-8') as f:
      text = f.read()
    renderers = {n: fn for n, (d, fn) in table_map.items() if d == doc}
    new, changed = render_text(text, renderers, doc)
    present = set(m.group('name') for m in BLOCK.finditer(text))
    differs += [(doc, n) for n in changed]
    differs += [(doc, f'{n} (no markers in the document)') for n in renderers
                if n not in present]
    if not check and new != text:
      with open(path, 'w', encoding='utf-8') as f:
        f.write(new)
  return differs


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--check', action='store_true',
                 help='change nothing; exit 1 naming each table that differs')
  args = p.parse_args(argv)
  differs = render_all(check=args.check)
  for doc, name in differs:
    print(f'{doc}: {name} ' + ('differs from its artifact' if args.check else 're-rendered'))
  if args.check and differs:
    print('run: python -m scripts.render_docs', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main())
