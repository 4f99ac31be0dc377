"""PINN reconstruction of a steady 2-D flow from sparse sensors, in JAX (the PyTorch
reference is in reference.py).

Model (the report's PINNNet family): random Fourier features [cos 2 pi xB, sin 2 pi xB]
(B ~ N(0, sigma^2), 2 x m), an MLP of `depth` tanh layers of `width`, and a linear
output (Xavier, gain 0.1) giving (u, v, p). Loss:

  w_data * (MSE_u + MSE_v + MSE_p at the K sensors)
  + mean(mom_x^2) + mean(mom_y^2) + mean(cont^2) at collocation points
  + w_bc * mean((u - u_b)^2 + (v - v_b)^2) at boundary points,

mom_x = u u_x + v u_y + p_x - nu lap u, mom_y = u v_x + v v_y + p_y - nu lap v,
cont = u_x + v_y. Derivatives in forward mode for one point (nested jvp, or folx's
forward Laplacian), vmapped over points; the parameter gradient by reverse mode over
that. Adam, lr 1e-3.

Sensors: sparse sensors by QR pivoting on POD modes (QDEIM), in JAX.

The snapshot matrix X has one row per grid location and one column per (snapshot,
field); its leading left singular vectors are the POD modes Psi_r (locations x r), with
r the number of modes holding 99% of the energy, capped at K. Column-pivoted QR of
Psi_r^T (modes weighted by their singular values, as the report's PODBasedSelector does)
orders the locations; the first K are the sensors. A field f is then reconstructed from
its K sensor values by least squares in the POD basis: f ~ Psi_r pinv(Psi_r[sensors]) f[sensors].
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax




class Config(NamedTuple):
  width: int = 256
  depth: int = 5
  features: int = 32  # m: Fourier features per sin/cos.
  sigma: float = 1.0  # Std of the Fourier frequencies (per unit length).
  nu: float = 1.0 / 40  # Kinematic viscosity (Kovasznay at Re = 40).
  w_data: float = 10.0
  w_bc: float = 10.0
  lr: float = 1e-3
  # How the derivatives are taken: 'jvp' (nested forward-mode jvp along each axis, the
  # jacfwd-of-grad family) or 'folx' (forward Laplacian: value, Jacobian and Laplacian in
  # one forward pass; needs folx). Both exact.
  derivatives: str = 'jvp'


def init_params(cfg: Config, seed: int = 0) -> dict:
  """PyTorch's initialisation (Linear: U(+-1/sqrt(fan_in)); output Xavier, gain 0.1)."""
  rng = np.random.default_rng(seed)
  params = {'B': (cfg.sigma * rng.standard_normal((2, cfg.features))).astype(np.float32),
            'hidden': []}
  n_in = 2 * cfg.features
  for _ in range(cfg.depth):
    bound = 1 / np.sqrt(n_in)
    params['hidden'].append({
        'weight': rng.uniform(-bound, bound, (cfg.width, n_in)).astype(np.float32),
        'bias': rng.uniform(-bound, bound, cfg.width).astype(np.float32)})
    n_in = cfg.width
  bound = 0.1 * np.sqrt(6 / (n_in + 3))
  params['out'] = {'weight': rng.uniform(-bound, bound, (3, n_in)).astype(np.float32),
                   'bias': np.zeros(3, np.float32)}
  return jax.tree.map(jnp.asarray, params)


def network(params, xy):
  """(u, v, p) at one point xy (2,)."""
  proj = 2 * jnp.pi * xy @ params['B']
  h = jnp.concatenate([jnp.cos(proj), jnp.sin(proj)])
  for layer in params['hidden']:
    h = jnp.tanh(layer['weight'] @ h + layer['bias'])
  return params['out']['weight'] @ h + params['out']['bias']


def _derivatives_jvp(params, xy):
  """(value (3,), Jacobian (axis, field), Laplacian (3,)) at one point. Along each axis
  e, a jvp of a jvp gives the first derivative and e^T H e (the primal shared between the
  axes): the Laplacian's two terms without the Hessian's unused cross terms."""

  def along(e):
    first = lambda z: jax.jvp(lambda w: network(params, w), (z,), (e,))  # noqa: E731
    (out, d1), (_, d2) = jax.jvp(first, (xy,), (e,))
    return out, d1, d2

  out, d1, d2 = jax.vmap(along)(jnp.eye(2, dtype=xy.dtype))  # d1, d2: (axis, field)
  return out[0], d1, jnp.sum(d2, axis=0)


def _derivatives_folx(params, xy):
  """The same from folx's forward Laplacian (one pass carrying value, Jacobian, Laplacian)."""
  import folx
  r = folx.forward_laplacian(lambda w: network(params, w), sparsity_threshold=0)(xy)
  return r.x, r.jacobian.dense_array, r.laplacian


DERIVATIVES = {'jvp': _derivatives_jvp, 'folx': _derivatives_folx}


def residuals(params, xy, nu, derivatives: str = 'jvp'):
  """(mom_x, mom_y, cont) of the steady Navier-Stokes equations at one point."""
  out, jac, lap = DERIVATIVES[derivatives](params, xy)
  u, v = out[0], out[1]
  mom_x = u * jac[0, 0] + v * jac[1, 0] + jac[0, 2] - nu * lap[0]
  mom_y = u * jac[0, 1] + v * jac[1, 1] + jac[1, 2] - nu * lap[1]
  return jnp.stack([mom_x, mom_y, jac[0, 0] + jac[1, 1]])


class Batch(NamedTuple):
  colloc: jax.Array  # (Nc, 2) collocation points.
  boundary: jax.Array  # (Nb, 2) boundary points.
  boundary_uv: jax.Array  # (Nb, 2) prescribed (u, v) there.
  sensors: jax.Array  # (K, 2) sensor positions.
  sensor_uvp: jax.Array  # (K, 3) measured (u, v, p).


def loss_fn(params, batch: Batch, cfg: Config):
  apply = jax.vmap(network, in_axes=(None, 0))
  res = jax.vmap(residuals, in_axes=(None, 0, None, None))(params, batch.colloc, cfg.nu,
                                                          cfg.derivatives)
  data = jnp.sum(jnp.mean((apply(params, batch.sensors) - batch.sensor_uvp) ** 2, axis=0))
  bc = jnp.mean(jnp.sum((apply(params, batch.boundary)[:, :2] - batch.boundary_uv) ** 2, axis=1))
  pde = jnp.sum(jnp.mean(res**2, axis=0))
  return cfg.w_data * data + pde + cfg.w_bc * bc


def make_train_step(cfg: Config):
  opt = optax.adam(cfg.lr)

  @jax.jit
  def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, cfg)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return opt, step


def predict(params, xy):
  return jax.jit(jax.vmap(network, in_axes=(None, 0)))(params, xy)


def relative_l2(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
  """Per field (columns): |pred - ref|_2 / (|ref|_2 + 1e-12)."""
  return np.linalg.norm(pred - ref, axis=0) / (np.linalg.norm(ref, axis=0) + 1e-12)


ENERGY = 0.99


def snapshot_matrix(snapshots: np.ndarray) -> np.ndarray:
  """(T, F, N, N) -> (N*N, T*F): one row per location."""
  t, f = snapshots.shape[:2]
  return snapshots.reshape(t * f, -1).T


def pod_rank(s, k):
  energy = np.cumsum(s**2) / np.sum(s**2)
  return int(min(k, np.searchsorted(energy, ENERGY) + 1))


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
  r = pod_rank(np.asarray(s), k)
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
