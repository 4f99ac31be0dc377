"""The host's BLAS/LAPACK held to one thread while a run trains
(environment/blas_threads.py), and given back afterwards; a thread count the user set in the
environment is left alone."""

import pytest
import scipy.linalg.cython_lapack  # noqa: F401  The LAPACK JAX's CPU kernels call, loaded.
import threadpoolctl

import faults
from conftest import tiny_config
from ferminet_fast import train
from ferminet_fast.environment import blas_threads


def blas_threads_now() -> dict:
  return {i['filepath']: i['num_threads'] for i in threadpoolctl.threadpool_info()
          if i['user_api'] == 'blas'}


@pytest.fixture
def no_user_setting(monkeypatch):
  for name in blas_threads.USER_SETTINGS:
    monkeypatch.delenv(name, raising=False)


@pytest.mark.jax_range
def test_one_thread_inside_and_the_count_restored_after(no_user_setting):
  with threadpoolctl.threadpool_limits(limits=2, user_api='blas'):
    before = blas_threads_now()
    with blas_threads.limited():
      inside = blas_threads_now()
    assert blas_threads_now() == before
  assert inside and set(inside.values()) == {1}


@pytest.mark.jax_range
def test_a_count_set_in_the_environment_is_kept(monkeypatch):
  monkeypatch.setenv('OPENBLAS_NUM_THREADS', '2')
  with threadpoolctl.threadpool_limits(limits=2, user_api='blas'):
    before = blas_threads_now()
    with blas_threads.limited():
      assert blas_threads_now() == before


def test_training_steps_run_with_one_blas_thread(tmp_path, no_user_setting):
  seen = []

  def wrap(step):
    def wrapped(state):
      seen.append(blas_threads_now())
      return step(state)
    return wrapped

  cfg = tiny_config('He', **{'optim.iterations': 3, 'optim.optimizer': 'kfac',
                             'log.save_path': str(tmp_path / 'run')})
  with faults.injected(wrap):
    train.train(cfg, quiet=True)
  assert len(seen) == 3 and all(s and set(s.values()) == {1} for s in seen)
