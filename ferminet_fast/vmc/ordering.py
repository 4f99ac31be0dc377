"""Order among independent parts of one compiled program.

XLA's CPU runtime runs the parts of a program that do not depend on each other at the same
time, on its pool of threads. jaxlib 0.10.0-0.11.0 split a large batched LAPACK call (the
LU factorisation of a determinant, over many walkers) across that same pool and wait for
the pieces; two such calls running side by side on a machine with two threads each wait for
a thread the other holds, and the program never finishes (tests/test_ordering.py keeps a
reproduction; environment/cpu_devices.py names the builds and keeps one CPU device on
them, so that the devices' programs do not meet the same way). Later jaxlib builds run
those calls on the calling thread. `after` gives one
part a data dependence on another, which the runtime honours, where nothing else does: an
optimization barrier orders the compiler's passes, not the runtime's threads.
"""

import jax
import jax.numpy as jnp


def after(x: jax.Array, done) -> jax.Array:
  """x, unchanged in value, computed only once every array of the pytree `done` is: x plus
  a zero formed from `done` (non-finite entries taken as 0, so nothing propagates). XLA
  keeps the zero, since x * 0 is not 0 for every float x."""
  zero = jnp.zeros((), x.dtype)
  for d in jax.tree.leaves(done):
    zero = zero + jnp.sum(jnp.where(jnp.isfinite(d), d, 0) * 0).astype(x.dtype)
  return x + zero
