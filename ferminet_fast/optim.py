"""Optimizers, chosen by name from `OPTIMIZERS`, as optax gradient transformations.

Each entry maps the `config.optim` block to an `optax.GradientTransformation` whose
learning rate follows FermiNet's schedule rate * (1 + t / delay) ** -decay.
"""

from typing import Callable

import jax.numpy as jnp
import optax


def lr_schedule(optim_cfg) -> Callable:
  """t (steps) -> learning rate."""
  rate, delay, decay = optim_cfg.lr.rate, optim_cfg.lr.delay, optim_cfg.lr.decay

  def schedule(t):
    return rate * jnp.power(1.0 + t / delay, -decay)

  return schedule


def adam(optim_cfg) -> optax.GradientTransformation:
  a = optim_cfg.adam
  return optax.adam(lr_schedule(optim_cfg), b1=a.b1, b2=a.b2, eps=a.eps)


def sgd(optim_cfg) -> optax.GradientTransformation:
  return optax.sgd(lr_schedule(optim_cfg))


OPTIMIZERS = {
    'adam': adam,
    'sgd': sgd,
}


def make_optimizer(optim_cfg) -> optax.GradientTransformation:
  return OPTIMIZERS[optim_cfg.optimizer](optim_cfg)
