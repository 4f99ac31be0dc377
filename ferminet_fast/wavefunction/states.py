"""Several states at once: the total wavefunction of natural excited states (NES-VMC; Pfau,
Axelrod, Sutterud, von Glehn and Spencer, Science 385, eadn0137 (2024)).

A network with K outputs psi_1..psi_K (networks.py, `states` = K) is evaluated at K
configurations x_1..x_K of the N electrons; the total wavefunction is the determinant

    Psi(x_1, ..., x_K) = det A,   A_ij = psi_i(x_j)  (rows: states; columns: configurations),

antisymmetric under exchanging two configurations, so that the walkers that sample |Psi|^2
carry K configurations each, x = (x_1, ..., x_K) flat (K 3N,). Psi is an eigenfunction of
the sum of the K copies of the Hamiltonian exactly when the psi_i span K eigenstates, and
its energy, the sum of theirs, is lowest for the lowest K: training it is ordinary VMC on
Psi. The states' energies and other properties come from local matrices over the same
walkers (physics/excited_states.py).

Everything here acts on ONE walker (K configurations); callers vmap.
"""

import jax
import jax.numpy as jnp

from ferminet_fast.physics import excited_states
from ferminet_fast.wavefunction.base import ApplyStates, Network, slogdet


def total_value(signs: jax.Array, logs: jax.Array) -> tuple:
  """(sign, log|det A|) of the total wavefunction from its (K, K) signs and logs."""
  a, c = excited_states.scaled_matrix(signs, logs)
  sign, log_abs = slogdet(a)
  return sign, log_abs + jnp.sum(c)


def total_network(base: Network, apply_states: ApplyStates, k: int) -> Network:
  """The total wavefunction of K states as a Network on x (K 3N,), from the
  network of one configuration: `base` (its init, dtype, and `instrumented`, which gives
  the K states' values) and `apply_states(params, x (3N,), atoms=None) -> (signs (K,), logs
  (K,))`. Samplers, optimizers (KFAC's curvature then counts each dense layer once per
  configuration) and checkpoints use it as they use a one-state network; `atoms` moves the
  nuclei of all K configurations alike."""

  def apply(params, x, atoms=None):
    return total_value(*excited_states.state_values(apply_states, params, x, k, atoms))

  def log_psi(params, x, atoms=None):
    return apply(params, x, atoms)[1]

  def instrumented(variables, x, mutable, interceptor, atoms=None):
    per_configuration = {c: v for c, v in variables.items() if c != 'params'}

    def one(other, xi):
      return base.instrumented({'params': variables['params'], **other}, xi, mutable,
                               interceptor, atoms)

    (signs, logs), state = jax.vmap(one)(per_configuration, excited_states.configurations(x, k))
    return total_value(signs.T, logs.T), state

  # `orbitals` stays the base network's: the blocks of all K states at ONE configuration.
  return base._replace(apply=apply, log_psi=log_psi, instrumented=instrumented,
                       n_coords=k * base.n_coords, states=k, apply_states=apply_states)
