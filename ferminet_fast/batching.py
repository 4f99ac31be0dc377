"""Functions of one electron configuration applied to a batch of walkers."""

from typing import Callable

import jax


def over_walkers(f: Callable) -> Callable:
  """(params, x (B, 3N), atoms=None, scale=None) -> f of each walker, for a network's
  function f(params, x (3N,), atoms=None, scale=None): `atoms` (M, 3) bohr, nuclei shared by
  the walkers; (B, M, 3), each walker's own (walkers of several geometries in one batch); or
  None, the network's own nuclei (constants of its program). `scale`, a scaled periodic
  cell's factor: () shared, (B,) each walker's own, or None (the cell as it is); with a
  scale, `atoms` None keeps the network's own nuclei (the electron gas's centre)."""

  def batched(params, x, atoms=None, scale=None):
    args, axes = (params, x), (None, 0)
    if atoms is not None or scale is not None:
      args, axes = args + (atoms,), axes + (0 if atoms is not None and atoms.ndim == 3 else None,)
    if scale is not None:
      args, axes = args + (scale,), axes + (0 if jax.numpy.ndim(scale) == 1 else None,)
    return jax.vmap(f, in_axes=axes)(*args)

  return batched
