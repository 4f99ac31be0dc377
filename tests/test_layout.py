"""The package stays readable as it grows: entry points short (they put the run/ pieces
together), no function longer than a screen, the optimizer state read by name, and a
README of what a first visit needs (the rest lives in docs/). The measuring scripts are one
package, scripts/, run from the repository root as `python -m scripts.NAME`: they import
each other as `scripts.NAME`, never by editing sys.path, and the trainer never imports them."""

import ast
import os
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / 'ferminet_fast'
SCRIPTS = REPO / 'scripts'
ENTRY_POINTS = ('train.py', 'evaluate.py', 'dmc.py')
MAX_ENTRY_LINES, MAX_FUNCTION_LINES, MAX_README_LINES = 150, 80, 200


def sources():
  return sorted(PACKAGE.rglob('*.py'))


def test_entry_points_are_short():
  for name in ENTRY_POINTS:
    lines = len((PACKAGE / name).read_text().splitlines())
    assert lines <= MAX_ENTRY_LINES, f'{name}: {lines} lines'


def test_no_function_is_longer_than_a_screen():
  long = []
  for path in sources():
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        n = node.end_lineno - node.lineno + 1
        if n > MAX_FUNCTION_LINES:
          long.append(f'{path.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)')
  assert not long, long


def test_optimizer_state_is_read_by_name():
  positional = re.compile(r'(opt_state|state)\.inner\.(inner|count|lr)')
  found = [f'{p.relative_to(REPO)}:{i}' for p in sources()
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if positional.search(line)]
  assert not found, found


def test_readme_is_short():
  lines = len((REPO / 'README.md').read_text().splitlines())
  assert lines <= MAX_README_LINES, lines
  assert os.path.isdir(REPO / 'docs')


def test_scripts_are_a_package_without_sys_path_edits():
  assert (SCRIPTS / '__init__.py').is_file()
  edit = re.compile(r'sys\.path\.(insert|append)')
  files = [p for p in sorted(SCRIPTS.rglob('*')) if p.is_file() and '__pycache__' not in p.parts]
  found = [f'{p.relative_to(REPO)}:{i}' for p in files
           for i, line in enumerate(p.read_text(errors='replace').splitlines(), 1)
           if edit.search(line)]
  assert not found, found


def test_the_package_never_imports_the_scripts():
  found = []
  for path in sources():
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ''] if isinstance(node, ast.ImportFrom) and not node.level
               else [])
      found += [f'{path.relative_to(REPO)}:{node.lineno} {n}' for n in names
                if n == 'scripts' or n.startswith('scripts.')]
  assert not found, found
