"""The interface of the Coulomb energy of one configuration, shared by open boundaries
(hamiltonian.molecular_coulomb, plain 1/r sums) and periodic cells (ewald.make_ewald, the
Ewald sum with its neutralising background), so that the local energy takes either."""

from typing import Protocol

import jax


class Coulomb(Protocol):
  """(x (3N,) electrons, atoms (M, 3) nuclei, charges (M,)) -> V_ee + V_en + V_nn (), Ha; all
  positions in bohr, charges in e (the nuclei's, positive; electrons have -1)."""

  def __call__(self, x: jax.Array, atoms: jax.Array, charges: jax.Array) -> jax.Array:
    ...
