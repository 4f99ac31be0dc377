"""The Coulomb energy of point charges in a periodic cell by Ewald summation, for ONE
configuration (a `coulomb.Coulomb`): electrons (charge -1) and nuclei (charges Z), with a
uniform neutralising background when they do not cancel (the electron gas).

For charges q_i at r_i in a cell of volume Omega, with splitting parameter alpha,

  E = 1/2 sum'_{i,j,L} q_i q_j erfc(alpha |r_ij + L|) / |r_ij + L|            (real space)
    + (2 pi / Omega) sum_{G != 0} exp(-G^2 / 4 alpha^2) / G^2 |S(G)|^2       (reciprocal)
    - alpha / sqrt(pi) sum_i q_i^2 - pi / (2 Omega alpha^2) (sum_i q_i)^2    (self, background)

with S(G) = sum_i q_i exp(i G . r_i), L the lattice vectors and the prime leaving out
i = j at L = 0. It does not depend on alpha; alpha and the two cut-offs are chosen from the
cell (`choose`) so that each truncated sum's tail, per pair of unit charges, stays below a
tolerance (`TOLERANCE`, Ha, by precision) at the least cost for the particle count.

The hot path is vectorised over precomputed constants: each pair's separation is first
reduced to fractional coordinates in [-1/2, 1/2] (minimum image), so the real-space sum
needs only the lattice vectors within the cut-off plus the cell's half-diagonal (27 for a
cube); the reciprocal sum is one structure factor per G over a half-sphere of G (G and -G
give equal terms), O((N + M) n_G) rather than O((N + M)^2 n_G).

A slab (a lattice periodic in two dimensions) and a chain (periodic in one) have their own
sums, `make_slab_ewald` and `make_chain_ewald`, below; `make_ewald` and `madelung` choose
them from the lattice.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate, special

from ferminet_fast.physics import lattice as lattice_lib

# Bound on each truncated sum's tail per pair of unit charges, Ha, by precision: float32
# resolves about 1e-7 of a total of order ten, float64 about 1e-15 of it.
TOLERANCE = {'float32': 1e-7, 'float64': 1e-12}


class EwaldSetup(NamedTuple):
  """The constants of one cell's sum: alpha (1/bohr), lattice vectors (n_L, 3) and
  reciprocal vectors of a half-sphere (n_G, 3) with their weights (n_G,) (4 pi / Omega)
  exp(-G^2 / 4 alpha^2) / G^2 (the +-G pair together), and the real-space sum of one charge
  with its own images, sum_{L != 0} erfc(alpha L) / L."""
  alpha: float
  real_vectors: np.ndarray
  recip_vectors: np.ndarray
  recip_weights: np.ndarray
  self_images: float


def real_tail(alpha: float, cutoff: float, volume: float) -> float:
  """Bound (continuum estimate) of the real-space terms beyond `cutoff` for a pair of unit
  charges: (4 pi / Omega) int_cutoff^inf r erfc(alpha r) dr, Ha."""
  value, _ = integrate.quad(lambda r: r * special.erfc(alpha * r), cutoff, np.inf)
  return 4 * np.pi / volume * value


def recip_tail(alpha: float, cutoff: float) -> float:
  """Bound of the reciprocal terms beyond |G| = cutoff for a pair of unit charges:
  (1 / (2 pi)^3) int_{|G| > cutoff} 4 pi / G^2 exp(-G^2 / 4 alpha^2) d^3G
  = (2 alpha / sqrt(pi)) erfc(cutoff / 2 alpha), Ha."""
  return 2 * alpha / np.sqrt(np.pi) * special.erfc(cutoff / (2 * alpha))


def _cutoff(tail, tolerance: float, start: float) -> float:
  """The smallest cut-off (by bisection, to 1e-6 of it) with tail(cutoff) <= tolerance."""
  low, high = 0.0, start
  while tail(high) > tolerance:
    low, high = high, 2 * high
  for _ in range(60):
    mid = 0.5 * (low + high)
    low, high = (low, mid) if tail(mid) <= tolerance else (mid, high)
  return high


def _cutoffs(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> tuple:
  """(real-space, reciprocal) cut-offs (bohr, 1/bohr) whose tails are below `tolerance`."""
  length = lat.volume ** (1 / 3)
  return (_cutoff(lambda r: real_tail(alpha, r, lat.volume), tolerance, length),
          _cutoff(lambda g: recip_tail(alpha, g), tolerance, 2 * np.pi / length))


def choose(lat: lattice_lib.Lattice, n_particles: int, tolerance: float) -> EwaldSetup:
  """alpha and the cut-offs for `n_particles` charges in the cell: among alphas on a
  logarithmic grid, the one of least estimated cost n_pairs n_L + n_particles n_G (lattice
  and half-sphere reciprocal vectors counted by volume), each sum's tail below `tolerance`."""
  d_max = lattice_lib.half_diagonal(lat)
  n_pairs = max(n_particles * (n_particles - 1) // 2, 1)
  costs = []
  for alpha in np.geomspace(0.5, 20.0, 40) / lat.volume ** (1 / 3):
    r_cut, g_cut = _cutoffs(lat, alpha, tolerance)
    n_l = 4 / 3 * np.pi * (r_cut + d_max) ** 3 / lat.volume
    n_g = 4 / 3 * np.pi * g_cut**3 * lat.volume / (2 * (2 * np.pi) ** 3)
    costs.append((n_pairs * max(n_l, 1.0) + max(n_particles, 1) * n_g, alpha))
  return setup_at(lat, min(costs)[1], tolerance)


def setup_at(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> EwaldSetup:
  """The constants for a given alpha (1/bohr), the cut-offs for `tolerance`."""
  r_cut, g_cut = _cutoffs(lat, alpha, tolerance)
  real = lattice_lib.lattice_points(lat.vectors, r_cut + lattice_lib.half_diagonal(lat))
  recip = lattice_lib.lattice_points(lat.reciprocal, g_cut)[1:]  # Without G = 0.
  recip = recip[_half_space(recip)]
  g2 = np.sum(recip**2, axis=1)
  weights = 4 * np.pi / lat.volume * np.exp(-g2 / (4 * alpha**2)) / g2
  images = np.linalg.norm(lattice_lib.lattice_points(lat.vectors, r_cut)[1:], axis=1)
  return EwaldSetup(float(alpha), real, recip, weights,
                    float(np.sum(special.erfc(alpha * images) / images)))


def _half_space(g: np.ndarray) -> np.ndarray:
  """Mask of one of each pair G, -G (G != 0): the first non-zero component positive."""
  first = np.where(np.abs(g[:, 0]) > 1e-12, g[:, 0],
                   np.where(np.abs(g[:, 1]) > 1e-12, g[:, 1], g[:, 2]))
  return first > 0


def make_ewald(lat: lattice_lib.Lattice, n_electrons: int, n_nuclei: int,
               precision: str = 'float64', setup=None):
  """The Ewald `coulomb.Coulomb` (x (3N,), atoms (M, 3), charges (M,)) -> E (), Ha, of
  n_electrons electrons and n_nuclei nuclei in the cell `lat`, converged to
  TOLERANCE[precision] per pair of unit charges (or with a given `setup`), by the sum of the
  cell's periodicity (SUMS[lat.dims]: bulk, slab or chain)."""
  return SUMS[lat.dims].make(lat, n_electrons, n_nuclei, precision, setup)


def madelung(lat: lattice_lib.Lattice, positions: np.ndarray, charges: np.ndarray,
             alpha: float = None) -> float:
  """The Ewald energy (Ha, float64; needs jax_enable_x64) of point charges (no electrons) at
  `positions` (M, 3) bohr in the cell; `alpha` (1/bohr) overrides the chosen splitting. A slab
  or chain must be neutral: its charged sum has no finite energy per cell (ValueError)."""
  if lat.dims < 3 and abs(float(np.sum(charges))) > 1e-9:
    raise ValueError(f'a {lat.dims}-D periodic set of charges must be neutral (their sum is '
                     f'{float(np.sum(charges)):g}): its energy per cell diverges')
  tolerance, ewald_sum = TOLERANCE['float64'], SUMS[lat.dims]
  setup = (ewald_sum.choose(lat, len(charges), tolerance) if alpha is None
           else ewald_sum.setup_at(lat, alpha, tolerance))
  energy = make_ewald(lat, 0, len(charges), setup=setup)
  return float(energy(jnp.zeros((0,), jnp.float64), jnp.asarray(positions, jnp.float64),
                      jnp.asarray(charges, jnp.float64)))


def make_bulk_ewald(lat: lattice_lib.Lattice, n_electrons: int, n_nuclei: int,
                    precision: str = 'float64', setup: EwaldSetup = None):
  """The three-dimensional Ewald `coulomb.Coulomb` of a bulk cell (lat.dims = 3), with the
  neutralising background of a charged cell (the electron gas)."""
  setup = setup or choose(lat, n_electrons + n_nuclei, TOLERANCE[precision])
  inverse = np.linalg.inv(lat.vectors)
  n = n_electrons + n_nuclei
  i, j = np.triu_indices(n, k=1)

  def energy(x, atoms, charges):
    dtype = x.dtype
    r = jnp.concatenate([x.reshape(-1, 3), atoms.astype(dtype).reshape(-1, 3)])  # (n, 3)
    q = jnp.concatenate([-jnp.ones((n_electrons,), dtype), charges.astype(dtype)])
    # Real space: each pair reduced to its minimum image, then its nearby images.
    s = (r[i] - r[j]) @ jnp.asarray(inverse, dtype)
    d = (s - jnp.round(s)) @ jnp.asarray(lat.vectors, dtype)
    dist = jnp.linalg.norm(d[:, None, :] + jnp.asarray(setup.real_vectors, dtype)[None], axis=-1)
    real = jnp.sum(q[i] * q[j] * jnp.sum(jax.scipy.special.erfc(setup.alpha * dist) / dist, -1))
    # Reciprocal space: structure factors over the half-sphere of G.
    phase = r @ jnp.asarray(setup.recip_vectors.T, dtype)  # (n, n_G)
    s_cos, s_sin = q @ jnp.cos(phase), q @ jnp.sin(phase)
    recip = jnp.sum(jnp.asarray(setup.recip_weights, dtype) * (s_cos**2 + s_sin**2))
    q2, q_total = jnp.sum(q * q), jnp.sum(q)
    constant = (q2 * (0.5 * setup.self_images - setup.alpha / np.sqrt(np.pi))
                - np.pi / (2 * lat.volume * setup.alpha**2) * q_total**2)
    return real + recip + constant

  return energy


# Slabs (lat.dims = 2): periodic along a_1 and a_2, open along the unit normal n = a_3 / |a_3|.
# For charges of zero sum in a cell of face area A, with d = r_ij reduced to its in-plane
# minimum image, z = d . n and L, G the in-plane lattice and reciprocal vectors,
#
#   E = sum_{i<j} q_i q_j phi(r_ij) + 1/2 phi_0 sum_i q_i^2,
#   phi(d) = sum_L erfc(alpha |d + L|) / |d + L|
#          + (pi / A) sum_{G != 0} cos(G . d) / |G| [f(|G|, z) + f(|G|, -z)]
#          - (2 pi / A) [z erf(alpha z) + exp(-alpha^2 z^2) / (alpha sqrt(pi))],
#   f(g, z) = exp(g z) erfc(g / 2 alpha + alpha z),
#   phi_0 = lim_{d -> 0} [phi(d) - 1 / |d|]
#
# (the two-dimensional Ewald sum: Parry, Surf. Sci. 49, 433 (1975); Heyes, Barber and
# Clarke, J. Chem. Soc. Faraday Trans. 2, 73, 1485 (1977)). f is evaluated as
# exp(g z + log erfc(.)) so that neither factor overflows however far a particle is from
# the others along n. The G = 0 term is finite only for a neutral cell; a charged slab's
# energy per cell diverges, so the sum is for neutral slabs (crystals), not the gas.


class SlabSetup(NamedTuple):
  """The constants of one slab's sum: alpha (1/bohr); in-plane lattice vectors (n_L, 3) and
  a half-plane of reciprocal vectors (n_G, 3) (G and -G give equal terms) with their
  weights (n_G,) 2 pi / (A |G|) (the pair together); and phi_0, Ha per unit charge^2."""
  alpha: float
  real_vectors: np.ndarray
  recip_vectors: np.ndarray
  recip_weights: np.ndarray
  self_potential: float


def slab_real_tail(alpha: float, cutoff: float, area: float) -> float:
  """Bound (continuum estimate) of the in-plane real-space terms beyond `cutoff` for a pair
  of unit charges: (2 pi / A) int_cutoff^inf erfc(alpha r) dr, Ha."""
  value, _ = integrate.quad(lambda r: special.erfc(alpha * r), cutoff, np.inf)
  return 2 * np.pi / area * value


def slab_recip_tail(alpha: float, cutoff: float) -> float:
  """Bound of the reciprocal terms beyond |G| = cutoff for a pair of unit charges (their
  largest, at z = 0): (1 / (2 pi)^2) int_{|G| > cutoff} (2 pi / |G|) erfc(|G| / 2 alpha) d^2G
  = int_cutoff^inf erfc(g / 2 alpha) dg, Ha."""
  value, _ = integrate.quad(lambda g: special.erfc(g / (2 * alpha)), cutoff, np.inf)
  return value


def _slab_cutoffs(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> tuple:
  length = np.sqrt(lat.area)
  return (_cutoff(lambda r: slab_real_tail(alpha, r, lat.area), tolerance, length),
          _cutoff(lambda g: slab_recip_tail(alpha, g), tolerance, 2 * np.pi / length))


def choose_slab(lat: lattice_lib.Lattice, n_particles: int, tolerance: float) -> SlabSetup:
  """alpha and the cut-offs of a slab's sum: among alphas on a logarithmic grid, the one of
  least estimated cost n_pairs (n_L + n_G) (both sums run over pairs, as the reciprocal
  terms depend on each pair's separation along the normal), each tail below `tolerance`."""
  d_max = lattice_lib.half_diagonal(lat)
  n_pairs = max(n_particles * (n_particles - 1) // 2, 1)
  costs = []
  for alpha in np.geomspace(0.5, 20.0, 40) / np.sqrt(lat.area):
    r_cut, g_cut = _slab_cutoffs(lat, alpha, tolerance)
    n_l = np.pi * (r_cut + d_max) ** 2 / lat.area
    n_g = np.pi * g_cut**2 * lat.area / (2 * (2 * np.pi) ** 2)
    costs.append((n_pairs * (max(n_l, 1.0) + n_g), alpha))
  return slab_setup_at(lat, min(costs)[1], tolerance)


def slab_setup_at(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> SlabSetup:
  """A slab's constants for a given alpha (1/bohr), the cut-offs for `tolerance`."""
  r_cut, g_cut = _slab_cutoffs(lat, alpha, tolerance)
  real = lattice_lib.plane_points(lat, lat.vectors, r_cut + lattice_lib.half_diagonal(lat))
  recip = lattice_lib.plane_points(lat, lat.reciprocal, g_cut)[1:]  # Without G = 0.
  recip = recip[_half_space(recip)]
  g = np.linalg.norm(recip, axis=1)
  weights = 2 * np.pi / (lat.area * g)
  images = np.linalg.norm(lattice_lib.plane_points(lat, lat.vectors, r_cut)[1:], axis=1)
  phi_0 = (np.sum(special.erfc(alpha * images) / images)
           + np.sum(weights * 2 * special.erfc(g / (2 * alpha)))
           - 2 * np.pi / lat.area / (alpha * np.sqrt(np.pi)) - 2 * alpha / np.sqrt(np.pi))
  return SlabSetup(float(alpha), real, recip, weights, float(phi_0))


def _log_erfc(x):
  """log erfc(x), accurate for large positive x (where erfc underflows)."""
  return np.log(2.0) + jax.scipy.special.log_ndtr(-np.sqrt(2.0) * x)


def make_slab_ewald(lat: lattice_lib.Lattice, n_electrons: int, n_nuclei: int,
                    precision: str = 'float64', setup: SlabSetup = None):
  """The slab's `coulomb.Coulomb` (x (3N,), atoms (M, 3), charges (M,)) -> E (), Ha, by the
  two-dimensional Ewald sum above; the charges must sum to zero."""
  setup = setup or choose_slab(lat, n_electrons + n_nuclei, TOLERANCE[precision])
  inverse = np.linalg.inv(lat.vectors)
  n = n_electrons + n_nuclei
  i, j = np.triu_indices(n, k=1)
  plane = np.array([1.0, 1.0, 0.0])  # Fractional components reduced to the minimum image.
  g_norm = np.linalg.norm(setup.recip_vectors, axis=1)
  alpha, area = setup.alpha, lat.area

  def energy(x, atoms, charges):
    dtype = x.dtype
    r = jnp.concatenate([x.reshape(-1, 3), atoms.astype(dtype).reshape(-1, 3)])  # (n, 3)
    q = jnp.concatenate([-jnp.ones((n_electrons,), dtype), charges.astype(dtype)])
    s = (r[i] - r[j]) @ jnp.asarray(inverse, dtype)
    d = (s - jnp.asarray(plane, dtype) * jnp.round(s)) @ jnp.asarray(lat.vectors, dtype)
    z = d @ jnp.asarray(lat.normal, dtype)  # (n_pairs,)
    dist = jnp.linalg.norm(d[:, None, :] + jnp.asarray(setup.real_vectors, dtype)[None], axis=-1)
    real = jnp.sum(jax.scipy.special.erfc(alpha * dist) / dist, -1)
    g = jnp.asarray(g_norm, dtype)[None]  # (1, n_G)
    zg = z[:, None]
    f = (jnp.exp(g * zg + _log_erfc(g / (2 * alpha) + alpha * zg))
         + jnp.exp(-g * zg + _log_erfc(g / (2 * alpha) - alpha * zg)))
    cos = jnp.cos(d @ jnp.asarray(setup.recip_vectors.T, dtype))  # (n_pairs, n_G)
    recip = jnp.sum(jnp.asarray(setup.recip_weights, dtype) * cos * f, -1)
    flat = -(2 * np.pi / area) * (z * jax.scipy.special.erf(alpha * z)
                                  + jnp.exp(-(alpha * z) ** 2) / (alpha * np.sqrt(np.pi)))
    pairs = jnp.sum(q[i] * q[j] * (real + recip + flat))
    return pairs + 0.5 * setup.self_potential * jnp.sum(q * q)

  return energy


# Chains (lat.dims = 1): periodic along a_1 (period a = |a_1|, unit vector e), open across it.
# For charges of zero sum, with d = r_ij reduced to its minimum image along e, z = d . e,
# rho = |d - z e| (the distance across the chain) and k_m = 2 pi m / a,
#
#   E = sum_{i<j} q_i q_j phi(r_ij) + 1/2 phi_0 sum_i q_i^2,
#   phi(d) = sum_n erfc(alpha |d + n a_1|) / |d + n a_1|
#          + (2 / a) sum_{m >= 1} cos(k_m z) K(k_m, rho) - (1 / a) Ein(alpha^2 rho^2),
#   K(k, rho) = int_0^alpha (2 / t) exp(-rho^2 t^2 - k^2 / (4 t^2)) dt,
#   Ein(x) = int_0^x (1 - exp(-u)) / u du = E_1(x) + log x + gamma (Euler's),
#   phi_0 = lim_{d -> 0} [phi(d) - 1 / |d|]
#         = sum_{n != 0} erfc(alpha |n| a) / (|n| a) + (2 / a) sum_m E_1(k_m^2 / 4 alpha^2)
#           - 2 alpha / sqrt(pi).
#
# (the one-dimensional Ewald sum, e.g. Porto, J. Phys. A 33, 6211 (2000)). It follows from
# erf(alpha r) / r = (2 / sqrt(pi)) int_0^alpha exp(-r^2 t^2) dt, whose sum over the images
# along e is a Fourier series in z. Its k = 0 term diverges as a constant times
# (sum_i q_i)^2, which vanishes for a neutral cell and leaves -(1 / a) Ein: the logarithmic
# potential of a line of charge, finite at rho = 0. K (an incomplete Bessel function,
# 2 K_0(k rho) when alpha -> infinity) has no closed form: it is integrated by Gauss-Legendre
# nodes in log t on [t_0, alpha], below t_0 = k / (2 sqrt(CHAIN_EXPONENT)) the integrand is
# below exp(-CHAIN_EXPONENT). Like a slab's, the sum is for neutral cells.

CHAIN_NODES = 48  # Gauss-Legendre nodes per K(k_m, rho).
CHAIN_EXPONENT = 50.0  # k^2 / (4 t^2) at the lower end of K's integral.
EULER_GAMMA = 0.5772156649015329


class ChainSetup(NamedTuple):
  """The constants of one chain's sum: alpha (1/bohr); the lattice vectors n a_1 within the
  cut-off (n_L, 3); the k_m (n_G,) 1/bohr; K's quadrature as t^2 (n_G n_Q,) and weights
  (n_G n_Q, n_G) (each column m sums k_m's nodes, 2 / a and exp(-k_m^2 / 4 t^2) included);
  and phi_0, Ha per unit charge^2."""
  alpha: float
  real_vectors: np.ndarray
  wavenumbers: np.ndarray
  nodes_t2: np.ndarray
  node_weights: np.ndarray
  self_potential: float


def chain_real_tail(alpha: float, cutoff: float, length: float) -> float:
  """Bound of the real-space terms left out for a pair of unit charges when the images
  within cutoff + a / 2 of the pair's minimum image are summed: each left-out image on either
  side is at least cutoff, cutoff + a, ... away, 2 sum_j erfc(alpha r_j) / r_j, Ha."""
  r = cutoff + length * np.arange(200)
  return float(2 * np.sum(special.erfc(alpha * r) / r))


def chain_recip_tail(alpha: float, cutoff: float, length: float) -> float:
  """The reciprocal terms beyond k = cutoff for a pair of unit charges, at their largest (rho
  = 0, where K = E_1(k^2 / 4 alpha^2)): (2 / a) sum_{k_m > cutoff} E_1(k_m^2 / 4 alpha^2), Ha."""
  k = 2 * np.pi / length * np.arange(np.floor(cutoff * length / (2 * np.pi)) + 1,
                                      np.floor(cutoff * length / (2 * np.pi)) + 200)
  return float(2 / length * np.sum(special.exp1(k * k / (4 * alpha**2))))


def _chain_cutoffs(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> tuple:
  return (_cutoff(lambda r: chain_real_tail(alpha, r, lat.length), tolerance, lat.length),
          _cutoff(lambda k: chain_recip_tail(alpha, k, lat.length), tolerance,
                  2 * np.pi / lat.length))


def choose_chain(lat: lattice_lib.Lattice, n_particles: int, tolerance: float) -> ChainSetup:
  """alpha and the cut-offs of a chain's sum: among alphas on a logarithmic grid, the one of
  least estimated cost n_pairs (n_L + n_G CHAIN_NODES) (both sums run over pairs), each
  tail below `tolerance`."""
  costs = []
  for alpha in np.geomspace(0.5, 20.0, 40) / lat.length:
    r_cut, k_cut = _chain_cutoffs(lat, alpha, tolerance)
    n_l = 2 * np.floor((r_cut + lat.length / 2) / lat.length) + 1
    n_g = np.floor(k_cut * lat.length / (2 * np.pi))
    costs.append((n_l + n_g * CHAIN_NODES, alpha))
  return chain_setup_at(lat, min(costs)[1], tolerance)


def chain_setup_at(lat: lattice_lib.Lattice, alpha: float, tolerance: float) -> ChainSetup:
  """A chain's constants for a given alpha (1/bohr), the cut-offs for `tolerance`."""
  r_cut, k_cut = _chain_cutoffs(lat, alpha, tolerance)
  a = lat.length
  real = lattice_lib.line_points(lat, r_cut + a / 2)
  k = 2 * np.pi / a * np.arange(1, max(int(np.floor(k_cut * a / (2 * np.pi))), 0) + 1)
  k = k[k / (2 * np.sqrt(CHAIN_EXPONENT)) < alpha]  # Others have K below exp(-CHAIN_EXPONENT).
  x, w = np.polynomial.legendre.leggauss(CHAIN_NODES)
  t2 = np.zeros((len(k), CHAIN_NODES))
  weights = np.zeros((len(k), CHAIN_NODES, len(k)))
  for m, k_m in enumerate(k):
    lo, hi = np.log(k_m / (2 * np.sqrt(CHAIN_EXPONENT))), np.log(alpha)
    t = np.exp(lo + (hi - lo) * (x + 1) / 2)  # dt / t = du, du = (hi - lo) / 2 dx.
    t2[m] = t * t
    weights[m, :, m] = (2 / a) * 2 * w * (hi - lo) / 2 * np.exp(-k_m**2 / (4 * t * t))
  images = np.linalg.norm(real[1:], axis=1)
  phi_0 = (np.sum(special.erfc(alpha * images) / images)
           + 2 / a * np.sum(special.exp1(k * k / (4 * alpha**2))) - 2 * alpha / np.sqrt(np.pi))
  return ChainSetup(float(alpha), real, k, t2.reshape(-1), weights.reshape(t2.size, len(k)),
                    float(phi_0))


def _ein(x):
  """Ein(x) = int_0^x (1 - exp(-u)) / u du for x >= 0 (jax): its power series below 1, where
  E_1(x) + log x + gamma would cancel, and that sum above."""
  small = x < 1.0
  xs, xl = jnp.where(small, x, 0.0), jnp.where(small, 1.0, x)
  series, term = jnp.zeros_like(x), jnp.ones_like(x)
  for n in range(1, 21):  # The 21st term is below 1e-20 for x < 1.
    term = -term * xs / n  # (-x)^n / n!
    series = series - term / n
  return jnp.where(small, series, jax.scipy.special.exp1(xl) + jnp.log(xl) + EULER_GAMMA)


def make_chain_ewald(lat: lattice_lib.Lattice, n_electrons: int, n_nuclei: int,
                     precision: str = 'float64', setup: ChainSetup = None):
  """The chain's `coulomb.Coulomb` (x (3N,), atoms (M, 3), charges (M,)) -> E (), Ha, by the
  one-dimensional Ewald sum above; the charges must sum to zero."""
  setup = setup or choose_chain(lat, n_electrons + n_nuclei, TOLERANCE[precision])
  n = n_electrons + n_nuclei
  i, j = np.triu_indices(n, k=1)
  a, alpha = lat.length, setup.alpha

  def energy(x, atoms, charges):
    dtype = x.dtype
    r = jnp.concatenate([x.reshape(-1, 3), atoms.astype(dtype).reshape(-1, 3)])  # (n, 3)
    q = jnp.concatenate([-jnp.ones((n_electrons,), dtype), charges.astype(dtype)])
    d = r[i] - r[j]
    z = d @ jnp.asarray(lat.axis, dtype)  # (n_pairs,)
    shift = jnp.round(z / a)  # To the minimum image along the chain.
    d = d - shift[:, None] * jnp.asarray(lat.vectors[0], dtype)
    z = z - shift * a
    rho2 = jnp.maximum(jnp.sum(d * d, -1) - z * z, 0.0)
    dist = jnp.linalg.norm(d[:, None, :] + jnp.asarray(setup.real_vectors, dtype)[None], axis=-1)
    real = jnp.sum(jax.scipy.special.erfc(alpha * dist) / dist, -1)
    bessel = jnp.exp(-rho2[:, None] * jnp.asarray(setup.nodes_t2, dtype)[None]) @ jnp.asarray(
        setup.node_weights, dtype)  # (n_pairs, n_G): (2 / a) K(k_m, rho)
    recip = jnp.sum(jnp.cos(z[:, None] * jnp.asarray(setup.wavenumbers, dtype)[None]) * bessel,
                    -1)
    line = -_ein(alpha**2 * rho2) / a
    pairs = jnp.sum(q[i] * q[j] * (real + recip + line))
    return pairs + 0.5 * setup.self_potential * jnp.sum(q * q)

  return energy


class EwaldSum(NamedTuple):
  """The Ewald sum of one periodicity: choose(lat, n_particles, tolerance) and
  setup_at(lat, alpha, tolerance) give its setup, make(lat, n_electrons, n_nuclei, precision,
  setup) its energy."""
  choose: Callable
  setup_at: Callable
  make: Callable


# The sum of each periodicity, by lat.dims.
SUMS = {3: EwaldSum(choose, setup_at, make_bulk_ewald),
        2: EwaldSum(choose_slab, slab_setup_at, make_slab_ewald),
        1: EwaldSum(choose_chain, chain_setup_at, make_chain_ewald)}
