"""Optimizers, chosen by name from `OPTIMIZERS`.

Every optimizer is an optax `GradientTransformationExtraArgs`: `init(params)` and
`update(grads, state, params, samples=Samples(...))`, where the step's `Samples` (walkers,
a PRNG key, the centred local energies) are what curvature-based methods (KFAC, SPRING)
need; first-order optax transformations ignore them. The learning rate follows FermiNet's
schedule rate * (1 + t / delay) ** -decay.
"""

from typing import Callable, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.scipy.linalg
import optax

from ferminet_fast.optimizers import kfac as kfac_lib


class Samples(NamedTuple):
  """What one step measured, besides the gradient."""
  x: jax.Array  # (B, 3N) bohr, the walkers.
  key: jax.Array  # PRNG key for stochastic curvature estimates.
  centred: jax.Array  # (B,) Ha, clipped local energies minus their mean (loss.EnergyAux).


# (rate, delay) used when config.optim.lr leaves them None: FermiNet's for KFAC, and what
# reaches chemical accuracy fastest on our small systems for the first-order methods.
DEFAULT_LR = {'adam': (0.01, 1000.0), 'sgd': (0.01, 1000.0), 'kfac': (0.05, 10000.0),
              'spring': (0.2, 10000.0)}


def lr_schedule(optim_cfg) -> Callable:
  """t (steps) -> learning rate."""
  rate, delay = DEFAULT_LR[optim_cfg.optimizer]
  rate = rate if optim_cfg.lr.rate is None else optim_cfg.lr.rate
  delay = delay if optim_cfg.lr.delay is None else optim_cfg.lr.delay
  decay = optim_cfg.lr.decay

  def schedule(t):
    return rate * jnp.power(1.0 + t / delay, -decay)

  return schedule


def adam(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  del network
  a = optim_cfg.adam
  return optax.with_extra_args_support(
      optax.adam(lr_schedule(optim_cfg), b1=a.b1, b2=a.b2, eps=a.eps))


def sgd(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  del network
  return optax.with_extra_args_support(optax.sgd(lr_schedule(optim_cfg)))


def kfac(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """KFAC with FermiNet's settings (kfac.py)."""
  k = optim_cfg.kfac
  return kfac_lib.kfac(network, network.n_coords, lr_schedule(optim_cfg), k.damping,
                       k.norm_constraint, k.cov_ema_decay, k.invert_every)


class SpringState(NamedTuple):
  step: jax.Array
  previous: jax.Array  # (P,) the previous update direction (before the learning rate).


def spring(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """SPRING (Goldshmid et al., J. Comput. Phys. 2024): a natural gradient solved in the
  B x B space of walkers, with momentum in the parameter space.

  O (B, P) holds d log|psi(x_i)| / d params, centred over walkers and divided by sqrt(B);
  eps_i = -(E_L(x_i) - <E_L>) / sqrt(B) (clipped). The direction
    d = mu * d_prev + O^T (O O^T + damping I + 11^T / B)^-1 (eps - mu O d_prev)
  minimises |O d - eps|^2 + damping |d - mu d_prev|^2 (mu = 0 is MinSR). The B x B solve
  costs O(B^2 P + B^3) instead of the P x P Fisher's, exact rather than Kronecker-factored;
  the 11^T / B term only lifts the zero eigenvalue that centring creates. The step is
  lr * d, bounded like KFAC's: lr^2 |d|^2 <= norm_constraint.
  """
  s = optim_cfg.spring
  schedule = lr_schedule(optim_cfg)
  per_walker_grad = jax.vmap(jax.grad(network.log_psi), in_axes=(None, 0))

  def init(params):
    flat, _ = jax.flatten_util.ravel_pytree(params)
    return SpringState(jnp.zeros((), jnp.int32), jnp.zeros_like(flat))

  def update(grads, state, params=None, *, samples=None, **extra):
    del grads, extra  # The direction is rebuilt from per-walker gradients.
    _, unravel = jax.flatten_util.ravel_pytree(params)
    leaves = jax.tree.leaves(per_walker_grad(params, samples.x))
    o = jnp.concatenate([g.reshape(g.shape[0], -1) for g in leaves], axis=1)  # (B, P)
    b = o.shape[0]
    # Walkers whose gradient is non-finite (they also have zero weight in eps) are dropped.
    o = jnp.where(jnp.all(jnp.isfinite(o), axis=1, keepdims=True), o, 0.0)
    o = (o - jnp.mean(o, axis=0)) / jnp.sqrt(b)
    eps = -samples.centred / jnp.sqrt(b)
    kernel = o @ o.T + s.damping * jnp.eye(b, dtype=o.dtype) + 1.0 / b
    rhs = eps - s.momentum * (o @ state.previous)
    coef = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(kernel), rhs)
    direction = o.T @ coef + s.momentum * state.previous
    scale = kfac_lib.norm_constrained(schedule(state.step), jnp.vdot(direction, direction),
                                      s.norm_constraint)
    return unravel(scale * direction), SpringState(state.step + 1, direction)

  return optax.GradientTransformationExtraArgs(init, update)


OPTIMIZERS = {
    'adam': adam,
    'kfac': kfac,
    'sgd': sgd,
    'spring': spring,
}


def make_optimizer(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """network: a networks.Network, whose log|psi| curvature-based methods differentiate."""
  return OPTIMIZERS[optim_cfg.optimizer](optim_cfg, network)
