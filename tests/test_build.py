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


@pytest.mark.parametrize('matmul, marked', [('highest', True), ('default', False)])
def test_matmul_precision_reaches_every_matrix_product_of_energy_and_gradient(matmul,
                                                                            marked):
  """JAX multiplies float32 matrices in TF32 on NVIDIA GPUs unless the program asks for
  full precision: with 'highest' every dot of the local energies and the gradient asks for
  it (a CPU ignores the request; the precision check on a GPU is scripts/precision.py)."""
  import jax
  import jax.numpy as jnp
  cfg = build.settings(tiny_config('He', **{'matmul_precision': matmul}))
  system = build.system_of(cfg)
  built = build.build(cfg, jax.random.PRNGKey(0), system=system, time_auto=False)
  x = jnp.zeros((2, built.network.n_coords), built.network.dtype)
  text = jax.jit(built.parts.energy_grad).lower(built.state.params, x).as_text()
  dots = [line for line in text.splitlines() if 'dot_general' in line]
  assert dots
  highest = [line for line in dots if 'HIGHEST' in line]
  assert (len(highest) == len(dots)) if marked else not highest
