"""Observables besides the energy, estimated at walkers sampled from |psi|^2.

Each observable is a function of ONE configuration, (params, x (3N,)) -> values (k,), whose
mean over |psi|^2 is the expectation value; evaluation averages it over walkers and sweeps
and reblocks each component. Chosen by name from `OBSERVABLES`.

- 's2': total spin <S^2>. For a wavefunction with n_up spin-up and n_down spin-down
  electrons (S_z = (n_up - n_down) / 2),
    <S^2> = S_z (S_z + 1) + n_down - sum_{i up, j down} <psi(x with r_i <-> r_j) / psi(x)>,
  the exchange of the positions of an up and a down electron (Lowdin's formula, written
  as a ratio of wavefunction values: n_up n_down extra network evaluations per walker).
  A spin eigenstate gives S(S + 1): 0 for a singlet, 0.75 for a doublet, 2 for a triplet.
- 'dipole': the electric dipole moment d = sum_I Z_I R_I - sum_i r_i (x, y, z), in e bohr
  (atomic units; 1 e bohr = 2.541746 D). Origin-independent for neutral systems.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import systems

DEBYE_PER_AU = 2.541746473  # 1 e bohr in debye (CODATA 2018).


class Observable(NamedTuple):
  make: Callable  # (apply, system) -> (params, x (3N,)) -> values (k,)
  labels: tuple  # Names of the k components.
  unit: str


def spin_squared(apply: Callable, system: systems.System) -> Callable:
  """<S^2> estimator for `apply(params, x) -> (sign, log|psi|)`; see the module docstring."""
  n_up, n_down = system.n_up, system.n_down
  s_z = 0.5 * (n_up - n_down)
  pairs = np.array([(i, j) for i in range(n_up) for j in range(n_up, n_up + n_down)],
                   dtype=np.int32).reshape(-1, 2)

  def estimate(params, x):
    sign, log_abs = apply(params, x)
    r = x.reshape(-1, 3)

    def exchanged(pair):
      i, j = pair[0], pair[1]
      swapped = r.at[i].set(r[j]).at[j].set(r[i])
      sign_s, log_s = apply(params, swapped.reshape(-1))
      return sign_s * sign * jnp.exp(log_s - log_abs)

    exchange = jnp.sum(jax.vmap(exchanged)(pairs)) if len(pairs) else 0.0
    return jnp.reshape(s_z * (s_z + 1) + n_down - exchange, (1,)).astype(x.dtype)

  return estimate


def dipole(apply: Callable, system: systems.System) -> Callable:
  """Dipole moment sum_I Z_I R_I - sum_i r_i (3,), e bohr."""
  del apply
  nuclear = np.sum(np.asarray(system.charges)[:, None] * np.asarray(system.positions), axis=0)

  def estimate(params, x):
    del params
    return jnp.asarray(nuclear, x.dtype) - jnp.sum(x.reshape(-1, 3), axis=0)

  return estimate


OBSERVABLES = {
    's2': Observable(spin_squared, ('S^2',), ''),
    'dipole': Observable(dipole, ('x', 'y', 'z'), 'e bohr'),
}

