"""runtime/memory.py: the compiled step's memory plan against the device's free memory, smaller
chunks of local energies when they make it fit, and one clear error when nothing does."""

import os

import jax
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, plan, train
from ferminet_fast.physics import systems
from ferminet_fast.runtime import memory
from ferminet_fast.vmc import step


@pytest.fixture(scope='module')
def setup():
  cfg = tiny_config('He', batch_size=16)
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  laplacian, _ = plan.laplacian_of(cfg, network, system, jax.random.PRNGKey(0), time_auto=False)

  def make_parts(chunk):
    return plan.make_parts(cfg, system, network, laplacian, chunk)

  state = step.init_state(make_parts(0), system, cfg.batch_size, cfg.mcmc,
                          jax.random.PRNGKey(0))
  compiled = step.compile_step(make_parts(0), state)
  return make_parts, state, memory.planned_bytes(compiled.train_step), compiled


@pytest.mark.jax_range
def test_plan_and_free_memory_are_known_on_cpu(setup):
  _, state, whole, compiled = setup
  assert whole['arguments'] > 0 and whole['temporaries'] > 0 and whole['new'] > 0
  reported = memory.memory_mb(compiled.train_step)['step_memory_mb']
  assert reported == (whole['arguments'] + whole['new']) / 2 ** 20
  free = memory.free_bytes(jax.devices())
  if os.path.exists('/proc/meminfo'):
    assert 2 ** 20 < free < 2 ** 50


def test_auto_chunks_shrink_until_the_step_fits(setup):
  make_parts, state, whole, _ = setup
  budget = whole['new'] - 1  # The whole batch at once no longer fits.
  parts, compiled, free_mb = memory.compile_to_fit(make_parts, 0, True, state,
                                                   free=lambda devices: budget)
  assert 0 < parts.chunk_size < state.walkers.x.shape[0]
  assert memory.planned_bytes(compiled.train_step)['new'] <= budget
  assert free_mb == budget / 2 ** 20


@pytest.mark.jax_range
def test_a_fixed_chunk_that_does_not_fit_is_an_error_with_the_numbers(setup):
  make_parts, state, whole, _ = setup
  with pytest.raises(InputError, match=r'needs \d+ MiB .* 16 walkers per device.*all walkers '
                     r'at once.*has 0 MiB free.*optim\.energy_chunk_size'):
    memory.compile_to_fit(make_parts, 0, False, state, free=lambda devices: 0)


def test_auto_stops_at_one_walker_per_device(setup):
  make_parts, state, _, _ = setup
  calls = []

  def no_memory(devices):
    calls.append(1)
    return 0

  with pytest.raises(InputError, match='chunks of 1 walkers.*lower batch_size'):
    memory.compile_to_fit(make_parts, 2, True, state, free=no_memory)
  assert len(calls) == 2  # Chunks of 2, then of 1 walker, then no smaller chunk to try.


def test_training_that_cannot_fit_stops_before_writing(tmp_path, monkeypatch):
  monkeypatch.setattr(memory, 'free_bytes', lambda devices: 0)
  cfg = tiny_config('He', **{'optim.energy_chunk_size': 0, 'optim.iterations': 2,
                             'log.save_path': str(tmp_path / 'run')})
  with pytest.raises(InputError, match='MiB free'):
    train.train(cfg, quiet=True)
  assert not os.listdir(tmp_path / 'run')


@pytest.mark.parametrize('drawn,tried', [(0, [12, 6, 3]), (1, [12, 2, 1])])
def test_auto_chunks_of_a_surface_halve_only_what_changes_the_step(tmp_path, drawn, tried):
  """Over three geometries of 4 walkers each chunk holds its share of every swept geometry's
  walkers: halving starts from the walkers the step computes (all 12, or the 4 of the one
  geometry it draws) and stops at one walker of each (smaller chunks, or larger ones, would
  compile the same step again)."""
  from test_train_geometries import h2_scan  # noqa: PLC0415
  cfg = h2_scan(tmp_path / 'run', batch_size=12, **{'optim.geometries_per_step': drawn})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  laplacian, _ = plan.laplacian_of(cfg, network, system, jax.random.PRNGKey(0), time_auto=False)
  chunks = []

  def make_parts(chunk):
    chunks.append(chunk)
    return plan.make_parts(cfg, system, network, laplacian, chunk)

  state = step.init_state(make_parts(0), system, cfg.batch_size, cfg.mcmc,
                          jax.random.PRNGKey(0))
  chunks.clear()
  last = f'chunks of {tried[-1]} walkers' + (r' \(1 of each of 3 geometries\)' if not drawn
                                             else '')
  with pytest.raises(InputError, match=last):
    memory.compile_to_fit(make_parts, 12, True, state, free=lambda devices: 0)
  assert chunks == tried
