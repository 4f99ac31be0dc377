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


# Where the difference between open and periodic boundaries may be asked for: the
# boundaries themselves, the system's construction, the validation of the settings and
# the resolver of the run's pieces. Elsewhere behaviour comes from system.boundary.
BOUNDARY_DECIDERS = ('physics/boundary.py', 'physics/systems.py', 'config.py', 'plan.py')


def _asks_periodicity(node: ast.AST) -> bool:
  """Whether the expression reads `.periodic`, calls `is_periodic(...)` or compares `rs` or
  `lattice` with None."""
  for sub in ast.walk(node):
    if isinstance(sub, ast.Attribute) and sub.attr == 'periodic':
      return True
    if isinstance(sub, ast.Call) and getattr(sub.func, 'attr', getattr(sub.func, 'id', '')
                                             ) == 'is_periodic':
      return True
    if (isinstance(sub, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot))
                                             for op in sub.ops)
        and any(isinstance(c, ast.Constant) and c.value is None for c in sub.comparators)
        and getattr(sub.left, 'attr', getattr(sub.left, 'id', '')) in ('rs', 'lattice')):
      return True
  return False


def _conditions(tree: ast.AST):
  """Every expression that decides a branch: the tests of if, while, assert and of
  conditional expressions and comprehensions, and the operands of and, or, not."""
  for node in ast.walk(tree):
    if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
      yield node.test
    elif isinstance(node, ast.comprehension):
      yield from node.ifs
    elif isinstance(node, ast.BoolOp):
      yield from node.values
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
      yield node.operand
    elif isinstance(node, ast.Call) and getattr(node.func, 'attr', getattr(
        node.func, 'id', '')) == 'is_periodic':
      yield node


def test_periodicity_is_decided_by_the_boundary_alone():
  found = set()
  for path in sources():
    name = path.relative_to(PACKAGE).as_posix()
    if name in BOUNDARY_DECIDERS:
      continue
    for condition in _conditions(ast.parse(path.read_text())):
      if _asks_periodicity(condition):
        found.add(f'ferminet_fast/{name}:{condition.lineno}')
  assert not found, sorted(found)


# Each swappable piece's table, and the module that holds its records.
PIECE_TABLES = {
    'physics/laplacians.py': ('ferminet_fast.physics.laplacians', 'METHODS'),
    'optimizers/optim.py': ('ferminet_fast.optimizers.optim', 'OPTIMIZERS'),
    'wavefunction/envelopes.py': ('ferminet_fast.wavefunction.envelopes', 'ENVELOPES'),
    'wavefunction/jastrows.py': ('ferminet_fast.wavefunction.jastrows', 'JASTROWS'),
    'vmc/loss.py': ('ferminet_fast.vmc.loss', 'CLIPPING'),
    'wavefunction/networks.py': ('ferminet_fast.wavefunction.networks', 'ANSATZES'),
}


def test_a_piece_is_named_only_by_its_own_record():
  """No module but the one that holds a piece's records writes its name as a string of its
  own (a name compared, looked up or passed on): the settings and the build take the names
  from the tables, and below the build the records travel, not their names."""
  import importlib
  homes = {}
  for home, (module, table) in PIECE_TABLES.items():
    for name in getattr(importlib.import_module(module), table):
      homes[name] = home
  # 'folx' is also the optional package's import name, which records and messages give.
  homes.pop('folx')
  found = []
  for path in sources():
    rel = str(path.relative_to(PACKAGE))
    for node in ast.walk(ast.parse(path.read_text())):
      if (isinstance(node, ast.Constant) and isinstance(node.value, str)
          and node.value in homes and homes[node.value] != rel):
        found.append(f'{rel}:{node.lineno} {node.value!r}')
  assert not found, found


def test_no_laplacian_travels_as_a_string():
  found = [f'{p.relative_to(REPO)}:{i}' for p in sources()
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if re.search(r'laplacian: str\b', line)]
  assert not found, found


def test_a_runs_config_json_has_one_reader():
  """runtime/rundir.py names the file (rundir.CONFIG) and reads it (rundir.read_config)."""
  found = [f'{p.relative_to(REPO)}:{i}' for p in sources()
           if p.relative_to(PACKAGE) != pathlib.Path('runtime/rundir.py')
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if "'config.json'" in line or 'config.from_json(' in line]
  assert not found, found
