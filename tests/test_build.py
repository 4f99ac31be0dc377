"""The one build path: 'auto' and 'best' resolved once, recorded in resolved.json, and taken
from there by the stages after training (evaluation does not choose again)."""

import json

import pytest

from conftest import tiny_config
from ferminet_fast import evaluate, train
from ferminet_fast.physics import hamiltonian
from ferminet_fast.run import build, profiling


def test_auto_is_resolved_once_recorded_and_reused(tmp_path, monkeypatch):
  run = tmp_path / 'run'
  train.train(tiny_config('He', **{'optim.laplacian': 'auto', 'optim.iterations': 5,
                                   'log.save_path': str(run)}), quiet=True)
  resolved = json.loads((run / build.RESOLVED).read_text())
  timings = json.loads((run / 'timings.json').read_text())
  assert resolved['optim.laplacian'] in hamiltonian.LAPLACIANS
  assert resolved['optim.laplacian'] == timings['laplacian']
  assert resolved['optim.energy_chunk_size'] == timings['energy_chunk_size']
  assert set(timings['laplacian_auto_ms']) >= {resolved['optim.laplacian']}

  def no_second_choice(*args, **kwargs):
    raise AssertionError('the Laplacian was chosen again')

  monkeypatch.setattr(profiling, 'choose_laplacian', no_second_choice)
  evaluate.evaluate(str(run), steps=3, burn_in=1, quiet=True)
  # A run from before resolved.json: 'auto' evaluates with 'best', without timing.
  (run / build.RESOLVED).unlink()
  evaluate.evaluate(str(run), steps=3, burn_in=1, quiet=True)


def test_settings_resolve_best_and_keep_the_rest():
  cfg = build.settings(tiny_config('He', **{'optim.laplacian': 'best'}))
  assert cfg.optim.laplacian in hamiltonian.available_laplacians()
  with pytest.raises(AttributeError):  # Frozen: each module gets its block, unchanged.
    cfg.optim.laplacian = 'jacfwd'
