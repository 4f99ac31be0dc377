"""Imports point down the floors: the `[importlinter]` contracts in setup.cfg hold.

Skipped unless import-linter (in the `test` extra) is installed.
"""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.jax_range

pytest.importorskip('importlinter')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_import_contracts_are_kept():
  # A separate process in the repository root, so that the package analysed is this one.
  proc = subprocess.run(
      [sys.executable, '-c',
       'import sys; from importlinter.cli import lint_imports_command; '
       'sys.exit(lint_imports_command())', '--no-cache', '--config', 'setup.cfg'],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
  assert 'broken' in proc.stdout and ' 0 broken' in proc.stdout
