"""GaussGAN's validation metrics, in JAX and as the original computes them (SciPy,
scikit-learn, PyTorch), on P = the generated points (500) and Y = the reference set
(20,000 points of the true mixture).

- IsPositive: mean of +1 (x0 >= 0) / -1.
- LogLikelihood: mean log q(x) under the true mixture (sklearn GaussianMixture
  score_samples with the true weights, means and identity covariances).
- KLDivergence: mean over P of log q(x) - log p_hat(x), p_hat a Gaussian KDE of P (Scott's
  bandwidth n^(-1/6), covariance of P) evaluated in-sample.
- WassersteinDistance: 1-D Wasserstein-1 between P and Y per coordinate, averaged.
- MMDDistance: sqrt(max(0, mean K_PP + mean K_YY - 2 mean K_PY)), K = exp(-|x - y|^2)
  (biased, gamma = 1).
- MMDivergence: unbiased MMD^2 (diagonals left out) with K = exp(-d^2 / (2 bw)) for bw =
  median pairwise distance of Y x [0.1, 0.5, 1, 2, 5], averaged over bw, then sqrt
  (of max(0, .), where the original would give NaN for a negative average).

The terms that depend on Y alone (mean K_YY for both MMDs and the median distance) are
constants of the reference set: `reference_terms` computes them once, in blocks (the
20,000 x 20,000 kernel is never held whole), and `metrics` reuses them. The original
recomputes them at every validation; `reference_metrics` does the same, as it did.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.compare import gaussgan

BANDWIDTH_FACTORS = (0.1, 0.5, 1.0, 2.0, 5.0)
NAMES = ('IsPositive', 'LogLikelihood', 'KLDivergence', 'WassersteinDistance', 'MMDDistance',
         'MMDivergence')


def log_q(x):
  """log density of the true mixture at x (n, 2)."""
  means = jnp.asarray(gaussgan.MEANS, x.dtype)
  sq = jnp.sum((x[:, None, :] - means[None]) ** 2, axis=-1)
  return jax.scipy.special.logsumexp(-0.5 * sq, axis=1) + jnp.log(0.5) - jnp.log(2 * jnp.pi)


def kde_log_density(points):
  """log of SciPy's gaussian_kde(points) (Scott's factor) at the points themselves."""
  n, d = points.shape
  factor = n ** (-1.0 / (d + 4))
  cov = jnp.cov(points.T) * factor**2
  chol = jnp.linalg.cholesky(cov)
  diff = points[:, None, :] - points[None, :, :]
  sol = jax.scipy.linalg.solve_triangular(chol, diff.reshape(-1, d).T, lower=True)
  maha = jnp.sum(sol**2, axis=0).reshape(n, n)
  log_norm = -0.5 * d * jnp.log(2 * jnp.pi) - jnp.sum(jnp.log(jnp.diag(chol)))
  return jax.scipy.special.logsumexp(-0.5 * maha, axis=1) - jnp.log(n) + log_norm


def wasserstein_1d(u, v):
  """Wasserstein-1 between the empirical distributions of 1-D samples u and v."""
  u, v = jnp.sort(u), jnp.sort(v)
  values = jnp.sort(jnp.concatenate([u, v]))
  deltas = jnp.diff(values)
  cdf_u = jnp.searchsorted(u, values[:-1], side='right') / u.shape[0]
  cdf_v = jnp.searchsorted(v, values[:-1], side='right') / v.shape[0]
  return jnp.sum(jnp.abs(cdf_u - cdf_v) * deltas)


def sq_dists(a, b):
  return jnp.maximum(jnp.sum(a**2, 1)[:, None] + jnp.sum(b**2, 1)[None] - 2 * a @ b.T, 0.0)


class ReferenceTerms(NamedTuple):
  """Constants of the reference set Y."""
  mean_k_yy: jax.Array  # mean exp(-|y - y'|^2) over all pairs (biased MMD).
  offdiag_k_yy: jax.Array  # (5,) mean of exp(-d^2 / (2 bw)) over pairs i != j, per bw.
  bandwidths: jax.Array  # (5,) median pairwise distance x BANDWIDTH_FACTORS.


def median_pairwise_distance(y: np.ndarray) -> float:
  """Median of the n(n-1)/2 distinct pairwise distances (as scipy's pdist then median)."""
  from scipy.spatial.distance import pdist
  return float(np.median(pdist(y.astype(np.float64))))


@functools.partial(jax.jit, static_argnames='block')
def _kernel_sums(y, bandwidths, block: int = 1000):
  """(sum exp(-d^2) over all pairs, per-bw sums of exp(-d^2/(2 bw)) over pairs i != j)."""
  n = y.shape[0]
  pad = (-n) % block
  yp = jnp.concatenate([y, jnp.zeros((pad, y.shape[1]), y.dtype)])
  valid = jnp.arange(n + pad) < n

  def rows(args):
    yb, vb = args
    d2 = sq_dists(yb, y)
    mask = vb[:, None]
    k1 = jnp.sum(jnp.where(mask, jnp.exp(-d2), 0.0))
    k2 = jnp.stack([jnp.sum(jnp.where(mask, jnp.exp(-d2 / (2 * bw)), 0.0)) for bw in bandwidths])
    return k1, k2

  k1, k2 = jax.lax.map(rows, (yp.reshape(-1, block, y.shape[1]), valid.reshape(-1, block)))
  return jnp.sum(k1), jnp.sum(k2, axis=0) - n  # The diagonal of each kernel is exactly 1.


def reference_terms(y: np.ndarray) -> ReferenceTerms:
  med = median_pairwise_distance(y)
  bws = jnp.asarray([f * med for f in BANDWIDTH_FACTORS], jnp.float32)
  yj = jnp.asarray(y, jnp.float32)
  total, offdiag = _kernel_sums(yj, tuple(float(b) for b in bws))
  n = y.shape[0]
  return ReferenceTerms(total / n**2, offdiag / (n * (n - 1)), bws)


@jax.jit
def metrics(p, y, ref: ReferenceTerms) -> dict:
  """All six metrics of generated points p (m, 2) against y (n, 2), JAX."""
  m = p.shape[0]
  lq = log_q(p)
  out = {'IsPositive': jnp.mean(jnp.where(p[:, 0] >= 0, 1.0, -1.0)),
         'LogLikelihood': jnp.mean(lq),
         'KLDivergence': jnp.mean(lq - kde_log_density(p)),
         'WassersteinDistance': 0.5 * (wasserstein_1d(p[:, 0], y[:, 0]) +
                                       wasserstein_1d(p[:, 1], y[:, 1]))}
  d2_pp, d2_py = sq_dists(p, p), sq_dists(p, y)
  mmd2 = jnp.mean(jnp.exp(-d2_pp)) + ref.mean_k_yy - 2 * jnp.mean(jnp.exp(-d2_py))
  out['MMDDistance'] = jnp.sqrt(jnp.maximum(mmd2, 0.0))
  off = 1.0 - jnp.eye(m)
  divs = []
  for i in range(len(BANDWIDTH_FACTORS)):
    bw = ref.bandwidths[i]
    k_pp = jnp.sum(jnp.exp(-d2_pp / (2 * bw)) * off) / (m * (m - 1))
    k_py = jnp.mean(jnp.exp(-d2_py / (2 * bw)))
    divs.append(k_pp + ref.offdiag_k_yy[i] - 2 * k_py)
  out['MMDivergence'] = jnp.sqrt(jnp.maximum(jnp.mean(jnp.stack(divs)), 0.0))
  return out


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
  gmm.means_ = gaussgan.MEANS.astype(np.float64)
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
  for f in BANDWIDTH_FACTORS:
    bw = f * med
    k_pp = torch.exp(-d_pp / (2 * bw))
    k_yy = torch.exp(-d_yy / (2 * bw))
    divs.append(float((k_pp.sum() - k_pp.diagonal().sum()) / (m * (m - 1)) +
                      (k_yy.sum() - k_yy.diagonal().sum()) / (n * (n - 1)) -
                      2 * torch.exp(-d_py / (2 * bw)).mean()))
  out['MMDivergence'] = float(np.sqrt(max(np.mean(divs), 0.0)))
  return out
