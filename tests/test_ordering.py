"""vmc/ordering.py: `after` changes no value, and it keeps two batched factorisations from
running side by side, which deadlocks jaxlib 0.10.0-0.11.0's CPU LAPACK kernels (the
reproduction is tests/data/lapack_deadlock.py)."""

import os
import subprocess
import sys
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ferminet_fast.environment import cpu_devices
from ferminet_fast.vmc import ordering

pytestmark = pytest.mark.jax_range

HERE = os.path.dirname(os.path.abspath(__file__))
REPRO = os.path.join(HERE, 'data', 'lapack_deadlock.py')


def test_after_leaves_every_value_as_it_was():
  x = jnp.asarray([1.5, -0.0, 3e38, np.nan, -np.inf], jnp.float32)
  done = (jnp.asarray([np.nan, np.inf, -np.inf, 2.0]), jnp.asarray(7.0))
  y = jax.jit(ordering.after)(x, done)
  np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
  assert y.dtype == x.dtype


def repro(mode: str, calls: int, timeout: float) -> bool:
  """Whether the reproduction finished within `timeout` s, with a pool of two threads."""
  env = dict(os.environ, PJRT_NPROC='2', JAX_PLATFORMS='cpu')
  try:
    proc = subprocess.run([sys.executable, REPRO, mode, str(calls)], env=env, cwd=HERE,
                          capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return False
  assert proc.returncode == 0, proc.stderr[-2000:]
  return 'finished' in proc.stdout


def test_ordered_factorisations_finish_on_every_jaxlib():
  assert repro('ordered', 40, timeout=240)


def test_independent_factorisations_deadlock_exactly_the_affected_jaxlib():
  """The fault the ordering works around: on affected jaxlib the plain program hangs (in
  at least one of two tries: it is a race, lost almost always), elsewhere it finishes."""
  if cpu_devices.lapack_fault():
    assert not (repro('plain', 40, timeout=45) and repro('plain', 40, timeout=45)), (
        'two independent batched LU factorisations finished on jaxlib '
        f'{metadata.version("jaxlib")}: its LAPACK kernels may no longer share the pool')
  else:
    assert repro('plain', 40, timeout=240)
