"""folx's sparsity patterns found with NumPy: the same patterns and Laplacians as folx's own
JAX path, and far fewer compilations while tracing."""

import functools
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest

folx = pytest.importorskip('folx')
import folx.jvp  # noqa: E402

from conftest import tiny_network  # noqa: E402
from ferminet_fast.physics import folx_tracing, laplacians  # noqa: E402


def _jax_unique_rows(a, size, fill_value):
  unique = functools.partial(jnp.unique, size=size, fill_value=fill_value)
  return np.asarray(jnp.vectorize(unique, signature='(n)->(m)')(a))


@pytest.mark.jax_range
@pytest.mark.parametrize('shape', [(5, 9), (2, 3, 6), (1, 1), (3, 4, 0)])
@pytest.mark.parametrize('extra', [-1, 0, 2])  # Truncated, exact, padded.
@pytest.mark.parametrize('x64', [False, True])
def test_sorted_unique_rows_is_jax_unique_of_every_row(shape, extra, x64):
  rng = np.random.default_rng(sum(shape) + extra)
  a = rng.integers(-3, 8, size=shape)
  counts = [len(np.unique(r)) for r in a.reshape(-1, shape[-1])] if shape[-1] else [0]
  size = max(max(counts) + extra, 1)
  with jax.enable_x64(x64):
    expected = _jax_unique_rows(a, size, -1)
    got = folx_tracing.sorted_unique_rows(a, size, -1)
  assert got.dtype == expected.dtype and got.shape == expected.shape
  np.testing.assert_array_equal(got, expected)


def test_only_a_version_it_was_checked_against_is_patched():
  assert folx_tracing.install('0.0.1') is False
  assert folx_tracing.install() is (metadata.version('folx') in folx_tracing.VERSIONS)


def _forward(f, x, patched: bool, monkeypatch):
  """folx's sparse forward Laplacian of f at x, with the NumPy patterns or folx's own."""
  with monkeypatch.context() as m:
    if not patched:
      m.setattr(folx.jvp, 'jnp', jnp)
    out = folx.forward_laplacian(f, 6)(x)
    return out.laplacian, out.jacobian.data, out.jacobian.x0_idx


@pytest.mark.jax_range
def test_patterns_and_laplacian_are_folx_own(monkeypatch):
  """A small FermiNet of Li (sums over electrons in every layer): the sparse Jacobian's
  pattern, its entries and the Laplacian are the same with NumPy's patterns as with folx's
  own, and equal the dense method's Laplacian."""
  assert folx_tracing.install()
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64, seed=3)
    x = 0.8 * jax.random.normal(jax.random.PRNGKey(4), (3 * system.n_electrons,), jnp.float64)
    f = functools.partial(network.log_psi, params)
    ours = _forward(f, x, True, monkeypatch)
    theirs = _forward(f, x, False, monkeypatch)
    np.testing.assert_array_equal(np.asarray(ours[2]), np.asarray(theirs[2]))
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    dense, _ = jax.jit(laplacians.FOLX(f))(x)
    np.testing.assert_allclose(ours[0], dense, rtol=1e-10)


class _Compilations:
  """Counts XLA compilations while `on`."""

  def __init__(self):
    self.on, self.count = False, 0
    jax.monitoring.register_event_duration_secs_listener(self._event)

  def _event(self, name, duration, **kwargs):
    if self.on and name == '/jax/core/compile/backend_compile_duration':
      self.count += 1


_compiled = _Compilations()


def _compilations(fn, *args) -> int:
  """How many XLA programs fn(*args) compiles, from empty caches (nothing compiled earlier
  in the process is reused)."""
  jax.clear_caches()
  _compiled.on, _compiled.count = True, 0
  try:
    fn(*args)
  finally:
    _compiled.on = False
  return _compiled.count


def test_per_position_unique_of_numpy_compiles_nothing():
  """folx's per-position unique of an index array, as its sparse sums call it: through JAX
  it compiles programs for each new shape; through folx_tracing.vectorize, none."""
  a = np.sort(np.random.default_rng(0).integers(-1, 5, size=(7, 3)), axis=0).T
  unique = functools.partial(jnp.unique, size=5, fill_value=-1)
  assert _compilations(jnp.vectorize(unique, signature='(n)->(m)'), a) > 0
  assert _compilations(folx_tracing.vectorize(unique, signature='(n)->(m)'), a) == 0
  floats = a.astype(np.float32)  # Not an index array: JAX's own path, compiled.
  np.testing.assert_array_equal(folx_tracing.vectorize(unique, signature='(n)->(m)')(floats),
                                jnp.vectorize(unique, signature='(n)->(m)')(floats))


def test_tracing_sums_compiles_far_less(monkeypatch):
  """Tracing the sparse Laplacian of per-electron terms summed in groups compiles less than
  half the XLA programs with NumPy's patterns than with folx's own (each from empty
  caches): the per-position unique was most of them."""
  assert folx_tracing.install()

  def f(x):  # Sums over electrons, then over the groups' means: sparse, then dense.
    h = jnp.tanh(x.reshape(-1, 3) @ jnp.arange(1.0, 13.0).reshape(3, 4))
    groups = h.reshape(2, -1, 4).sum(1)
    return jnp.sum(jnp.tanh(h + groups.sum(0)) ** 2)

  def trace(x):
    return jax.make_jaxpr(folx.forward_laplacian(f, 6))(x)

  with monkeypatch.context() as m:
    m.setattr(folx.jvp, 'jnp', jnp)
    theirs = _compilations(trace, jnp.zeros(3 * 6))
  assert _compilations(trace, jnp.zeros(3 * 6)) < theirs / 2
