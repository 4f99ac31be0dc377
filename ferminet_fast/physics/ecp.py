"""Effective core potentials (pseudopotentials): the data from pyscf, the energy in JAX.

An atom with an ECP loses its `n_core` core electrons, its nuclear charge becomes
Z_eff = Z - n_core (systems.py), and each valence electron i at r = |r_i - R| from it
feels, besides -Z_eff / r,
  U_loc(r) + sum_l U_l(r) sum_m |lm><lm|,   U(r) = sum_k c_k r^(n_k) exp(-alpha_k r^2),
the projectors acting on the electron's direction about the nucleus. The non-local part's
action on psi is an angular integral, evaluated by a 12-point (icosahedral) quadrature,
exact for spherical harmonics up to degree 5, about a randomly rotated frame:
  [sum_m |lm><lm| psi](r_i) / psi = (2l + 1) / 12 sum_q P_l(cos theta_q) psi(r_i -> r q_q) / psi,
where r_i -> r q_q moves electron i to the quadrature point q_q at the same distance from
the nucleus. That is N x M_ecp x 12 extra network evaluations per configuration.

The rotation is drawn from a key derived from the configuration itself, so it is new at
every configuration (which removes the quadrature's orientation bias on average) while
the local energy stays a function of (params, x).
"""

import functools
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.errors import InputError


class Ecp(NamedTuple):
  """One element's ECP: U(r) = sum_k c_k r^(n_k) exp(-alpha_k r^2) per channel, each channel
  an array of rows (n_k, alpha_k (bohr^-2), c_k (Ha bohr^-n_k))."""
  name: str
  n_core: int
  local: np.ndarray  # (K, 3)
  channels: tuple  # (K_l, 3) for l = 0, 1, ..., max_l (empty rows for an absent channel)


@functools.lru_cache(maxsize=None)
def load(name: str, symbol: str) -> Ecp:
  """pyscf's ECP `name` for element `symbol`; InputError if pyscf does not know it."""
  try:
    from pyscf import gto
  except ImportError:
    raise InputError("config.system.ecp needs the optional package pyscf: pip install "
                     "'ferminet_fast[pyscf]'") from None
  import warnings
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      data = gto.basis.load_ecp(name, symbol)
  except Exception as e:  # pyscf raises RuntimeError, KeyError, ... by format.
    raise InputError(f'config.system.ecp: pyscf knows no ECP named {name!r} '
                     f'({type(e).__name__})') from None
  if not data:
    raise InputError(f'config.system.ecp: the ECP {name!r} does not cover {symbol}')
  n_core, channels = data
  by_l = {}
  for l, powers in channels:
    # pyscf lists the terms of r^(i - 2) in powers[i], each as [alpha, c].
    by_l[l] = np.array([(i - 2, alpha, c) for i, terms in enumerate(powers)
                        for alpha, c in terms], dtype=np.float64).reshape(-1, 3)
  max_l = max([l for l in by_l if l >= 0], default=-1)
  return Ecp(name, int(n_core), by_l.get(-1, np.zeros((0, 3))),
             tuple(by_l.get(l, np.zeros((0, 3))) for l in range(max_l + 1)))


def radial(terms: jax.Array, r: jax.Array) -> jax.Array:
  """sum_k c_k r^(n_k) exp(-alpha_k r^2) at distances r (...,) for terms (K, 3) -> (...,)."""
  if terms.shape[0] == 0:
    return jnp.zeros_like(r)
  n, alpha, c = (jnp.asarray(terms[:, i], r.dtype) for i in range(3))
  r = r[..., None]
  return jnp.sum(c * r ** n * jnp.exp(-alpha * r * r), axis=-1)


def legendre(l_max: int, x: jax.Array) -> jax.Array:
  """P_0 .. P_l_max at x (...,) -> (l_max + 1, ...), by Bonnet's recursion."""
  p = [jnp.ones_like(x), x]
  for l in range(1, l_max):
    p.append(((2 * l + 1) * x * p[l] - l * p[l - 1]) / (l + 1))
  return jnp.stack(p[:l_max + 1])


_GOLDEN = (1 + 5 ** 0.5) / 2
# The 12 vertices of an icosahedron on the unit sphere, equal weights 1/12: exact for
# spherical harmonics of degree <= 5.
ICOSAHEDRON = np.array([(0, s1, s2 * _GOLDEN) for s1 in (1, -1) for s2 in (1, -1)] +
                       [(s1, s2 * _GOLDEN, 0) for s1 in (1, -1) for s2 in (1, -1)] +
                       [(s2 * _GOLDEN, 0, s1) for s1 in (1, -1) for s2 in (1, -1)])
ICOSAHEDRON = ICOSAHEDRON / np.linalg.norm(ICOSAHEDRON, axis=1, keepdims=True)
EXACT_DEGREE = 5


def rotations(key: jax.Array, n: int, dtype) -> jax.Array:
  """n rotation matrices (n, 3, 3) uniform over SO(3) (from uniform unit quaternions)."""
  q = jax.random.normal(key, (n, 4), dtype)
  w, x, y, z = jnp.moveaxis(q / jnp.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
  return jnp.stack([
      jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
      jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
      jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)],
      axis=-2)


def configuration_key(x: jax.Array) -> jax.Array:
  """A PRNG key that is a function of the configuration's bits (float32 view)."""
  bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
  mix = jnp.arange(1, x.shape[0] + 1, dtype=jnp.uint32) * jnp.uint32(2654435761)
  return jax.random.fold_in(jax.random.PRNGKey(0x5EED), jnp.sum(bits * mix, dtype=jnp.uint32))


def make_ecp_energy(apply: Callable, positions: np.ndarray,
                    ecps: tuple) -> Optional[Callable]:
  """(params, x (3N,), atoms=None) -> the ECP energy of one configuration (Ha): local and
  non-local terms of every atom with an ECP, the nuclei at `atoms` (M, 3) bohr, or with
  None at `positions` (M, 3) bohr (constants of the program); `apply(params, x[, atoms]) ->
  (sign, log|psi|)` (called without atoms when they are None), `ecps` one Ecp or None per
  atom. None when no atom has one."""
  with_ecp = [i for i, e in enumerate(ecps) if e is not None]
  if not with_ecp:
    return None
  centres = np.asarray(positions, np.float64)[with_ecp]  # (K, 3)
  chosen = [ecps[i] for i in with_ecp]
  max_l = max(len(e.channels) for e in chosen) - 1
  blocks = [[e.channels[l] if l < len(e.channels) else np.zeros((0, 3)) for e in chosen]
            for l in range(max_l + 1)]
  width = max([b.shape[0] for b in [e.local for e in chosen] + sum(blocks, [])] + [1])

  def pad(block):  # Rows with c = 0 add nothing; every block gets `width` rows.
    return np.concatenate([block, np.zeros((width - block.shape[0], 3))])

  local = np.stack([pad(e.local) for e in chosen])  # (K, T, 3)
  channels = (np.stack([np.stack([pad(b) for b in per_l]) for per_l in blocks])
              if max_l >= 0 else None)  # (L + 1, K, T, 3)

  def per_atom(terms, r):  # terms (K, T, 3), r (N, K) -> (N, K)
    return jax.vmap(radial, in_axes=(0, 1), out_axes=1)(terms, r)

  def energy(params, x, atoms=None):
    dtype = x.dtype
    if atoms is None:
      nuclei = lambda: jnp.asarray(centres, dtype)  # noqa: E731
      psi = apply
    else:
      nuclei = lambda: jnp.asarray(atoms, dtype)[np.asarray(with_ecp)]  # noqa: E731
      psi = lambda params, y: apply(params, y, atoms)  # noqa: E731
    r = x.reshape(-1, 3)
    n = r.shape[0]
    d = r[:, None, :] - nuclei()[None]  # (N, K, 3)
    dist = jnp.linalg.norm(d, axis=-1)  # (N, K)
    total = jnp.sum(per_atom(local, dist))
    if channels is None:
      return total
    u = jnp.stack([per_atom(c, dist) for c in channels], axis=-1)  # (N, K, L + 1)
    points = jnp.einsum('nij,qj->nqi', rotations(configuration_key(x), n, dtype),
                        jnp.asarray(ICOSAHEDRON, dtype))  # (N, 12, 3), one frame per electron
    cos = jnp.einsum('nki,nqi->nkq', d / dist[..., None], points)  # (N, K, 12)
    moved = (nuclei()[None, :, None, :]
             + dist[:, :, None, None] * points[:, None, :, :])  # (N, K, 12, 3)
    sign, log_abs = psi(params, x)

    def ratio(i, position):  # psi(electron i at position) / psi(x)
      sign_new, log_new = psi(params, r.at[i].set(position).reshape(-1))
      return sign_new * sign * jnp.exp(log_new - log_abs)

    ratios = jax.vmap(lambda i, p: jax.vmap(jax.vmap(lambda q: ratio(i, q)))(p))(
        jnp.arange(n), moved)  # (N, K, 12)
    p_l = legendre(max_l, cos)  # (L + 1, N, K, 12)
    weights = jnp.asarray(2 * np.arange(max_l + 1) + 1, dtype)[:, None, None]
    projected = weights * jnp.mean(p_l * ratios[None], axis=-1)  # (L + 1, N, K)
    nonlocal_ = jnp.where(u != 0, u * jnp.moveaxis(projected, 0, -1), 0.0)
    return total + jnp.sum(nonlocal_)

  return energy
