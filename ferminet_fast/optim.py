"""Optimizers, chosen by name from `OPTIMIZERS`.

Every optimizer is an `Optimizer`: optax-like `init` and `update`, but both also see the
walkers `x` (B, 3N) and a PRNG key, which curvature-based methods (KFAC) need. Plain
optax transformations are wrapped unchanged. The learning rate follows FermiNet's
schedule rate * (1 + t / delay) ** -decay.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax


class Optimizer(NamedTuple):
  init: Callable[..., Any]  # (params, x, key) -> state
  update: Callable[..., tuple]  # (grads, state, params, x, key) -> (updates, state)


# (rate, delay) used when config.optim.lr leaves them None: FermiNet's for KFAC, and what
# reaches chemical accuracy fastest on our small systems for the first-order methods.
DEFAULT_LR = {'adam': (0.01, 1000.0), 'sgd': (0.01, 1000.0), 'kfac': (0.05, 10000.0)}


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
  def init(params, x, key):
    del x, key
    return tx.init(params)

  def update(grads, state, params, x, key):
    del x, key
    return tx.update(grads, state, params)

  return Optimizer(init, update)


def adam(optim_cfg, batch_log_psi) -> Optimizer:
  del batch_log_psi
  a = optim_cfg.adam
  return from_optax(optax.adam(lr_schedule(optim_cfg), b1=a.b1, b2=a.b2, eps=a.eps))


def sgd(optim_cfg, batch_log_psi) -> Optimizer:
  del batch_log_psi
  return from_optax(optax.sgd(lr_schedule(optim_cfg)))


class KfacState(NamedTuple):
  step: jax.Array
  preconditioner: Any


def kfac(optim_cfg, batch_log_psi) -> Optimizer:
  """KFAC (Martens & Grosse 2015; Pfau et al. 2020 for FermiNet) through kfac-jax.

  kfac-jax's `Optimizer` compiles its own step and must not be called under jit, which
  would split our single jitted train step in three; its `OptaxPreconditioner` is a pure
  function of (state, params, batch) that runs inside our step, so it is used here. The
  curvature is the Fisher of log|psi| (a normal predictive distribution on log|psi| per
  walker, as FermiNet registers it), with layers found by kfac-jax's automatic tagging.
  The update is -lr * F^-1 g, scaled down so that lr^2 <F^-1 g, g> <= norm_constraint
  (FermiNet's constraint, applied to the step including the learning rate).
  """
  import kfac_jax  # Optional dependency: pip install 'ferminet_fast[kfac]'.

  k = optim_cfg.kfac

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

  def init(params, x, key):
    return KfacState(jnp.zeros((), jnp.int32), preconditioner.init((params, x), key))

  def update(grads, state, params, x, key):
    precon = preconditioner.maybe_update(state.preconditioner, (params, x), key)
    direction = preconditioner.apply(grads, precon)
    lr = schedule(state.step)
    sq_norm = sum(jnp.vdot(d, g) for d, g in zip(jax.tree.leaves(direction),
                                                  jax.tree.leaves(grads)))
    scale = lr * jnp.minimum(1.0, jnp.sqrt(k.norm_constraint / (lr**2 * sq_norm + 1e-30)))
    updates = jax.tree.map(lambda d: -scale * d, direction)
    return updates, KfacState(state.step + 1, preconditioner.increment_count(precon))

  return Optimizer(init, update)


OPTIMIZERS = {
    'adam': adam,
    'kfac': kfac,
    'sgd': sgd,
}
OPTIONAL = {'kfac': 'kfac_jax'}  # Optimizer -> package it needs.


def make_optimizer(optim_cfg, batch_log_psi: Callable) -> Optimizer:
  """batch_log_psi(params, x (B, 3N)) -> (B,) is what curvature-based methods differentiate."""
  return OPTIMIZERS[optim_cfg.optimizer](optim_cfg, batch_log_psi)
