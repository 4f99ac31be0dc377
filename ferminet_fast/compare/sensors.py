"""Sparse sensors by QR pivoting on POD modes (QDEIM), in JAX and in NumPy/SciPy.

The snapshot matrix X has one row per grid location and one column per (snapshot,
field); its leading left singular vectors are the POD modes Psi_r (locations x r), with
r the number of modes holding 99% of the energy, capped at K. Column-pivoted QR of
Psi_r^T (modes weighted by their singular values, as the report's PODBasedSelector does)
orders the locations; the first K are the sensors. A field f is then reconstructed from
its K sensor values by least squares in the POD basis: f ~ Psi_r pinv(Psi_r[sensors]) f[sensors].
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

ENERGY = 0.99


def snapshot_matrix(snapshots: np.ndarray) -> np.ndarray:
  """(T, F, N, N) -> (N*N, T*F): one row per location."""
  t, f = snapshots.shape[:2]
  return snapshots.reshape(t * f, -1).T


def _rank(s, k):
  energy = np.cumsum(s**2) / np.sum(s**2)
  return int(min(k, np.searchsorted(energy, ENERGY) + 1))


def select_reference(x: np.ndarray, k: int) -> tuple:
  """(sensor indices (K,), POD modes (n, r)) with NumPy/SciPy."""
  import scipy.linalg
  u, s, _ = scipy.linalg.svd(x, full_matrices=False)
  r = _rank(s, k)
  _, _, piv = scipy.linalg.qr((u[:, :r] * s[:r]).T, mode='economic', pivoting=True)
  return piv[:k], u[:, :r]


@jax.jit
def _pod(x):
  u, s, _ = jnp.linalg.svd(x, full_matrices=False)
  return u, s


@functools.partial(jax.jit, static_argnames='k')
def _pivots(weighted_modes, k):
  return jax.scipy.linalg.qr(weighted_modes.T, mode='economic', pivoting=True)[2][:k]


def select(x, k: int) -> tuple:
  """The same with JAX: SVD and pivoted QR jitted; the rank is read on the host."""
  u, s = _pod(jnp.asarray(x))
  r = _rank(np.asarray(s), k)
  return np.asarray(_pivots(u[:, :r] * s[:r], k)), np.asarray(u[:, :r])


def reconstruct(modes: np.ndarray, sensors: np.ndarray, field: np.ndarray) -> np.ndarray:
  """Least-squares reconstruction of `field` (n,) from its values at `sensors`."""
  coef, *_ = np.linalg.lstsq(modes[sensors], field[sensors], rcond=None)
  return modes @ coef


def relative_error(modes, sensors, fields) -> float:
  """Mean relative L2 reconstruction error over the columns of `fields` (n, m)."""
  errs = [np.linalg.norm(reconstruct(modes, sensors, f) - f) / np.linalg.norm(f)
          for f in fields.T]
  return float(np.mean(errs))
