"""GaussGAN in JAX: WGAN-GP on a 2-D two-Gaussian mixture, with the optional "killer"
predictor, as in the GaussGAN report (reference.py holds the PyTorch reference).

- Data: N((-5, 5), I) and N((5, 5), I), 10,000 points each (20,000 reference points);
  80/10/10 split, 16,000 training points, batch 256 (62 full batches and one of 128).
- Generator: z (4) -> [Linear 256 -> BatchNorm (training mode) -> LeakyReLU(0.01)] x 2 ->
  mean and log-variance heads; x = mean + eps * max(1.1 exp(logvar / 2), 0.5).
  Critic 2 -> 256 -> 256 -> 1; predictor 2 -> 128 -> 128 -> 1, sigmoid.
- One training step is one jitted function: n_critic = 5 critic updates (`lax.scan`, a
  fresh fake batch each, gradient penalty lambda = 0.2 on per-sample interpolates), in
  killer mode 5 predictor updates (BCE on x0 > 0), then one generator update (plus the
  killer RL term, weight 100, x5 on negative samples). Adam lr 1e-3, betas (0.5, 0.9) for
  G and D, default betas for the predictor. A whole epoch is one `lax.scan` of steps.

Parameters are plain dicts with PyTorch's layout (weight (out, in), bias (out,)), so a
PyTorch model's state converts one to one and the two can be checked step for step.
All random numbers of a step come in as `Noise`, drawn from a key by `sample_noise`.

Also here: the validation metrics in JAX (IsPositive, LogLikelihood, KLDivergence,
WassersteinDistance, MMDDistance, MMDivergence; the reference-set terms computed
once) and the 6-qubit quantum noise circuit as a batched state-vector simulation.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from comparisons.gaussgan import data


Z_DIM, HIDDEN, CRITIC_HIDDEN, PREDICTOR_HIDDEN = 4, 256, 256, 128


N_CRITIC, N_PREDICTOR, GP_LAMBDA, RL_WEIGHT = 5, 5, 0.2, 100.0


BN_MOMENTUM, BN_EPS, LEAK = 0.1, 1e-5, 0.01


STD_SCALE, MIN_STD = 1.1, 0.5


def leaky(x):
  return jnp.where(x >= 0, x, LEAK * x)


def dense(p, x):
  return x @ p['weight'].T + p['bias']


def init_linear(rng: np.random.Generator, n_in: int, n_out: int) -> dict:
  """PyTorch's default Linear initialisation, U(-1/sqrt(n_in), 1/sqrt(n_in))."""
  bound = 1.0 / np.sqrt(n_in)
  return {'weight': rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
          'bias': rng.uniform(-bound, bound, (n_out,)).astype(np.float32)}


def init_params(seed: int = 0, killer: bool = False) -> dict:
  """{'G', 'D', ('V')} parameters and the generator's BatchNorm running statistics."""
  rng = np.random.default_rng(seed)
  g = {'l1': init_linear(rng, Z_DIM, HIDDEN), 'l2': init_linear(rng, HIDDEN, HIDDEN),
       'bn1': {'weight': np.ones(HIDDEN, np.float32), 'bias': np.zeros(HIDDEN, np.float32)},
       'bn2': {'weight': np.ones(HIDDEN, np.float32), 'bias': np.zeros(HIDDEN, np.float32)},
       'mean': init_linear(rng, HIDDEN, 2), 'logvar': init_linear(rng, HIDDEN, 2)}
  # The log-variance head: Xavier-uniform with gain 2, bias 0.5.
  bound = 2.0 * np.sqrt(6.0 / (HIDDEN + 2))
  g['logvar'] = {'weight': rng.uniform(-bound, bound, (2, HIDDEN)).astype(np.float32),
                 'bias': np.full(2, 0.5, np.float32)}
  d = {'l1': init_linear(rng, 2, CRITIC_HIDDEN), 'l2': init_linear(rng, CRITIC_HIDDEN, CRITIC_HIDDEN),
       'l3': init_linear(rng, CRITIC_HIDDEN, 1)}
  params = {'G': g, 'D': d}
  if killer:
    params['V'] = {'l1': init_linear(rng, 2, PREDICTOR_HIDDEN),
                   'l2': init_linear(rng, PREDICTOR_HIDDEN, PREDICTOR_HIDDEN),
                   'l3': init_linear(rng, PREDICTOR_HIDDEN, 1)}
  bn = {k: {'mean': np.zeros(HIDDEN, np.float32), 'var': np.ones(HIDDEN, np.float32)}
        for k in ('bn1', 'bn2')}
  return jax.tree.map(jnp.asarray, params), jax.tree.map(jnp.asarray, bn)


def batch_norm_train(p, stats, x):
  """BatchNorm1d in training mode: batch statistics; running ones updated (unbiased var)."""
  mean, var = jnp.mean(x, 0), jnp.var(x, 0)
  n = x.shape[0]
  new = {'mean': (1 - BN_MOMENTUM) * stats['mean'] + BN_MOMENTUM * mean,
         'var': (1 - BN_MOMENTUM) * stats['var'] + BN_MOMENTUM * var * n / (n - 1)}
  return (x - mean) / jnp.sqrt(var + BN_EPS) * p['weight'] + p['bias'], new


def batch_norm_eval(p, stats, x):
  return (x - stats['mean']) / jnp.sqrt(stats['var'] + BN_EPS) * p['weight'] + p['bias']


def generate(g, bn, z, eps, train: bool = True):
  """(x (B, 2), new BatchNorm stats): the stochastic generator."""
  h, new = z, {}
  for layer, norm in (('l1', 'bn1'), ('l2', 'bn2')):
    h = dense(g[layer], h)
    if train:
      h, new[norm] = batch_norm_train(g[norm], bn[norm], h)
    else:
      h, new[norm] = batch_norm_eval(g[norm], bn[norm], h), bn[norm]
    h = leaky(h)
  mean, logvar = dense(g['mean'], h), dense(g['logvar'], h)
  std = jnp.maximum(jnp.exp(0.5 * logvar) * STD_SCALE, MIN_STD)
  return mean + eps * std, new


def critic(d, x):
  return dense(d['l3'], leaky(dense(d['l2'], leaky(dense(d['l1'], x)))))[:, 0]


def predictor_logits(v, x):
  return dense(v['l3'], leaky(dense(v['l2'], leaky(dense(v['l1'], x)))))[:, 0]


class Noise(NamedTuple):
  """Every random number of one training step."""
  z_critic: Any  # (N_CRITIC, B, Z_DIM) latent draws for the critic's fake batches.
  eps_critic: Any  # (N_CRITIC, B, 2) output-head noise for them.
  gp: Any  # (N_CRITIC, B, 1) interpolation weights in [0, 1).
  z_gen: Any  # (B, Z_DIM)
  eps_gen: Any  # (B, 2)


def sample_noise(key, batch: int, latent: str = 'normal') -> Noise:
  k = jax.random.split(key, 5)
  draw = (jax.random.normal if latent == 'normal' else
          lambda k, s: jax.random.uniform(k, s, minval=-1.0, maxval=1.0))
  return Noise(draw(k[0], (N_CRITIC, batch, Z_DIM)),
               jax.random.normal(k[1], (N_CRITIC, batch, 2)),
               jax.random.uniform(k[2], (N_CRITIC, batch, 1)),
               draw(k[3], (batch, Z_DIM)), jax.random.normal(k[4], (batch, 2)))


class State(NamedTuple):
  params: dict
  bn: dict
  opt: dict


def optimizers() -> dict:
  return {'G': optax.adam(1e-3, b1=0.5, b2=0.9), 'D': optax.adam(1e-3, b1=0.5, b2=0.9),
          'V': optax.adam(1e-3)}


def init_state(params, bn) -> State:
  opts = optimizers()
  return State(params, bn, {k: opts[k].init(params[k]) for k in params})


def critic_loss(d, real, fake, gp_eps):
  """mean D(fake) - mean D(real) + lambda mean((|grad_x D(x_hat)| - 1)^2)."""
  x_hat = gp_eps * real + (1.0 - gp_eps) * fake
  grads = jax.grad(lambda x: jnp.sum(critic(d, x)))(x_hat)
  penalty = jnp.mean((jnp.sqrt(jnp.sum(grads**2, axis=1)) - 1.0) ** 2)
  return jnp.mean(critic(d, fake)) - jnp.mean(critic(d, real)) + GP_LAMBDA * penalty


def _masked_mean(x, mask):
  return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def generator_loss(g, bn, d, v, z, eps):
  x, new_bn = generate(g, bn, z, eps)
  loss = -jnp.mean(critic(d, x))
  if v is not None:  # Killer mode: reward the samples the predictor calls positive.
    p = jax.nn.sigmoid(predictor_logits(v, x))
    neg = x[:, 0] < 0
    rl = jnp.where(jnp.any(neg),
                   -5.0 * RL_WEIGHT * _masked_mean(p, neg) - RL_WEIGHT * _masked_mean(p, ~neg),
                   -RL_WEIGHT * jnp.mean(p))
    loss = loss + rl
  return loss, new_bn


def train_step(state: State, real, noise: Noise) -> tuple:
  """(state, (critic loss, generator loss)): 5 critic updates, [5 predictor updates],
  one generator update."""
  opts = optimizers()
  params, bn, opt = state.params, state.bn, state.opt

  def critic_update(carry, xs):
    d, d_opt, bn = carry
    z, eps, gp = xs
    fake, bn = generate(params['G'], bn, z, eps)
    loss, grads = jax.value_and_grad(critic_loss)(d, real, jax.lax.stop_gradient(fake), gp)
    updates, d_opt = opts['D'].update(grads, d_opt, d)
    return (optax.apply_updates(d, updates), d_opt, bn), loss

  (d, d_opt, bn), d_losses = jax.lax.scan(
      critic_update, (params['D'], opt['D'], bn), (noise.z_critic, noise.eps_critic, noise.gp))
  params, opt = {**params, 'D': d}, {**opt, 'D': d_opt}
  v = None
  if 'V' in params:
    labels = (real[:, 0] > 0).astype(real.dtype)

    def predictor_update(carry, _):
      v, v_opt = carry
      grads = jax.grad(lambda v: jnp.mean(
          optax.sigmoid_binary_cross_entropy(predictor_logits(v, real), labels)))(v)
      updates, v_opt = opts['V'].update(grads, v_opt, v)
      return (optax.apply_updates(v, updates), v_opt), None

    (v, v_opt), _ = jax.lax.scan(predictor_update, (params['V'], opt['V']), None,
                                 length=N_PREDICTOR)
    params, opt = {**params, 'V': v}, {**opt, 'V': v_opt}
  (g_loss, bn), grads = jax.value_and_grad(generator_loss, has_aux=True)(
      params['G'], bn, d, v, noise.z_gen, noise.eps_gen)
  updates, g_opt = opts['G'].update(grads, opt['G'], params['G'])
  params = {**params, 'G': optax.apply_updates(params['G'], updates)}
  return State(params, bn, {**opt, 'G': g_opt}), (d_losses[-1], g_loss)


def make_epoch(batch: int = 256, latent: str = 'normal'):
  """epoch(state, data (N, 2), key) -> (state, mean critic loss, mean generator loss):
  shuffled batches of `batch`, the full ones in one lax.scan, then the remainder."""

  def epoch(state, data, key):
    k_perm, k_steps = jax.random.split(key)
    x = data[jax.random.permutation(k_perm, data.shape[0])]
    n_full = x.shape[0] // batch
    keys = jax.random.split(k_steps, n_full + 1)

    def body(state, xs):
      real, k = xs
      return train_step(state, real, sample_noise(k, batch, latent))

    full = x[:n_full * batch].reshape(n_full, batch, 2)
    state, (d_losses, g_losses) = jax.lax.scan(body, state, (full, keys[:-1]))
    rest = x[n_full * batch:]
    if rest.shape[0]:
      state, _ = train_step(state, rest, sample_noise(keys[-1], rest.shape[0], latent))
    return state, jnp.mean(d_losses), jnp.mean(g_losses)

  return jax.jit(epoch, donate_argnums=0)


def sample(state: State, key, n: int = 500, latent: str = 'normal'):
  """n generated points, BatchNorm with running statistics (validation mode)."""
  k1, k2 = jax.random.split(key)
  z = (jax.random.normal(k1, (n, Z_DIM)) if latent == 'normal' else
       jax.random.uniform(k1, (n, Z_DIM), minval=-1.0, maxval=1.0))
  x, _ = generate(state.params['G'], state.bn, z, jax.random.normal(k2, (n, 2)), train=False)
  return x


BANDWIDTH_FACTORS = (0.1, 0.5, 1.0, 2.0, 5.0)


NAMES = ('IsPositive', 'LogLikelihood', 'KLDivergence', 'WassersteinDistance', 'MMDDistance',
         'MMDivergence')


def log_q(x):
  """log density of the true mixture at x (n, 2)."""
  means = jnp.asarray(data.MEANS, x.dtype)
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


N_QUBITS, N_LAYERS = 6, 2


def init_weights(seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).uniform(-np.pi, np.pi, (N_LAYERS, 2 * N_QUBITS - 1))


def _gates(xp, t, dtype):
  """RY and RZ matrices of angle t in the array module xp."""
  c, s = xp.cos(t / 2), xp.sin(t / 2)
  ry = xp.stack([xp.stack([c, -s]), xp.stack([s, c])]).astype(dtype)
  e = xp.exp(-0.5j * t)
  rz = xp.stack([xp.stack([e, 0 * e]), xp.stack([0 * e, xp.conj(e)])]).astype(dtype)
  return ry, rz


def _apply_1q(xp, state, gate, q):
  """Applies a 2x2 gate to qubit q of a (2,)*N state tensor."""
  state = xp.tensordot(gate, state, axes=([1], [q]))
  return xp.moveaxis(state, 0, q)


def _cnot(xp, state, control, target):
  """CNOT: flips `target` on the control = 1 half of the state."""
  s0 = xp.take(state, 0, axis=control)
  s1 = xp.take(state, 1, axis=control)
  t = target - (target > control)  # Axis of the target once the control axis is taken.
  s1 = xp.flip(s1, axis=t)
  return xp.stack([s0, s1], axis=control)


def circuit(xp, z1, z2, weights, dtype):
  state = xp.zeros((2,) * N_QUBITS, dtype)
  state = state.at[(0,) * N_QUBITS].set(1.0) if xp is jnp else _set_zero(state)
  ry, rz = _gates(xp, xp.arcsin(z1), dtype)[0], _gates(xp, xp.arcsin(z2), dtype)[1]
  for q in range(N_QUBITS):
    state = _apply_1q(xp, state, ry, q)
    state = _apply_1q(xp, state, rz, q)
  for layer in range(N_LAYERS):
    for q in range(N_QUBITS):
      state = _apply_1q(xp, state, _gates(xp, weights[layer, q], dtype)[0], q)
    for q in range(N_QUBITS - 1):
      state = _cnot(xp, state, q, q + 1)
      state = _apply_1q(xp, state, _gates(xp, weights[layer, N_QUBITS + q], dtype)[1], q + 1)
      state = _cnot(xp, state, q, q + 1)
  prob = xp.abs(state) ** 2
  return xp.stack([xp.sum(xp.take(prob, 0, axis=q)) - xp.sum(xp.take(prob, 1, axis=q))
                   for q in range(N_QUBITS)])


def _set_zero(state):
  state[(0,) * N_QUBITS] = 1.0
  return state


@jax.jit
def expectations(z, weights):
  """(B, 6) <Z_i> for latent pairs z (B, 2) in [-1, 1], batched state vectors."""
  return jax.vmap(lambda zi: circuit(jnp, zi[0], zi[1], weights, jnp.complex64))(z).astype(jnp.float32)
