"""The Genesis report's op kernels in JAX, float32: elementwise add, square matmul at full
float32 precision (`Precision.HIGHEST`), and sums over all or some axes. Each is jitted by
the bench."""

import jax
import jax.numpy as jnp


def add(a, b):
  return a + b


def matmul(a, b):
  return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def total(a, axis):
  """The sum over `axis` (None: all)."""
  return jnp.sum(a, axis=axis)
