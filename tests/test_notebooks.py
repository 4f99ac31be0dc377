"""The notebooks run top to bottom (tiny settings), so they never fall behind the API."""

import os

import nbformat
from nbclient import NotebookClient
import pytest

from conftest import xla_flags

NOTEBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'notebooks')


@pytest.mark.parametrize('name', ['quickstart.ipynb',
                                  pytest.param('stage_timers.ipynb', marks=pytest.mark.slow)])
def test_notebook_runs(name, tmp_path, monkeypatch):
  monkeypatch.setenv('FERMINET_FAST_NOTEBOOK_SMOKE', '1')
  monkeypatch.setenv('XLA_FLAGS', xla_flags())
  nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
  NotebookClient(nb, timeout=300, kernel_name='python3',
                 resources={'metadata': {'path': str(tmp_path)}}).execute()
  outputs = [o for cell in nb.cells if cell.cell_type == 'code' for o in cell.outputs]
  assert not [o for o in outputs if o.output_type == 'error']
  text = ''.join(o.get('text', '') for o in outputs if o.output_type == 'stream')
  if name == 'quickstart.ipynb':
    assert 'error vs exact' in text and 'energy.png' in text
  else:
    assert 'train_step_ms' in text and 'fastest:' in text
