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
the nucleus. That is N x M_ecp x 12 extra network evaluations per configuration. The
terms of that sum, one per electron and point, are the operator's matrix elements V_x'x
psi(x') / psi(x) (`make_nonlocal_elements`), which DMC's T-moves take as well.

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


class Elements(NamedTuple):
  """The non-local ECP operator's matrix elements from one configuration x to the P = 12 K
  configurations x' that move one electron to a quadrature point about one of the K atoms
  with an ECP (the same distance from that nucleus, the frame the energy uses at x)."""
  points: jax.Array  # (P, 3) bohr, where the electron goes in each x'.
  value: jax.Array  # (P,) Ha, V_x'x psi(x') / psi(x): their sum over the points and the
  # electrons is the non-local energy.
  sign: jax.Array  # (P,) the sign of psi(x') ...
  log_abs: jax.Array  # (P,) ... and log|psi(x')|.


class _Tables(NamedTuple):
  """The radial terms of the atoms with an ECP, padded to one shape (rows with c = 0 add
  nothing), as constants of the program."""
  atoms: np.ndarray  # (K,) indices of the atoms with an ECP.
  centres: np.ndarray  # (K, 3) bohr, their positions in the system.
  local: np.ndarray  # (K, T, 3) the local channel's (n, alpha, c) rows.
  channels: Optional[np.ndarray]  # (L + 1, K, T, 3) per non-local channel; None: none.


def _tables(positions: np.ndarray, ecps: tuple) -> Optional[_Tables]:
  """The tables of the atoms at `positions` (M, 3) with ECPs `ecps` (one Ecp or None per
  atom); None when no atom has one."""
  with_ecp = [i for i, e in enumerate(ecps) if e is not None]
  if not with_ecp:
    return None
  chosen = [ecps[i] for i in with_ecp]
  max_l = max(len(e.channels) for e in chosen) - 1
  blocks = [[e.channels[l] if l < len(e.channels) else np.zeros((0, 3)) for e in chosen]
            for l in range(max_l + 1)]
  width = max([b.shape[0] for b in [e.local for e in chosen] + sum(blocks, [])] + [1])

  def pad(block):
    return np.concatenate([block, np.zeros((width - block.shape[0], 3))])

  return _Tables(np.asarray(with_ecp), np.asarray(positions, np.float64)[with_ecp],
                 np.stack([pad(e.local) for e in chosen]),
                 np.stack([np.stack([pad(b) for b in per_l]) for per_l in blocks])
                 if max_l >= 0 else None)


def _per_atom(terms, r):
  """Each atom's radial sum: terms (K, T, 3), r (..., K) -> (..., K)."""
  return jax.vmap(radial, in_axes=(0, -1), out_axes=-1)(terms, r)


def _placed(tables: _Tables, apply: Callable, atoms, dtype) -> tuple:
  """(nuclei with an ECP (K, 3) bohr, psi(params, x) -> (sign, log|psi|)): at `atoms` (M, 3),
  or with None at the system's own positions (the function's own constants)."""
  if atoms is None:
    return jnp.asarray(tables.centres, dtype), apply
  return (jnp.asarray(atoms, dtype)[tables.atoms],
          lambda params, y: apply(params, y, atoms))


def make_nonlocal_elements(apply: Callable, positions: np.ndarray,
                           ecps: tuple) -> Optional[Callable]:
  """(params, x (3N,), i, sign, log_abs, atoms=None) -> Elements of electron i of one
  configuration x, whose psi has `sign` and log|psi| `log_abs`: per quadrature point q about
  atom k, V_x'x psi(x') / psi(x) = sum_l U_l(r_ik) (2l + 1) / 12 P_l(cos theta_q) psi(x') /
  psi(x), theta_q the angle between the electron's direction from the nucleus and q's. The
  frame is electron i's rotation drawn from x (as the energy's). `apply`, `positions`,
  `ecps`, `atoms`: as make_ecp_energy's. None when no atom has a non-local channel."""
  tables = _tables(positions, ecps)
  if tables is None or tables.channels is None:
    return None
  channels = tables.channels
  max_l = channels.shape[0] - 1

  def elements(params, x, i, sign, log_abs, atoms=None) -> Elements:
    dtype = x.dtype
    nuclei, psi = _placed(tables, apply, atoms, dtype)
    r = x.reshape(-1, 3)
    d = r[i] - nuclei  # (K, 3)
    dist = jnp.linalg.norm(d, axis=-1)  # (K,)
    u = jnp.stack([_per_atom(c, dist) for c in channels])  # (L + 1, K)
    frame = rotations(configuration_key(x), r.shape[0], dtype)[i]
    points = jnp.asarray(ICOSAHEDRON, dtype) @ frame.T  # (12, 3)
    cos = (d / dist[:, None]) @ points.T  # (K, 12)
    moved = (nuclei[:, None, :] + dist[:, None, None] * points[None]).reshape(-1, 3)
    sign_new, log_new = jax.vmap(lambda p: psi(params, r.at[i].set(p).reshape(-1)))(moved)
    ratio = (sign_new * sign * jnp.exp(log_new - log_abs)).reshape(cos.shape)
    weights = jnp.asarray((2 * np.arange(max_l + 1) + 1) / 12, dtype)[:, None, None]
    u = u[:, :, None]
    terms = jnp.where(u != 0, u * weights * legendre(max_l, cos) * ratio[None], 0.0)
    return Elements(moved, jnp.sum(terms, axis=0).reshape(-1), sign_new, log_new)

  return elements


def make_ecp_energy(apply: Callable, positions: np.ndarray,
                    ecps: tuple) -> Optional[Callable]:
  """(params, x (3N,), atoms=None) -> the ECP energy of one configuration (Ha): local and
  non-local terms of every atom with an ECP, the nuclei at `atoms` (M, 3) bohr, or with
  None at `positions` (M, 3) bohr (constants of the program); `apply(params, x[, atoms]) ->
  (sign, log|psi|)` (called without atoms when they are None), `ecps` one Ecp or None per
  atom. The non-local energy is the sum of make_nonlocal_elements' values over the points
  and the electrons. None when no atom has an ECP."""
  tables = _tables(positions, ecps)
  if tables is None:
    return None
  elements = make_nonlocal_elements(apply, positions, ecps)

  def energy(params, x, atoms=None):
    nuclei, psi = _placed(tables, apply, atoms, x.dtype)
    r = x.reshape(-1, 3)
    dist = jnp.linalg.norm(r[:, None, :] - nuclei[None], axis=-1)  # (N, K)
    total = jnp.sum(_per_atom(tables.local, dist))
    if elements is None:
      return total
    sign, log_abs = psi(params, x)
    values = jax.vmap(lambda i: elements(params, x, i, sign, log_abs, atoms).value)(
        jnp.arange(r.shape[0]))  # (N, P)
    return total + jnp.sum(values)

  return energy
