"""folx's sparsity patterns worked out with NumPy while the Laplacian is traced.

folx's sparse forward Laplacian finds, for every sum it meets, which input coordinates each
output depends on: the sorted distinct indices at each position, which folx 0.2.30 computes
with `jnp.vectorize(jnp.unique)` evaluated eagerly on NumPy index arrays. JAX compiles each
primitive of that anew for every shape it meets, some hundreds of small compilations that
made most of the seconds the sparse method added to a run's start-up (BENCHMARKS.md, "The
sparse forward Laplacian's start-up"). `install` answers that one call with NumPy (the same
values, padding and dtype) and leaves every other operation of folx as it is. It is
applied only to the folx versions it was written and tested against (VERSIONS,
tests/test_folx_tracing.py); any other version runs unchanged, only slower to trace.
"""

import functools
from importlib import metadata
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

VERSIONS = ('0.2.30',)  # folx versions whose folx.jvp this was checked against.
_SIGNATURE = '(n)->(m)'


def sorted_unique_rows(a: np.ndarray, size: int, fill_value) -> np.ndarray:
  """jnp.unique(row, size=size, fill_value=fill_value) for every row (last axis) of `a`:
  each row's distinct values in ascending order, the first `size` of them, padded with
  `fill_value`; shape (..., size), the dtype JAX gives `a`."""
  a = np.asarray(a)
  rows = int(np.prod(a.shape[:-1], dtype=int))
  flat = np.sort(a.reshape(rows, a.shape[-1]), axis=-1)
  first = np.ones(flat.shape, bool)
  first[:, 1:] = flat[:, 1:] != flat[:, :-1]
  position = np.cumsum(first, axis=-1) - 1
  keep = first & (position < size)
  out = np.full((rows, size), fill_value, dtype=jax.dtypes.canonicalize_dtype(a.dtype))
  out[np.nonzero(keep)[0], position[keep]] = flat[keep]
  return out.reshape(*a.shape[:-1], size)


def _is_padded_unique(func, args: tuple, kwargs: dict) -> bool:
  """Whether jnp.vectorize(func, *args, **kwargs) is folx's per-position unique."""
  return (isinstance(func, functools.partial) and func.func is jnp.unique and not func.args
          and set(func.keywords) == {'size', 'fill_value'} and not args
          and kwargs == {'signature': _SIGNATURE})


def vectorize(func, *args, **kwargs):
  """jnp.vectorize, except that folx's per-position unique of a NumPy array of signed
  integers (indices, -1 for none) is computed by NumPy (sorted_unique_rows); anything else
  still goes through JAX."""
  vectorized = jnp.vectorize(func, *args, **kwargs)
  if not _is_padded_unique(func, args, kwargs):
    return vectorized
  size, fill_value = func.keywords['size'], func.keywords['fill_value']

  def unique_rows(a):
    if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.signedinteger):
      return sorted_unique_rows(a, int(size), fill_value)
    return vectorized(a)

  return unique_rows


class _Numpy:
  """jax.numpy as folx.jvp sees it: every name JAX's own, but `vectorize`."""
  vectorize = staticmethod(vectorize)

  def __getattr__(self, name):
    return getattr(jnp, name)


def _uses_padded_unique(jvp_module) -> bool:
  """Whether folx.jvp's sparse sum computes its output pattern as this module expects."""
  code = getattr(getattr(jvp_module, 'sparse_sum_jvp', None), '__code__', None)
  nested = [c for c in (code.co_consts if code else ()) if hasattr(c, 'co_names')]
  return any({'unique', 'vectorize', 'ensure_compile_time_eval'} <= set(c.co_names)
             for c in nested)


def install(version: Optional[str] = None) -> bool:
  """Lets folx's sparse sums find their patterns with NumPy, if the installed folx (or
  `version`) is one of VERSIONS and computes them as expected. Returns whether it is in
  place. Idempotent."""
  import folx.jvp as jvp_module
  if version is None and isinstance(jvp_module.jnp, _Numpy):
    return True
  try:
    version = metadata.version('folx') if version is None else version
  except metadata.PackageNotFoundError:  # Importable without its metadata: version unknown.
    return False
  if version not in VERSIONS or not _uses_padded_unique(jvp_module):
    return False
  jvp_module.jnp = _Numpy()
  return True


def installed() -> bool:
  """Whether folx's sparse sums find their patterns with NumPy in this process."""
  import folx.jvp as jvp_module
  return isinstance(jvp_module.jnp, _Numpy)
