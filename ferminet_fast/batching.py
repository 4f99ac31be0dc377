"""Functions of one electron configuration applied to a batch of walkers."""

from typing import Callable

import jax


def over_walkers(f: Callable) -> Callable:
  """(params, x (B, 3N), atoms=None) -> f of each walker, for a network's function
  f(params, x (3N,), atoms=None): `atoms` (M, 3) bohr, nuclei shared by the walkers; (B, M, 3),
  each walker's own (walkers of several geometries in one batch); or None, the network's own
  nuclei (constants of its program)."""

  def batched(params, x, atoms=None):
    if atoms is None:
      return jax.vmap(f, in_axes=(None, 0))(params, x)
    return jax.vmap(f, in_axes=(None, 0, 0 if atoms.ndim == 3 else None))(params, x, atoms)

  return batched
