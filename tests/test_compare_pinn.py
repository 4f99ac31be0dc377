"""PINN workload: the flows are exact, QR-pivoted sensors beat random ones, and the JAX
loss and gradients equal PyTorch's."""

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('torch')

from comparisons.pinn import bench as pinn_bench, data as pinn_data  # noqa: E402
from comparisons.pinn import port as pinn_port, reference as pinn_reference  # noqa: E402


def test_kovasznay_solves_steady_navier_stokes():
  """Central differences (float64) of the exact solution: residuals at rounding level."""
  rng = np.random.default_rng(0)
  x, y = rng.uniform(-0.4, 0.9, 50), rng.uniform(-0.4, 1.4, 50)
  h, nu = 1e-4, 1 / 40
  f = lambda x, y: np.stack(pinn_data.kovasznay(x, y, 40.0))  # noqa: E731
  c = f(x, y)
  fx, fy = (f(x + h, y) - f(x - h, y)) / (2 * h), (f(x, y + h) - f(x, y - h)) / (2 * h)
  lap = (f(x + h, y) + f(x - h, y) + f(x, y + h) + f(x, y - h) - 4 * c) / h**2
  u, v = c[0], c[1]
  mom_x = u * fx[0] + v * fy[0] + fx[2] - nu * lap[0]
  mom_y = u * fx[1] + v * fy[1] + fy[2] - nu * lap[1]
  cont = fx[0] + fy[1]
  assert max(np.abs(mom_x).max(), np.abs(mom_y).max(), np.abs(cont).max()) < 1e-5


def test_vorticity_solver_decays_taylor_green_exactly():
  """omega = 2 cos x cos y is a steady Euler flow: viscosity alone decays it, as
  exp(-2 nu t), with pressure -(cos 2x + cos 2y)/4 times the decay squared."""
  n, nu, dt, every = 32, 0.05, 0.01, 10
  g = np.arange(n) * 2 * np.pi / n
  x, y = np.meshgrid(g, g, indexing='ij')
  snaps = pinn_data.vorticity_snapshots(n, count=3, nu=nu, dt=dt, every=every,
                                    initial=2 * np.cos(x) * np.cos(y))
  for i, (u, v, p) in enumerate(snaps.astype(np.float64)):
    decay = np.exp(-2 * nu * dt * every * (i + 1))
    np.testing.assert_allclose(u, -np.cos(x) * np.sin(y) * decay, atol=1e-5)
    np.testing.assert_allclose(v, np.sin(x) * np.cos(y) * decay, atol=1e-5)
    np.testing.assert_allclose(p, -(np.cos(2 * x) + np.cos(2 * y)) / 4 * decay**2, atol=1e-5)


def test_turbulence_snapshots_are_divergence_free():
  u, v, _ = pinn_data.vorticity_snapshots(32, count=1, every=5)[0].astype(np.float64)
  k = np.fft.fftfreq(32, 1 / 32)
  kx, ky = np.meshgrid(k, k, indexing='ij')
  div = np.fft.ifft2(1j * kx * np.fft.fft2(u) + 1j * ky * np.fft.fft2(v)).real
  assert np.abs(div).max() < 1e-4 * np.abs(u).max()


def test_qr_sensors_beat_random_and_jax_equals_scipy():
  result = pinn_bench.time_selection(32, quick=True)
  assert result['same_sensors']
  assert result['qr_error'] < 0.5 * result['random_error']


@pytest.mark.parametrize('derivatives', ['jvp', 'folx'])
def test_loss_and_gradients_equal_pytorch(derivatives):
  cfg = pinn_port.Config(width=32, depth=3, derivatives=derivatives)
  assert pinn_bench.agreement(cfg) < 1e-4


def test_training_lowers_the_loss():
  cfg = pinn_port.Config(width=32, depth=3, derivatives='folx')
  _, _, _, batch = pinn_bench.kovasznay_problem(16, 8)
  params = pinn_port.init_params(cfg)
  opt, step = pinn_port.make_train_step(cfg)
  state, jb = opt.init(params), pinn_port.Batch(*map(jnp.asarray, batch))
  losses = []
  for _ in range(100):
    params, state, loss = step(params, state, jb)
    losses.append(float(loss))
  assert losses[-1] < 0.2 * losses[0]


def test_sensor_reconstruction_is_exact_for_fields_in_the_pod_span():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((200, 6)) @ rng.standard_normal((6, 30))  # Rank 6.
  chosen, modes = pinn_reference.select_reference(x, 6)
  field = x @ rng.standard_normal(30)
  np.testing.assert_allclose(pinn_port.reconstruct(modes, chosen, field), field, atol=1e-8)
