"""The PyTorch reference for GaussGAN: the original's modules and manual-optimisation
training step (eager mode; the Lightning, MLflow and plotting layers are left out, so
the reference is, if anything, faster than the original).

`GaussGanTorch.load(params, bn)` takes the JAX port's parameters, so a step of both on the
same `Noise` can be compared number for number.

Also here: the validation metrics computed the original's way (SciPy,
scikit-learn, PyTorch) and the quantum circuit one sample at a time in NumPy.
"""

import numpy as np

from comparisons.gaussgan import data, port
from comparisons.measure import torch_fp32


class GaussGanTorch:
  """Generator, critic and (killer mode) predictor with their Adam optimisers."""

  def __init__(self, killer: bool = False):
    torch = self.torch = torch_fp32()
    nn = torch.nn
    act = lambda: nn.LeakyReLU(port.LEAK)  # noqa: E731
    self.g_body = nn.Sequential(
        nn.Linear(port.Z_DIM, port.HIDDEN), nn.BatchNorm1d(port.HIDDEN, momentum=port.BN_MOMENTUM),
        act(), nn.Linear(port.HIDDEN, port.HIDDEN),
        nn.BatchNorm1d(port.HIDDEN, momentum=port.BN_MOMENTUM), act())
    self.g_mean = nn.Linear(port.HIDDEN, 2)
    self.g_logvar = nn.Linear(port.HIDDEN, 2)
    self.d = nn.Sequential(nn.Linear(2, port.CRITIC_HIDDEN), act(),
                           nn.Linear(port.CRITIC_HIDDEN, port.CRITIC_HIDDEN), act(),
                           nn.Linear(port.CRITIC_HIDDEN, 1))
    self.v = nn.Sequential(nn.Linear(2, port.PREDICTOR_HIDDEN), act(),
                           nn.Linear(port.PREDICTOR_HIDDEN, port.PREDICTOR_HIDDEN), act(),
                           nn.Linear(port.PREDICTOR_HIDDEN, 1), nn.Sigmoid()) if killer else None
    g_params = [*self.g_body.parameters(), *self.g_mean.parameters(),
                *self.g_logvar.parameters()]
    self.opt_g = torch.optim.Adam(g_params, lr=1e-3, betas=(0.5, 0.9))
    self.opt_d = torch.optim.Adam(self.d.parameters(), lr=1e-3, betas=(0.5, 0.9))
    self.opt_v = torch.optim.Adam(self.v.parameters(), lr=1e-3) if killer else None

  def load(self, params, bn) -> 'GaussGanTorch':
    """Copies the JAX port's parameters and BatchNorm running statistics."""
    torch = self.torch
    t = lambda a: torch.from_numpy(np.array(a, np.float32))  # noqa: E731
    g, body = params['G'], self.g_body
    with torch.no_grad():
      for module, p in ((body[0], g['l1']), (body[1], g['bn1']), (body[3], g['l2']),
                        (body[4], g['bn2']), (self.g_mean, g['mean']),
                        (self.g_logvar, g['logvar']), (self.d[0], params['D']['l1']),
                        (self.d[2], params['D']['l2']), (self.d[4], params['D']['l3'])):
        module.weight.copy_(t(p['weight']))
        module.bias.copy_(t(p['bias']))
      for module, s in ((body[1], bn['bn1']), (body[4], bn['bn2'])):
        module.running_mean.copy_(t(s['mean']))
        module.running_var.copy_(t(s['var']))
      if self.v is not None:
        for module, p in ((self.v[0], params['V']['l1']), (self.v[2], params['V']['l2']),
                          (self.v[4], params['V']['l3'])):
          module.weight.copy_(t(p['weight']))
          module.bias.copy_(t(p['bias']))
    return self

  def generate(self, z, eps):
    h = self.g_body(z)
    std = self.torch.clamp(self.torch.exp(0.5 * self.g_logvar(h)) * port.STD_SCALE,
                           min=port.MIN_STD)
    return self.g_mean(h) + eps * std

  def train_step(self, real, noise) -> tuple:
    """One step on `noise` (a port.Noise of tensors); returns (critic loss, generator loss)."""
    torch = self.torch
    self.g_body.train()
    for i in range(port.N_CRITIC):
      with torch.no_grad():
        fake = self.generate(noise.z_critic[i], noise.eps_critic[i])
      x_hat = (noise.gp[i] * real + (1 - noise.gp[i]) * fake).requires_grad_(True)
      d_hat = self.d(x_hat)
      grads = torch.autograd.grad(d_hat, x_hat, torch.ones_like(d_hat), create_graph=True)[0]
      penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
      d_loss = self.d(fake).mean() - self.d(real).mean() + port.GP_LAMBDA * penalty
      self.opt_d.zero_grad()
      d_loss.backward()
      self.opt_d.step()
    if self.v is not None:
      labels = (real[:, 0] > 0).float()
      for _ in range(port.N_PREDICTOR):
        v_loss = torch.nn.functional.binary_cross_entropy(self.v(real)[:, 0], labels)
        self.opt_v.zero_grad()
        v_loss.backward()
        self.opt_v.step()
    x = self.generate(noise.z_gen, noise.eps_gen)
    g_loss = -self.d(x).mean()
    if self.v is not None:
      p = self.v(x)[:, 0]
      neg = x[:, 0] < 0
      if neg.any():
        pos_mean = p[~neg].mean() if (~neg).any() else p.sum() * 0
        rl = -5 * port.RL_WEIGHT * p[neg].mean() - port.RL_WEIGHT * pos_mean
      else:
        rl = -port.RL_WEIGHT * p.mean()
      g_loss = g_loss + rl
    self.opt_g.zero_grad()
    g_loss.backward()
    self.opt_g.step()
    return float(d_loss.detach()), float(g_loss.detach())

  def epoch(self, data, generator, batch: int = 256) -> None:
    """One shuffled pass over `data` (a tensor), noise from the torch `generator`."""
    torch = self.torch
    order = torch.randperm(data.shape[0], generator=generator)
    for start in range(0, data.shape[0], batch):
      real = data[order[start:start + batch]]
      b = real.shape[0]
      noise = port.Noise(torch.randn(port.N_CRITIC, b, port.Z_DIM, generator=generator),
                         torch.randn(port.N_CRITIC, b, 2, generator=generator),
                         torch.rand(port.N_CRITIC, b, 1, generator=generator),
                         torch.randn(b, port.Z_DIM, generator=generator),
                         torch.randn(b, 2, generator=generator))
      self.train_step(real, noise)

  def sample(self, n: int, generator):
    self.g_body.eval()
    with self.torch.no_grad():
      x = self.generate(self.torch.randn(n, port.Z_DIM, generator=generator),
                        self.torch.randn(n, 2, generator=generator))
    self.g_body.train()
    return x.numpy()

  def params(self) -> dict:
    """The critic's and generator's weights as numpy, in the JAX layout (for comparisons)."""
    b = self.g_body
    grab = lambda m: {'weight': m.weight.detach().numpy(), 'bias': m.bias.detach().numpy()}  # noqa: E731
    return {'G': {'l1': grab(b[0]), 'bn1': grab(b[1]), 'l2': grab(b[3]), 'bn2': grab(b[4]),
                  'mean': grab(self.g_mean), 'logvar': grab(self.g_logvar)},
            'D': {'l1': grab(self.d[0]), 'l2': grab(self.d[2]), 'l3': grab(self.d[4])}}


def reference_metrics(p: np.ndarray, y: np.ndarray) -> dict:
  """The same six metrics the original's way: SciPy, scikit-learn and PyTorch, with every
  reference-set term recomputed (as its metric objects were re-created every epoch)."""
  import scipy.stats
  from scipy.spatial.distance import pdist
  from sklearn.mixture import GaussianMixture
  import torch

  p = p[np.all(np.isfinite(p), axis=1)]
  gmm = GaussianMixture(2, covariance_type='full')
  gmm.weights_ = np.array([0.5, 0.5])
  gmm.means_ = data.MEANS.astype(np.float64)
  gmm.covariances_ = np.stack([np.eye(2)] * 2)
  gmm.precisions_cholesky_ = np.stack([np.eye(2)] * 2)
  lq = gmm.score_samples(p)
  kde = scipy.stats.gaussian_kde(p.T)
  out = {'IsPositive': float(np.mean(np.where(p[:, 0] >= 0, 1.0, -1.0))),
         'LogLikelihood': float(np.mean(lq)),
         'KLDivergence': float(np.mean(lq - np.log(kde(p.T)))),
         'WassersteinDistance': float(np.mean([scipy.stats.wasserstein_distance(p[:, i], y[:, i])
                                               for i in range(2)]))}
  tp, ty = torch.from_numpy(p.astype(np.float32)), torch.from_numpy(y.astype(np.float32))
  k = lambda a, b: torch.exp(-torch.cdist(a, b) ** 2)  # noqa: E731
  mmd2 = k(tp, tp).mean() + k(ty, ty).mean() - 2 * k(tp, ty).mean()
  out['MMDDistance'] = float(torch.sqrt(torch.clamp(mmd2, min=0)))
  med = np.median(pdist(y))
  m, n = len(p), len(y)
  d_pp, d_yy, d_py = (torch.cdist(a, b) ** 2 for a, b in ((tp, tp), (ty, ty), (tp, ty)))
  divs = []
  for f in port.BANDWIDTH_FACTORS:
    bw = f * med
    k_pp = torch.exp(-d_pp / (2 * bw))
    k_yy = torch.exp(-d_yy / (2 * bw))
    divs.append(float((k_pp.sum() - k_pp.diagonal().sum()) / (m * (m - 1)) +
                      (k_yy.sum() - k_yy.diagonal().sum()) / (n * (n - 1)) -
                      2 * torch.exp(-d_py / (2 * bw)).mean()))
  out['MMDivergence'] = float(np.sqrt(max(np.mean(divs), 0.0)))
  return out


def expectations_loop(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
  """The reference: one sample at a time, NumPy, complex128."""
  return np.stack([port.circuit(np, zi[0], zi[1], weights, np.complex128) for zi in z])
