"""The PyTorch reference for the PINN: the same network, loss and points, with the
derivatives taken the usual PyTorch way (autograd.grad with create_graph, twice for the
Laplacian), eager mode.
Also the sensor selection with NumPy/SciPy.
"""

import numpy as np

from comparisons.measure import torch_fp32
from comparisons.pinn import port


class PinnTorch:

  def __init__(self, params: dict, cfg: port.Config):
    torch = torch_fp32()
    self.torch, self.cfg = torch, cfg
    t = lambda a: torch.tensor(np.asarray(a), requires_grad=True)  # noqa: E731
    self.B = torch.tensor(np.asarray(params['B']))
    self.hidden = [(t(p['weight']), t(p['bias'])) for p in params['hidden']]
    self.out = (t(params['out']['weight']), t(params['out']['bias']))
    self.parameters = [w for pair in self.hidden for w in pair] + list(self.out)
    self.opt = torch.optim.Adam(self.parameters, lr=cfg.lr)

  def network(self, xy):
    torch = self.torch
    proj = 2 * np.pi * xy @ self.B
    h = torch.cat([torch.cos(proj), torch.sin(proj)], dim=1)
    for w, b in self.hidden:
      h = torch.tanh(h @ w.T + b)
    return h @ self.out[0].T + self.out[1]

  def residuals(self, xy):
    torch = self.torch
    xy = xy.clone().requires_grad_(True)
    out = self.network(xy)
    grad = lambda f: torch.autograd.grad(f, xy, torch.ones_like(f), create_graph=True)[0]  # noqa: E731
    u, v = out[:, 0], out[:, 1]
    du, dv, dp = grad(u), grad(v), grad(out[:, 2])
    u_xx, u_yy = grad(du[:, 0])[:, 0], grad(du[:, 1])[:, 1]
    v_xx, v_yy = grad(dv[:, 0])[:, 0], grad(dv[:, 1])[:, 1]
    nu = self.cfg.nu
    mom_x = u * du[:, 0] + v * du[:, 1] + dp[:, 0] - nu * (u_xx + u_yy)
    mom_y = u * dv[:, 0] + v * dv[:, 1] + dp[:, 1] - nu * (v_xx + v_yy)
    return torch.stack([mom_x, mom_y, du[:, 0] + dv[:, 1]], dim=1)

  def loss(self, batch):
    res = self.residuals(batch.colloc)
    data = ((self.network(batch.sensors) - batch.sensor_uvp) ** 2).mean(0).sum()
    bc = ((self.network(batch.boundary)[:, :2] - batch.boundary_uv) ** 2).sum(1).mean()
    return self.cfg.w_data * data + (res**2).mean(0).sum() + self.cfg.w_bc * bc

  def step(self, batch) -> float:
    loss = self.loss(batch)
    self.opt.zero_grad()
    loss.backward()
    self.opt.step()
    return float(loss.detach())

  def gradients(self, batch) -> list:
    loss = self.loss(batch)
    grads = self.torch.autograd.grad(loss, self.parameters)
    return [g.numpy() for g in grads], float(loss.detach())

  def batch(self, b: port.Batch) -> port.Batch:
    return port.Batch(*(self.torch.from_numpy(np.asarray(a, np.float32)) for a in b))


def select_reference(x: np.ndarray, k: int) -> tuple:
  """(sensor indices (K,), POD modes (n, r)) with NumPy/SciPy."""
  import scipy.linalg
  u, s, _ = scipy.linalg.svd(x, full_matrices=False)
  r = port.pod_rank(s, k)
  _, _, piv = scipy.linalg.qr((u[:, :r] * s[:r]).T, mode='economic', pivoting=True)
  return piv[:k], u[:, :r]
