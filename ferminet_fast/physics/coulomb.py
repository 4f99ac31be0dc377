"""The interface of the Coulomb energy of one configuration, shared by open boundaries
(`molecular_coulomb`, plain 1/r sums, here) and periodic cells (ewald.make_ewald, the
Ewald sum with its neutralising background), so that the local energy takes either."""

from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np


class Coulomb(Protocol):
  """(x (3N,) electrons, atoms (M, 3) nuclei, charges (M,)) -> V_ee + V_en + V_nn (), Ha; all
  positions in bohr, charges in e (the nuclei's, positive; electrons have -1)."""

  def __call__(self, x: jax.Array, atoms: jax.Array, charges: jax.Array) -> jax.Array:
    ...


def nuclear_repulsion(atoms: jax.Array, charges: jax.Array) -> jax.Array:
  """V_nn = sum_{I<J} Z_I Z_J / |R_I - R_J| (Ha) for atoms (M, 3) bohr and charges (M,)."""
  if atoms.shape[0] < 2:
    return jnp.zeros((), atoms.dtype)
  i, j = np.triu_indices(atoms.shape[0], k=1)
  return jnp.sum(charges[i] * charges[j] / jnp.linalg.norm(atoms[i] - atoms[j], axis=-1))


def potential_energy(x: jax.Array, atoms: jax.Array, charges: jax.Array,
                     v_nn) -> jax.Array:
  """V_ee + V_en + V_nn (Ha) for x (3N,), atoms (M, 3) and charges (M,)."""
  r = x.reshape(-1, 3)
  n = r.shape[0]
  r_en = jnp.linalg.norm(r[:, None, :] - atoms[None], axis=-1)
  v = -jnp.sum(charges[None] / r_en) + v_nn
  if n > 1:
    i, j = np.triu_indices(n, k=1)
    v = v + jnp.sum(1.0 / jnp.linalg.norm(r[i] - r[j], axis=-1))
  return v


def molecular_coulomb(x: jax.Array, atoms: jax.Array, charges: jax.Array) -> jax.Array:
  """V_ee + V_en + V_nn (Ha) with open boundaries: the molecular `coulomb.Coulomb`."""
  return potential_energy(x, atoms, charges, nuclear_repulsion(atoms, charges))
