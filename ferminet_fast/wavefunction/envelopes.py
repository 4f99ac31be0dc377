"""Envelopes: the decay that multiplies each orbital, so that the wavefunction vanishes far
from the nuclei whatever the network's features do there. Chosen by name from `ENVELOPES`
(config.network.envelope)."""

from typing import Protocol

import flax.linen as nn
import jax
import jax.numpy as jnp


class Envelope(Protocol):
  """(module, ae (n_s, m, 3), r_ae (n_s, m, 1), n_out, name) -> (n_s, n_out): the envelope of
  n_out orbitals at each of n_s electrons, from their offsets ae and distances r_ae (bohr)
  to the m nuclei (features.Geometry). Its parameters are created in `module` (which has a
  `param_dtype`) under names that start with `name`, so that their paths in the parameter
  tree are the module's own."""

  def __call__(self, module: nn.Module, ae: jax.Array, r_ae: jax.Array, n_out: int,
               name: str) -> jax.Array:
    ...


def isotropic_envelope(module: nn.Module, ae: jax.Array, r_ae: jax.Array, n_out: int,
                       name: str) -> jax.Array:
  """sum_m pi_m exp(-sigma_m |r - R_m|), one pi and sigma per nucleus and orbital
  (`{name}_pi`, `{name}_sigma`, (m, n_out), both starting at one)."""
  m = ae.shape[1]
  pi = module.param(f'{name}_pi', nn.initializers.ones, (m, n_out), module.param_dtype)
  sigma = module.param(f'{name}_sigma', nn.initializers.ones, (m, n_out), module.param_dtype)
  return jnp.sum(pi[None] * jnp.exp(-r_ae * jnp.abs(sigma)[None]), axis=1)


def full_envelope(module: nn.Module, ae: jax.Array, r_ae: jax.Array, n_out: int,
                  name: str) -> jax.Array:
  """sum_m pi_m exp(-|Sigma_m (r - R_m)|) with a 3 x 3 matrix Sigma_m per nucleus and
  orbital (anisotropic decay; `{name}_sigma` (m, 3, 3, n_out), starting as the identity)."""
  del r_ae
  m = ae.shape[1]
  pi = module.param(f'{name}_pi', nn.initializers.ones, (m, n_out), module.param_dtype)
  eye_init = lambda key, s, dtype: jnp.broadcast_to(jnp.eye(3, dtype=dtype)[None, :, :, None], s)
  sigma = module.param(f'{name}_sigma', eye_init, (m, 3, 3, n_out), module.param_dtype)
  exponent = jnp.linalg.norm(jnp.einsum('imj,mjko->imko', ae, sigma), axis=2)
  return jnp.sum(pi[None] * jnp.exp(-exponent), axis=1)


ENVELOPES: dict[str, Envelope] = {'isotropic': isotropic_envelope, 'full': full_envelope}
