"""Optimizers, chosen by name from `OPTIMIZERS`.

Every optimizer is an `Optimizer`: optax-like `init` and `update`, but both also see the
step's `Samples` (walkers, a PRNG key, the centred local energies), which curvature-based
methods (KFAC, SPRING) need. Plain optax transformations are wrapped unchanged. The
learning rate follows FermiNet's schedule rate * (1 + t / delay) ** -decay.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.scipy.linalg
import optax


class Samples(NamedTuple):
  """What one step measured, besides the gradient."""
  x: jax.Array  # (B, 3N) bohr, the walkers.
  key: jax.Array  # PRNG key for stochastic curvature estimates.
  centred: jax.Array  # (B,) Ha, clipped local energies minus their mean (loss.EnergyAux).


class Optimizer(NamedTuple):
  init: Callable[..., Any]  # (params, Samples) -> state
  update: Callable[..., tuple]  # (grads, state, params, Samples) -> (updates, state)


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


def from_optax(tx: optax.GradientTransformation) -> Optimizer:
  def init(params, samples):
    del samples
    return tx.init(params)

  def update(grads, state, params, samples):
    del samples
    return tx.update(grads, state, params)

  return Optimizer(init, update)


def adam(optim_cfg, network) -> Optimizer:
  del network
  a = optim_cfg.adam
  return from_optax(optax.adam(lr_schedule(optim_cfg), b1=a.b1, b2=a.b2, eps=a.eps))


def sgd(optim_cfg, network) -> Optimizer:
  del network
  return from_optax(optax.sgd(lr_schedule(optim_cfg)))


def _norm_constrained(lr, sq_norm, constraint):
  """The step size lr, reduced so that lr^2 * sq_norm <= constraint (FermiNet's trust region)."""
  return lr * jnp.minimum(1.0, jnp.sqrt(constraint / (lr**2 * sq_norm + 1e-30)))


class KfacState(NamedTuple):
  step: jax.Array
  preconditioner: Any


def kfac(optim_cfg, network) -> Optimizer:
  """KFAC (Martens & Grosse 2015; Pfau et al. 2020 for FermiNet) through kfac-jax.

  kfac-jax's `Optimizer` compiles its own step and must not be called under jit, which
  would split our single jitted train step in three; its `OptaxPreconditioner` is a pure
  function of (state, params, batch) that runs inside our step, so it is used here. The
  curvature is the Fisher of log|psi| (a normal predictive distribution on log|psi| per
  walker, as FermiNet registers it). Layers are found by kfac-jax's automatic tagging
  (dense orbital and pair layers as repeated-dense Kronecker blocks, envelope exponents
  as scale-and-shift blocks, the rest diagonal), except FermiNet's symmetric layers, whose
  split product it cannot match: `network.kfac_log_psi` tags them as repeated-dense.
  The update is -lr * F^-1 g, scaled down so that lr^2 <F^-1 g, g> <= norm_constraint
  (FermiNet's constraint, applied to the step including the learning rate).
  """
  import kfac_jax  # Optional dependency: pip install 'ferminet_fast[kfac]'.

  k = optim_cfg.kfac
  batch_log_psi = jax.vmap(network.kfac_log_psi, in_axes=(None, 0))

  def value_func(params, x):
    log_psi = batch_log_psi(params, x)
    kfac_jax.register_normal_predictive_distribution(log_psi[:, None])
    return jnp.mean(log_psi)

  preconditioner = kfac_jax.OptaxPreconditioner(
      value_func, damping=k.damping, norm_constraint=None, curvature_ema=k.cov_ema_decay,
      inverse_update_period=k.invert_every, estimation_mode='fisher_gradients',
      # One jitted program over all devices (no pmap): nothing to distribute by hand.
      distributed_inverses=False, distributed_precon_apply=False)
  schedule = lr_schedule(optim_cfg)

  def init(params, samples):
    return KfacState(jnp.zeros((), jnp.int32),
                     preconditioner.init((params, samples.x), samples.key))

  def update(grads, state, params, samples):
    precon = preconditioner.maybe_update(state.preconditioner, (params, samples.x), samples.key)
    direction = preconditioner.apply(grads, precon)
    sq_norm = sum(jnp.vdot(d, g) for d, g in zip(jax.tree.leaves(direction),
                                                  jax.tree.leaves(grads)))
    scale = _norm_constrained(schedule(state.step), sq_norm, k.norm_constraint)
    updates = jax.tree.map(lambda d: -scale * d, direction)
    return updates, KfacState(state.step + 1, preconditioner.increment_count(precon))

  return Optimizer(init, update)


class SpringState(NamedTuple):
  step: jax.Array
  previous: jax.Array  # (P,) the previous update direction (before the learning rate).


def spring(optim_cfg, network) -> Optimizer:
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

  def init(params, samples):
    del samples
    flat, _ = jax.flatten_util.ravel_pytree(params)
    return SpringState(jnp.zeros((), jnp.int32), jnp.zeros_like(flat))

  def update(grads, state, params, samples):
    del grads  # The direction is rebuilt from per-walker gradients.
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
    scale = _norm_constrained(schedule(state.step), jnp.vdot(direction, direction),
                              s.norm_constraint)
    return unravel(scale * direction), SpringState(state.step + 1, direction)

  return Optimizer(init, update)


OPTIMIZERS = {
    'adam': adam,
    'kfac': kfac,
    'sgd': sgd,
    'spring': spring,
}
OPTIONAL = {'kfac': 'kfac_jax'}  # Optimizer -> package it needs.


def make_optimizer(optim_cfg, network) -> Optimizer:
  """network: a networks.Network, whose log|psi| curvature-based methods differentiate."""
  return OPTIMIZERS[optim_cfg.optimizer](optim_cfg, network)
