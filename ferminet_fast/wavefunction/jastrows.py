"""Jastrow factors: a symmetric factor J of the electron-electron distances that multiplies
the determinants, so that the wavefunction has the electron-electron cusps, which smooth
features reproduce poorly. Each a record of `JASTROWS`, named by config.network.jastrow."""

from typing import Protocol

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import choices


class Jastrow(Protocol):
  """(module, r_ee (n, n)) -> log J (): the log of the factor at the electrons' distances
  r_ee (bohr; features.Geometry's, zero on the diagonal), spin-up electrons first. Its
  parameters are created in `module`, which has `n_up`, `n_down` and `param_dtype`."""

  def __call__(self, module: nn.Module, r_ee: jax.Array) -> jax.Array:
    ...


def no_jastrow(module: nn.Module, r_ee: jax.Array) -> jax.Array:
  """J = 1."""
  del module
  return jnp.zeros((), r_ee.dtype)


def simple_ee_jastrow(module: nn.Module, r_ee: jax.Array) -> jax.Array:
  """log J = sum_{i<j} -c alpha^2 / (alpha + r_ij): the e-e cusp (d log J / d r_ij = c at
  r_ij = 0), c = 1/4 for same spins and 1/2 for opposite, one learned alpha for each
  (`jastrow_same`, `jastrow_opposite`, starting at one)."""
  spin = np.array([0] * module.n_up + [1] * module.n_down)
  same = np.triu(spin[:, None] == spin[None, :], k=1)
  opposite = np.triu(spin[:, None] != spin[None, :], k=1)
  alpha_same = jnp.abs(module.param('jastrow_same', nn.initializers.ones, (), module.param_dtype))
  alpha_opp = jnp.abs(module.param('jastrow_opposite', nn.initializers.ones, (),
                                   module.param_dtype))
  j_same = -0.25 * alpha_same**2 / (alpha_same + r_ee)
  j_opp = -0.5 * alpha_opp**2 / (alpha_opp + r_ee)
  return jnp.sum(jnp.where(same, j_same, 0.0)) + jnp.sum(jnp.where(opposite, j_opp, 0.0))


NONE = choices.Choice('none', no_jastrow, 'no factor')
SIMPLE_EE = choices.Choice('simple_ee', simple_ee_jastrow, 'learned e-e cusp factor')
JASTROWS = choices.table(NONE, SIMPLE_EE)
