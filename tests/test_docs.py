"""The documentation site builds with warnings as errors.

Catches a broken link or include, a docstring that renders with reST warnings, and a
settings reference that no longer builds from config.SETTINGS. Skipped unless the `docs`
extra is installed.
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip('sphinx')
pytest.importorskip('myst_parser')
pytest.importorskip('furo')

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs')


def test_docs_build_without_warnings(tmp_path):
  # A separate process: autodoc imports every module and mocks the optional packages.
  proc = subprocess.run(
      [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b', 'html',
       '-d', str(tmp_path / 'doctrees'), DOCS, str(tmp_path / 'html')],
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  html = tmp_path / 'html'
  settings = (html / 'reference' / 'settings.html').read_text(encoding='utf-8')
  assert 'optim.laplacian' in settings and 'fixes the state' in settings
  assert (html / 'reference' / '_generated' / 'ferminet_fast.config.html').exists()
  assert (html / 'results' / 'ACCURACY.html').exists()
