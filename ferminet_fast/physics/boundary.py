"""The boundary conditions of a system: open (a molecule) or periodic in a cell (a crystal
or the electron gas). A `Boundary` is the one object through which the rest of the code
learns the difference: it wraps positions into the cell, gives the Coulomb energy (plain
1/r sums or the Ewald sum), fills the cell with initial walkers when there are no nuclei
to place them around, and says which k-points, twist and observables the system has.
Both kinds are frozen and hashable, so a network module may hold one as an attribute.
"""

from typing import ClassVar, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import coulomb as coulomb_lib
from ferminet_fast.physics import ewald
from ferminet_fast.physics import lattice as lattice_lib

GAMMA = (0.0, 0.0, 0.0)


class Boundary(Protocol):
  """What a system's boundary conditions supply; see `Open` and `Periodic`."""
  periodic: bool  # A cell with lattice-periodic wavefunctions (and the Ewald sum).
  lattice: lattice_lib.Lattice | None  # The simulation cell; None for open boundaries.
  twist: tuple  # k_s in fractional coordinates of the reciprocal vectors; Gamma if open.
  twists: bool  # Whether the boundary conditions have twists to average over.
  # Whether pyscf's molecular references (physics/references.py) are of this system.
  molecular_references: bool

  @property
  def complex(self) -> bool:
    """Whether the wavefunction is complex (a cell away from the Gamma point)."""

  def wrap(self, x: jax.Array, scale=None) -> jax.Array:
    """x (..., 3N) bohr -> the same electrons moved by lattice vectors into the cell (scaled
    by `scale`, () or broadcasting against x's leading axes; None: as it is)."""

  def coulomb(self, n_electrons: int, n_nuclei: int, dtype) -> coulomb_lib.Coulomb:
    """The Coulomb energy of one configuration, converged for `dtype`."""

  def uniform_positions(self, key: jax.Array, shape: tuple, dtype) -> jax.Array:
    """Positions (*shape, 3) bohr uniform in the cell (walkers of a system without nuclei)."""

  def kpoints(self, count: int) -> np.ndarray:
    """The filled k-shells (K, 3) 1/bohr of `count` electrons of one spin; (0, 3) if open."""

  def twist_vector(self) -> np.ndarray:
    """The twist k_s (3,) 1/bohr."""

  def allows(self, observable: str) -> bool:
    """Whether the observable (physics/observables.py) is defined with these boundaries."""


class Open:
  """Open boundaries: a molecule or an atom in free space."""
  periodic: ClassVar[bool] = False
  lattice: ClassVar[None] = None
  twist: ClassVar[tuple] = GAMMA
  twists: ClassVar[bool] = False
  molecular_references: ClassVar[bool] = True

  def __eq__(self, other) -> bool:
    return isinstance(other, Open)

  def __hash__(self) -> int:
    return hash(Open)

  def __repr__(self) -> str:
    return 'Open()'

  @property
  def complex(self) -> bool:
    return False

  def wrap(self, x: jax.Array, scale=None) -> jax.Array:
    """The identity: no op enters a traced program."""
    del scale
    return x

  def coulomb(self, n_electrons: int, n_nuclei: int, dtype) -> coulomb_lib.Coulomb:
    del n_electrons, n_nuclei, dtype
    return coulomb_lib.molecular_coulomb

  def uniform_positions(self, key: jax.Array, shape: tuple, dtype) -> jax.Array:
    raise ValueError('open boundaries have no cell to fill; place electrons near nuclei')

  def kpoints(self, count: int) -> np.ndarray:
    return np.zeros((0, 3))

  def twist_vector(self) -> np.ndarray:
    return np.zeros(3)

  def allows(self, observable: str) -> bool:
    return True


class Periodic:
  """Periodic boundaries in the simulation cell `lattice` at the fractional `twist`:
  psi(r_i + L) = exp(i k_s . L) psi(r_i) for its lattice vectors L. Equal (and equally
  hashed) when the vectors, periodic dimensions and reduced twist are."""
  periodic: ClassVar[bool] = True
  twists: ClassVar[bool] = True
  molecular_references: ClassVar[bool] = False
  # The observables defined in a cell (no dipole; the density and forces not implemented).
  OBSERVABLES: ClassVar[tuple] = ('s2',)

  def __init__(self, lattice: lattice_lib.Lattice, twist: tuple = GAMMA):
    object.__setattr__(self, 'lattice', lattice)
    object.__setattr__(self, 'twist', tuple(float(t) for t in twist))

  def __setattr__(self, name, value):
    raise AttributeError(f'{type(self).__name__} is frozen')

  def _key(self) -> tuple:
    vectors = np.ascontiguousarray(self.lattice.vectors, np.float64)
    return (vectors.tobytes(), self.lattice.dims, lattice_lib.reduced_twist(self.twist))

  def __eq__(self, other) -> bool:
    return isinstance(other, Periodic) and self._key() == other._key()

  def __hash__(self) -> int:
    return hash(self._key())

  def __repr__(self) -> str:
    return f'Periodic({lattice_lib.describe(self.lattice)}, twist={self.twist})'

  @property
  def complex(self) -> bool:
    return not lattice_lib.is_gamma(self.twist)

  def wrap(self, x: jax.Array, scale=None) -> jax.Array:
    if scale is not None:
      s = jnp.asarray(scale, x.dtype)[..., None]
      return self.wrap(x / s) * s
    return lattice_lib.wrap(self.lattice, x.reshape(*x.shape[:-1], -1, 3)).reshape(x.shape)

  def coulomb(self, n_electrons: int, n_nuclei: int, dtype) -> coulomb_lib.Coulomb:
    precision = 'float64' if np.dtype(dtype) == np.float64 else 'float32'
    return ewald.make_ewald(self.lattice, n_electrons, n_nuclei, precision)

  def uniform_positions(self, key: jax.Array, shape: tuple, dtype) -> jax.Array:
    s = jax.random.uniform(key, (*shape, 3), dtype)
    return s @ jnp.asarray(self.lattice.vectors, dtype)

  def kpoints(self, count: int) -> np.ndarray:
    return lattice_lib.k_shells(self.lattice, count, self.twist)

  def twist_vector(self) -> np.ndarray:
    return lattice_lib.twist_vector(self.lattice, self.twist)

  def allows(self, observable: str) -> bool:
    return observable in self.OBSERVABLES


OPEN = Open()
