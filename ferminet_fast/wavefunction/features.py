"""Input features: what the ansatzes compute from the raw electron and nuclear coordinates.

`Features` maps the electron positions of ONE configuration to the electron-nucleus and
electron-electron vectors and distances (`Geometry`) that every layer above reads; the
FermiNet and Psiformer input layers (`ferminet_inputs`, `psiformer_inputs`) are functions of
that geometry alone. Open boundaries (`molecular`) use plain differences; periodic cells
(`periodic`) replace each difference by a lattice-periodic function of it, so that the
network sees only periodic functions of the coordinates.
"""

from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import lattice as lattice_lib


class Geometry(NamedTuple):
  """Electron-nucleus and electron-electron vectors and distances, bohr, and the electron
  positions. Offsets have d = 3 components with open boundaries (the differences) and
  d = 6 in a periodic cell (`periodic`); distances are the offsets' norms."""
  ae: jax.Array  # (n, m, d) offsets of r_i from R_I.
  r_ae: jax.Array  # (n, m, 1) their lengths.
  ee: jax.Array  # (n, n, d) offsets of r_i from r_j.
  r_ee: jax.Array  # (n, n, 1) their lengths, zero on the diagonal.
  # (n, 3) the electron positions; in a cell scaled by s, r / s, the positions in the
  # system's own cell, where its k-points (plane waves, Bloch factors) are given.
  r: jax.Array


def electrons(g: Geometry, lo: int, hi: int) -> Geometry:
  """The geometry of electrons lo..hi-1 alone (rows of every field; e.g. one spin)."""
  return Geometry(g.ae[lo:hi], g.r_ae[lo:hi], g.ee[lo:hi], g.r_ee[lo:hi], g.r[lo:hi])


class Features(Protocol):
  """(r (n, 3), atoms (m, 3), scale=None) -> Geometry: the vectors and distances between the
  n electrons at r and the m nuclei at `atoms` (all bohr), with finite derivatives of every
  order where electrons coincide (the diagonal of r_ee), since the Laplacian differentiates
  through them. `scale` () (periodic boundaries only): the cell is the system's own times
  `scale`; None: the system's own."""

  def __call__(self, r: jax.Array, atoms: jax.Array, scale=None) -> Geometry:
    ...


def pair_norms(ee: jax.Array) -> jax.Array:
  """Norms (n, n, 1) of pair offsets ee (n, n, k) whose diagonal is zero: zero, with finite
  gradients, on the diagonal (the norm is taken of ee + 1 there, then masked)."""
  eye = jnp.eye(ee.shape[0], dtype=ee.dtype)[..., None]
  return jnp.linalg.norm(ee + eye, axis=-1, keepdims=True) * (1.0 - eye)


def pair_distances(r: jax.Array) -> tuple:
  """Differences (n, n, 3) and distances (n, n, 1) between electrons at r (n, 3)."""
  ee = r[:, None, :] - r[None, :, :]
  return ee, pair_norms(ee)


def molecular(r: jax.Array, atoms: jax.Array, scale=None) -> Geometry:
  """Open boundaries: plain differences and Euclidean distances (a `Features`; no cell to
  scale)."""
  if scale is not None:
    raise ValueError('open boundaries have no cell to scale')
  ae = r[:, None, :] - atoms[None]
  r_ae = jnp.linalg.norm(ae, axis=-1, keepdims=True)
  ee, r_ee = pair_distances(r)
  return Geometry(ae, r_ae, ee, r_ee, r)


def periodic(lattice: lattice_lib.Lattice) -> Features:
  """Periodic boundaries in `lattice` (a `Features`): each difference d, with fractional
  coordinates s (d = s . vectors), becomes the 6-vector [sin(2 pi s), 1 - cos(2 pi s)] .
  vectors / (2 pi) (each half mapped by the lattice vectors, bohr), and each distance its
  norm. Both are lattice-periodic and smooth; near d = 0 the offset is d (to first order)
  and the norm |d| (to second order), so cusps and short-range features are unchanged, and
  the norm vanishes only at the lattice points. The network is then periodic by
  construction, whatever cell the electrons are in.

  The phase of a difference is the difference of the two phases, so the sines and cosines
  of the n x n pairs come from those of each particle by the angle-difference identities:
  3 (n + m) transcendental functions instead of 6 n (n + m), the most expensive operations
  of the features and of their Laplacian.

  A slab (lattice.dims = 2) is open along a_3 (normal to a_1 and a_2), a chain
  (lattice.dims = 1) along a_2 and a_3 (normal to a_1): along an open direction the
  offset's component is the plain difference, s_i a_i, in the sine half, and nothing in the
  cosine half, so the features are periodic along the lattice's periodic directions only.

  In the cell scaled by s (a scan of the cell, physics/geometries.py), whose reciprocal
  vectors are those of `lattice` over s, the phases are those of r / s in `lattice` and
  every offset and distance is s times that of r / s there: lengths stay in bohr, so one
  network sees each cell's own sizes."""
  vectors = np.asarray(lattice.vectors) / (2 * np.pi)
  to_phase = np.asarray(lattice.reciprocal).T  # r . B^T = 2 pi s.
  dims = lattice.dims  # Periodic along a_1 .. a_dims, open along the others.

  def waves(p):
    """sin and cos of the phases p (k, 3) of k positions (and p itself for a slab or chain,
    whose open directions take the plain difference); the barrier keeps XLA from fusing them
    into each pair's product, which would compute them again per pair."""
    return jax.lax.optimization_barrier((jnp.sin(p), jnp.cos(p)) + ((p,) if dims < 3 else ()))

  def offsets(a, b):
    """The periodic offsets (k, l, 6) of positions with waves a (k, 3) from those with b."""
    (sin_a, cos_a), (sin_b, cos_b) = a[:2], b[:2]
    sin = sin_a[:, None] * cos_b[None] - cos_a[:, None] * sin_b[None]  # sin(p_a - p_b)
    cos = cos_a[:, None] * cos_b[None] + sin_a[:, None] * sin_b[None]  # cos(p_a - p_b)
    if dims < 3:  # Along an open direction: the phase difference itself, no cosine term.
      sin = jnp.concatenate([sin[..., :dims], a[2][:, None, dims:] - b[2][None, :, dims:]],
                            axis=-1)
      cos = jnp.concatenate([cos[..., :dims], jnp.ones_like(cos[..., dims:])], axis=-1)
    m = jnp.asarray(vectors, sin.dtype)
    return jnp.concatenate([sin @ m, (1.0 - cos) @ m], axis=-1)

  def features(r, atoms, scale=None):
    if scale is not None:  # The cell scaled by s: lengths of r / s in `lattice`, times s.
      g = features(r / scale, atoms.astype(r.dtype) / scale)
      return Geometry(g.ae * scale, g.r_ae * scale, g.ee * scale, g.r_ee * scale, g.r)
    phase = jnp.asarray(to_phase, r.dtype)
    electron = waves(r @ phase)
    ae = offsets(electron, waves(atoms.astype(r.dtype) @ phase))
    r_ae = jnp.linalg.norm(ae, axis=-1, keepdims=True)
    # Exactly zero on the diagonal (the identities leave rounding there).
    ee = offsets(electron, electron) * (1.0 - jnp.eye(r.shape[0], dtype=r.dtype)[..., None])
    return Geometry(ae, r_ae, ee, pair_norms(ee), r)

  return features


def ferminet_inputs(g: Geometry) -> tuple:
  """FermiNet's input streams: one-electron h1 (n, 4m), each nucleus's offset and distance,
  and two-electron h2 (n, n, 4), each pair's offset and distance."""
  n = g.ae.shape[0]
  h1 = jnp.concatenate([g.ae, g.r_ae], axis=-1).reshape(n, -1)
  h2 = jnp.concatenate([g.ee, g.r_ee], axis=-1)
  return h1, h2


def psiformer_inputs(g: Geometry, n_up: int, n_down: int) -> jax.Array:
  """Psiformer's per-electron input (n, 4m + 1): the offsets to the nuclei log-scaled,
  r log(1 + |r|) / |r|, then log(1 + |r|), then the spin (+1 up, -1 down). The log scaling
  keeps distant electrons' inputs of order one."""
  n = g.ae.shape[0]
  scale = jnp.log1p(g.r_ae)  # (n, m, 1)
  spin = jnp.concatenate([jnp.ones((n_up, 1), g.ae.dtype), -jnp.ones((n_down, 1), g.ae.dtype)])
  return jnp.concatenate([(g.ae * scale / jnp.maximum(g.r_ae, 1e-12)).reshape(n, -1),
                          scale.reshape(n, -1), spin], axis=-1)


# The features of each kind of boundary (physics/boundary.py), by its type.
_OF_BOUNDARY = {boundary_lib.Open: lambda b: molecular,
                boundary_lib.Periodic: lambda b: periodic(b.lattice)}


def of_boundary(boundary: boundary_lib.Boundary) -> Features:
  """The `Features` of the boundary conditions: `molecular` for open ones, `periodic` in a
  cell."""
  return _OF_BOUNDARY[type(boundary)](boundary)
