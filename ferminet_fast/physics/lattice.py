"""The periodic cell: lattice vectors, reciprocal vectors and volume, supercells, wrapping
positions into the cell and the filled k-shells of plane waves. The single home of the
lattice: the Ewald sum, the periodic features and envelopes and the periodic Hartree-Fock
read a `Lattice` built here.

Conventions: `vectors` holds the lattice vectors a_1, a_2, a_3 as ROWS (bohr); a position
r (3,) has fractional coordinates s = r . inverse(vectors), i.e. r = s . vectors;
`reciprocal` holds b_1, b_2, b_3 as rows with a_i . b_j = 2 pi delta_ij.
"""

import itertools
from typing import NamedTuple

import numpy as np

from ferminet_fast.errors import InputError

MIN_SEPARATION = 1e-3  # bohr; nuclei closer than this after wrapping overlap.
CELLS = ('sc', 'bcc', 'fcc')  # Cell shapes of the electron gas (system.cell).


class Lattice(NamedTuple):
  """A periodic cell: lattice vectors (3, 3) as rows, bohr; reciprocal vectors (3, 3) as rows,
  1/bohr (a_i . b_j = 2 pi delta_ij); volume (), bohr^3. `dims` = 2 is a slab: periodic
  along a_1 and a_2 (in the xy plane) only, open along a_3 (along z, as pyscf.pbc takes a
  slab; its length only sets the cell's extent for the fractional coordinates). `dims` = 1
  is a chain: periodic along a_1 (along x) only, open along a_2 and a_3 (in the yz plane,
  where they only set the cell's extent)."""
  vectors: np.ndarray
  reciprocal: np.ndarray
  volume: float
  dims: int = 3

  @property
  def normal(self) -> np.ndarray:
    """The unit vector along a_3 (3,): a slab's open direction."""
    return self.vectors[2] / np.linalg.norm(self.vectors[2])

  @property
  def axis(self) -> np.ndarray:
    """The unit vector along a_1 (3,): a chain's periodic direction."""
    return self.vectors[0] / np.linalg.norm(self.vectors[0])

  @property
  def length(self) -> float:
    """|a_1|, bohr: a chain's period."""
    return float(np.linalg.norm(self.vectors[0]))

  @property
  def area(self) -> float:
    """The area of the cell's face spanned by a_1 and a_2, bohr^2."""
    return float(np.linalg.norm(np.cross(self.vectors[0], self.vectors[1])))


def make_lattice(vectors, where: str = 'config.system.lattice', dims: int = 3) -> Lattice:
  """A Lattice from three vectors (rows, bohr), periodic along the first `dims` (3, 2 for a
  slab or 1 for a chain), refused with one clear message if they are not three finite
  3-vectors, are (nearly) linearly dependent or left-handed, if a slab's a_1, a_2 are not in
  the xy plane with a_3 along z, or if a chain's a_1 is not along x with a_2, a_3 in the yz
  plane."""
  try:
    a = np.asarray(vectors, dtype=np.float64)
  except (TypeError, ValueError):
    raise InputError(f'{where} must be three vectors of three numbers, got {vectors!r}') from None
  if a.shape != (3, 3) or not np.all(np.isfinite(a)):
    raise InputError(f'{where} must be three finite vectors of three numbers (rows), got '
                     f'{vectors!r}')
  volume = float(np.linalg.det(a))
  scale = float(np.prod(np.linalg.norm(a, axis=1)))
  if scale == 0.0 or abs(volume) < 1e-8 * scale:
    raise InputError(f'{where}: the lattice vectors are linearly dependent (the cell has '
                     f'volume {volume:.3g} bohr^3)')
  if volume < 0:
    raise InputError(f'{where}: the lattice vectors are left-handed (a1 . (a2 x a3) = '
                     f'{volume:.4g} bohr^3 < 0); swap two of them')
  if dims == 2:
    tol = 1e-9 * np.abs(a).max()
    if np.any(np.abs(a[:2, 2]) > tol) or np.any(np.abs(a[2, :2]) > tol):
      raise InputError(f'{where}: a slab (periodic along a1 and a2) needs a1 and a2 in the xy '
                       f'plane and a3 along z (normal to the slab), got {a.tolist()}')
  elif dims == 1:
    tol = 1e-9 * np.abs(a).max()
    if np.any(np.abs(a[0, 1:]) > tol) or np.any(np.abs(a[1:, 0]) > tol):
      raise InputError(f'{where}: a chain (periodic along a1) needs a1 along x and a2, a3 in '
                       f'the yz plane (normal to the chain), got {a.tolist()}')
  elif dims != 3:
    raise InputError(f'{where}: {dims} periodic dimensions; 3 (bulk), 2 (slabs) and 1 '
                     '(chains) are supported')
  return Lattice(a, 2 * np.pi * np.linalg.inv(a).T, volume, dims)


def scaled(lattice: Lattice, factor: float) -> Lattice:
  """`lattice` with its vectors multiplied by `factor` > 0."""
  return make_lattice(np.asarray(lattice.vectors) * factor, dims=lattice.dims)


def supercell(primitive: Lattice, matrix) -> tuple:
  """(the supercell Lattice, the integer matrix S (3, 3)) whose vectors are S . primitive
  vectors; `matrix` is an integer 3 x 3 matrix or 3 integers (a diagonal one)."""
  where = 'config.system.supercell'
  try:
    s = np.asarray(matrix)
    s = np.diag(s) if s.shape == (3,) else s
    if s.shape != (3, 3) or not np.all(s == np.round(s)):
      raise ValueError
  except (TypeError, ValueError):
    raise InputError(f'{where} must be 3 integers or an integer 3 x 3 matrix, got '
                     f'{matrix!r}') from None
  s = np.round(s).astype(int)
  det = int(round(np.linalg.det(s)))
  if det <= 0:
    raise InputError(f'{where} = {matrix!r} has determinant {det}; it must be positive '
                     '(a right-handed supercell of at least one cell)')
  if primitive.dims == 2 and (list(s[2]) != [0, 0, 1] or s[0, 2] or s[1, 2]):
    raise InputError(f'{where} = {matrix!r}: a slab repeats only along a1 and a2 (the third '
                     'row and column must be those of the identity)')
  if primitive.dims == 1 and (s[1:, 1:].tolist() != [[1, 0], [0, 1]] or np.any(s[0, 1:])
                              or np.any(s[1:, 0])):
    raise InputError(f'{where} = {matrix!r}: a chain repeats only along a1 (n, 1, 1): the '
                     'second and third rows and columns must be those of the identity')
  return make_lattice(s @ primitive.vectors, where, primitive.dims), s


def translations(s: np.ndarray) -> np.ndarray:
  """The det(S) integer translations (T, 3) (in primitive fractional coordinates) that
  place the primitive cell's copies inside the supercell S . primitive."""
  det = int(round(np.linalg.det(s)))
  span = int(np.abs(s).sum(axis=0).max())
  grid = np.array(list(itertools.product(range(-span, span + 1), repeat=3)))
  frac = grid @ np.linalg.inv(s)  # Fractional coordinates in the supercell.
  inside = np.all((frac >= -1e-9) & (frac < 1 - 1e-9), axis=1)
  found = grid[inside]
  if len(found) != det:  # Cannot happen for an integer S; a guard against a wrong span.
    raise AssertionError(f'found {len(found)} translations for a supercell of {det} cells')
  return found


def replicate(primitive: Lattice, s: np.ndarray, symbols: tuple, positions: np.ndarray) -> tuple:
  """(symbols, positions (det(S) M, 3) bohr) of the supercell S . primitive: the primitive
  cell's atoms copied to each of its det(S) cells, cell-major."""
  shifts = translations(s) @ primitive.vectors
  pos = (shifts[:, None, :] + np.asarray(positions)[None]).reshape(-1, 3)
  return tuple(symbols) * len(shifts), pos


def fractional(lattice: Lattice, r):
  """Fractional coordinates s (..., 3) of positions r (..., 3) bohr: r = s . vectors. Works on
  numpy and jax arrays alike."""
  return r @ (lattice.reciprocal.T / (2 * np.pi)).astype(r.dtype)


def periodic_mask(dims: int) -> np.ndarray:
  """(3,) 1.0 for each of the `dims` periodic lattice directions, 0.0 for the open ones (a
  slab's a_3, a chain's a_2 and a_3)."""
  return (np.arange(3) < dims).astype(np.float64)


def half_diagonal(lat: Lattice) -> float:
  """The longest vector s . vectors with fractional s in [-1/2, 1/2] along each periodic
  direction (0 along a slab's open one): a cell corner, the farthest a minimum image goes."""
  corners = np.array([[i, j, k] for i in (-.5, .5) for j in (-.5, .5) for k in (-.5, .5)])
  corners = corners * periodic_mask(lat.dims)
  return float(np.max(np.linalg.norm(corners @ lat.vectors, axis=1)))


def wrap(lattice: Lattice, r):
  """Positions r (..., 3) bohr moved by lattice vectors into the cell (fractional
  coordinates in [0, 1) along each periodic direction); numpy or jax."""
  s = fractional(lattice, r)
  shift = (s // 1.0) * periodic_mask(lattice.dims).astype(r.dtype)
  return r - shift @ lattice.vectors.astype(r.dtype)


def check_nuclei(lattice: Lattice, symbols: tuple, positions: np.ndarray) -> None:
  """Refuses nuclei that overlap once wrapped into the cell (closer than MIN_SEPARATION
  under the minimum-image distance, itself included through a lattice vector)."""
  p = np.asarray(positions, np.float64)
  for a in range(len(p)):
    for b in range(a):
      if minimum_image_distance(lattice, p[a] - p[b]) < MIN_SEPARATION:
        raise InputError(f'config.system: nuclei {b + 1} ({symbols[b]}) and {a + 1} '
                         f'({symbols[a]}) are at the same position once wrapped into the cell')


def minimum_image_distance(lattice: Lattice, d: np.ndarray) -> float:
  """min over lattice vectors L of |d + L| (bohr), for one vector d (3,)."""
  mask = periodic_mask(lattice.dims)
  s = fractional(lattice, np.asarray(d, np.float64))
  s = s - mask * np.round(s)
  images = np.array(list(itertools.product((-1, 0, 1), repeat=3))) * mask + s
  return float(np.min(np.linalg.norm(images @ lattice.vectors, axis=1)))


def line_points(lattice: Lattice, radius: float) -> np.ndarray:
  """The points n a_1 (n integer) within `radius`, (P, 3), sorted by length, n = 0 first and
  then -n before n: a chain's lattice."""
  n_max = int(np.floor(radius / lattice.length + 1e-9))
  n = np.array([0] + [s * m for m in range(1, n_max + 1) for s in (-1, 1)], np.float64)
  return n[:, None] * lattice.vectors[0][None]


def plane_points(lattice: Lattice, basis: np.ndarray, radius: float) -> np.ndarray:
  """The points n_1 basis_1 + n_2 basis_2 within `radius`, (P, 3), sorted by length, for
  `basis` the lattice's vectors or its reciprocal vectors (a slab's in-plane lattice)."""
  # A third generator along the normal, longer than the diameter, contributes only n_3 = 0.
  return lattice_points(np.stack([basis[0], basis[1], (2 * radius + 1) * lattice.normal]),
                        radius)


def lattice_points(basis: np.ndarray, radius: float) -> np.ndarray:
  """All points n . basis (n integer) with |n . basis| <= radius, (P, 3), sorted by length
  (ties in a fixed order); `basis` rows are the three generating vectors."""
  # |n_i| <= radius |b^i| bounds each integer, b^i the dual vectors of `basis`.
  dual = np.linalg.inv(basis).T
  n_max = np.floor(radius * np.linalg.norm(dual, axis=1) + 1e-9).astype(int)
  grid = np.array(list(itertools.product(*[range(-m, m + 1) for m in n_max])), np.float64)
  points = grid @ basis
  length = np.linalg.norm(points, axis=1)
  keep = length <= radius * (1 + 1e-12)
  points, length = points[keep], length[keep]
  order = np.lexsort((points[:, 2], points[:, 1], points[:, 0], np.round(length, 9)))
  return points[order]


def reduced_twist(twist) -> tuple:
  """A fractional twist with each component in [0, 1): twists that differ by integers give
  the same boundary conditions, so this is the form in which two twists compare equal."""
  reduced = (float(t) % 1.0 for t in twist)
  return tuple(0.0 if abs(t - 1.0) < 1e-12 or abs(t) < 1e-12 else t for t in reduced)


def is_gamma(twist) -> bool:
  """Whether a fractional twist is the Gamma point (every component an integer: the same
  boundary conditions as (0, 0, 0))."""
  return not any(reduced_twist(twist))


def twist_vector(lattice: Lattice, twist) -> np.ndarray:
  """The twist (3,) 1/bohr of fractional coordinates `twist` in the reciprocal vectors."""
  return np.asarray(twist, np.float64) @ lattice.reciprocal


def k_shells(lattice: Lattice, count: int, twist=(0.0, 0.0, 0.0)) -> np.ndarray:
  """The wavevectors k = G + k_s (G reciprocal-lattice vectors, k_s the twist given in
  fractional coordinates) of the lowest shells (equal |k|) that hold at least `count` plane
  waves, (K, 3) 1/bohr, sorted by |k|: the k-points of the filled shells of `count`
  electrons of one spin. At the Gamma point (and at any twist whose components are 0 or
  1/2) the set is closed under k -> -k; at a general twist shells are single points."""
  if count <= 0:
    return np.zeros((0, 3))
  k_s = twist_vector(lattice, twist)
  radius = 2 * np.pi / np.min(np.linalg.norm(lattice.vectors, axis=1))  # Bound of |b_i|.
  while True:
    # Every G + k_s within `radius` has |G| <= radius + |k_s|.
    points = lattice_points(lattice.reciprocal, radius + np.linalg.norm(k_s)) + k_s
    length = np.round(np.linalg.norm(points, axis=1), 9)
    keep = length <= np.round(radius, 9)
    points, length = points[keep], length[keep]
    order = np.lexsort((points[:, 2], points[:, 1], points[:, 0], length))
    points, length = points[order], length[order]
    if len(points) >= count:
      cut = length[count - 1]
      if cut < np.round(radius, 9):  # The shell at `cut` is complete within the radius.
        return points[length <= cut]
    radius *= 1.5


def is_closed_shell(lattice: Lattice, count: int, twist=(0.0, 0.0, 0.0)) -> bool:
  """Whether `count` plane waves fill whole k-shells at the twist (the ground state of that
  many same-spin electrons in the gas is then non-degenerate)."""
  return len(k_shells(lattice, count, twist)) == count


def electron_gas(rs: float, cell: str, n_electrons: int) -> Lattice:
  """The cell of `n_electrons` at density parameter rs (bohr; volume per electron 4 pi rs^3 /
  3): a cube ('sc'), or the primitive cell of the body- ('bcc') or face-centred ('fcc')
  cubic lattice, of that volume."""
  volume = n_electrons * 4 * np.pi * rs**3 / 3
  shapes = {'sc': (np.eye(3), 1.0),
            'bcc': (0.5 * np.array([[-1., 1, 1], [1, -1, 1], [1, 1, -1]]), 0.5),
            'fcc': (0.5 * np.array([[0., 1, 1], [1, 0, 1], [1, 1, 0]]), 0.25)}
  unit, fraction = shapes[cell]  # Primitive vectors for a unit cube; their volume.
  side = (volume / fraction) ** (1.0 / 3.0)
  return make_lattice(side * unit, 'config.system.rs')


def describe(lattice: Lattice) -> str:
  """One line: the vectors (bohr) and the volume."""
  rows = '; '.join(' '.join(f'{v:.4f}' for v in row) for row in lattice.vectors)
  return f'lattice [{rows}] bohr, volume {lattice.volume:.4f} bohr^3'
