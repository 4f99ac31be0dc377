"""Input features: what the ansatzes compute from the raw electron and nuclear coordinates.

`Features` maps the electron positions of ONE configuration to the electron-nucleus and
electron-electron vectors and distances (`Geometry`) that every layer above reads; the
FermiNet and Psiformer input layers (`ferminet_inputs`, `psiformer_inputs`) are functions of
that geometry alone. Open boundaries (`molecular`) are the one implementation; a periodic
one replaces the differences by minimum images or periodic functions of them.
"""

from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp


class Geometry(NamedTuple):
  """Electron-nucleus and electron-electron vectors and distances, bohr."""
  ae: jax.Array  # (n, m, 3) r_i - R_I.
  r_ae: jax.Array  # (n, m, 1) |r_i - R_I|.
  ee: jax.Array  # (n, n, 3) r_i - r_j.
  r_ee: jax.Array  # (n, n, 1) |r_i - r_j|, zero on the diagonal.


class Features(Protocol):
  """(r (n, 3), atoms (m, 3)) -> Geometry: the vectors and distances between the n electrons
  at r and the m nuclei at `atoms` (all bohr), with finite derivatives of every order where
  electrons coincide (the diagonal of r_ee), since the Laplacian differentiates through
  them."""

  def __call__(self, r: jax.Array, atoms: jax.Array) -> Geometry:
    ...


def pair_distances(r: jax.Array) -> tuple:
  """Differences (n, n, 3) and distances (n, n, 1) between electrons at r (n, 3); zero, with
  finite gradients, on the diagonal (the norm is taken of ee + 1 there, then masked)."""
  n = r.shape[0]
  ee = r[:, None, :] - r[None, :, :]
  eye = jnp.eye(n, dtype=r.dtype)[..., None]
  r_ee = jnp.linalg.norm(ee + eye, axis=-1, keepdims=True) * (1.0 - eye)
  return ee, r_ee


def molecular(r: jax.Array, atoms: jax.Array) -> Geometry:
  """Open boundaries: plain differences and Euclidean distances (a `Features`)."""
  ae = r[:, None, :] - atoms[None]
  r_ae = jnp.linalg.norm(ae, axis=-1, keepdims=True)
  ee, r_ee = pair_distances(r)
  return Geometry(ae, r_ae, ee, r_ee)


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
