"""Flow data for the PINN workload, generated (no downloads): the Kovasznay flow, an exact
steady Navier-Stokes solution, and snapshots of decaying 2-D turbulence from a small
periodic pseudo-spectral vorticity solver.
"""

from typing import NamedTuple

import numpy as np




# Kovasznay's domain as usually posed: x in [-0.5, 1], y in [-0.5, 1.5].
KOVASZNAY_BOX = ((-0.5, 1.0), (-0.5, 1.5))


def kovasznay_lambda(re: float) -> float:
  return re / 2 - np.sqrt(re**2 / 4 + 4 * np.pi**2)


def kovasznay(x, y, re: float = 40.0):
  """(u, v, p) of the Kovasznay flow at Reynolds number `re` (viscosity 1/re)."""
  lam = kovasznay_lambda(re)
  e = np.exp(lam * x)
  u = 1 - e * np.cos(2 * np.pi * y)
  v = lam / (2 * np.pi) * e * np.sin(2 * np.pi * y)
  p = 0.5 * (1 - np.exp(2 * lam * x))
  return u, v, p


class Grid(NamedTuple):
  x: np.ndarray  # (N*N,) coordinates of the grid nodes, C order over (x index, y index).
  y: np.ndarray
  n: int
  boundary: np.ndarray  # (4N - 4,) indices of the nodes on the box's edges.


def grid(n: int, box=KOVASZNAY_BOX) -> Grid:
  """N x N nodes spanning the box, edges included."""
  xs, ys = np.linspace(*box[0], n), np.linspace(*box[1], n)
  x, y = np.meshgrid(xs, ys, indexing='ij')
  i, j = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')
  edge = ((i == 0) | (i == n - 1) | (j == 0) | (j == n - 1)).ravel()
  return Grid(x.ravel().astype(np.float32), y.ravel().astype(np.float32), n, np.flatnonzero(edge))


def vorticity_snapshots(n: int, count: int = 30, nu: float = 1e-3, dt: float = 0.01,
                        every: int = 20, seed: int = 0, initial=None,
                        cfl: float = 0.5) -> np.ndarray:
  """(count, 3, n, n) snapshots (u, v, p) of decaying 2-D turbulence on [0, 2 pi)^2.

  omega_t + u . grad omega = nu lap omega, psi from lap psi = -omega, u = psi_y,
  v = -psi_x; RK4 in Fourier space with 2/3 dealiasing; p from the pressure Poisson
  equation lap p = -(u_x^2 + 2 u_y v_x + v_y^2). The initial vorticity is `initial`
  (n, n) if given, else random with wavenumbers 2-6 and rms 10. Snapshots are `every * dt`
  apart in time; the step is shortened (and the steps per snapshot raised to match)
  where the CFL number max|u| dt / dx would exceed `cfl`.
  """
  import scipy.fft as fft
  fwd = lambda a: fft.rfft2(a, workers=-1)  # noqa: E731  (real fields: half spectrum)
  inv = lambda a: fft.irfft2(a, s=(n, n), workers=-1)  # noqa: E731
  kx, ky = np.meshgrid(np.fft.fftfreq(n, 1.0 / n), np.fft.rfftfreq(n, 1.0 / n), indexing='ij')
  k2 = kx**2 + ky**2
  k2_safe = np.where(k2 == 0, 1.0, k2)
  dealias = (np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)
  rng = np.random.default_rng(seed)
  kmag = np.sqrt(k2)
  spectrum = np.where((kmag >= 2) & (kmag <= 6), 1.0, 0.0)
  if initial is None:
    w_hat = fwd(rng.standard_normal((n, n))) * spectrum
    w_hat *= 10.0 / np.sqrt(np.mean(inv(w_hat) ** 2) + 1e-30)
  else:
    w_hat = fwd(initial)

  def velocity(w_hat):
    psi_hat = w_hat / k2_safe
    psi_hat[0, 0] = 0
    return inv(1j * ky * psi_hat), inv(-1j * kx * psi_hat)

  def rhs(w_hat):
    u, v = velocity(w_hat)
    wx, wy = inv(1j * kx * w_hat), inv(1j * ky * w_hat)
    return -fwd(u * wx + v * wy) * dealias - nu * k2 * w_hat

  u0, v0 = velocity(w_hat)
  speed = float(np.max(np.sqrt(u0**2 + v0**2))) + 1e-12
  interval = every * dt
  dt = min(dt, cfl * (2 * np.pi / n) / speed)
  every = int(np.ceil(interval / dt - 1e-9))
  dt = interval / every
  out = []
  for _ in range(count):
    for _ in range(every):
      a = rhs(w_hat)
      b = rhs(w_hat + 0.5 * dt * a)
      c = rhs(w_hat + 0.5 * dt * b)
      d = rhs(w_hat + dt * c)
      w_hat = w_hat + dt / 6 * (a + 2 * b + 2 * c + d)
    u, v = velocity(w_hat)
    u_hat, v_hat = fwd(u), fwd(v)
    ux, uy = inv(1j * kx * u_hat), inv(1j * ky * u_hat)
    vx, vy = inv(1j * kx * v_hat), inv(1j * ky * v_hat)
    p_hat = fwd(ux**2 + 2 * uy * vx + vy**2) / k2_safe  # lap p = -src -> p = src/k^2
    p_hat[0, 0] = 0
    out.append(np.stack([u, v, inv(p_hat)]))
  return np.asarray(out, np.float32)
