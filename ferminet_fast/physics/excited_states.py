"""Energies, spins and transition dipoles of K states trained together (NES-VMC).

The walkers carry K configurations x = (x_1, ..., x_K) and sample |det A|^2, A_ij =
psi_i(x_j) (the total wavefunction, wavefunction/states.py). For an operator O with local
values O psi_i(x_j) / psi_i(x_j) (local_ij), the local matrix O_L = (local * A) A^-1 (K, K)
averages to O's matrix in the span of the K states, up to a similarity transform that all
operators share; for psi_i = sum_k C_ik phi_k over eigenstates, the energy's is C diag(E_k)
C^-1 at every x, and its trace is the local energy of the total wavefunction.

At each walker the local matrices of three operators are formed: the energy, the total
spin S^2 (Lowdin's exchange formula per state, observables.py) and the dipole d = sum_I Z_I
R_I - sum_i r_i (x, y, z). Their averages over walkers and sweeps, <E_L>, <S^2_L> and
<d_L>, share that similarity transform, so

- the eigenvalues of <E_L> are the state energies E_k (sorted), and its eigenvectors V
  (columns) turn the network states into the energy eigenstates;
- in that basis, T = V^-1 <O_L> V holds <k|O|l> / <k|k>: the diagonal of T for S^2 is each
  state's <S^2> (0 singlet, 2 triplet), and for the dipole T_0k T_k0 (summed over x, y,
  z) is |<0|d|k>|^2 / (<0|0> <k|k>), the squared transition dipole whatever the states'
  normalisation, and f_0k = 2/3 (E_k - E_0) |d_0k|^2 the oscillator strength (length gauge).
  Within a degenerate multiplet the states are any basis of it, so only sums over the
  multiplet mean something; the sum over all K - 1 excited states is reported too.

The error bars are from a jackknife over contiguous blocks of sweeps (each block much longer
than the autocorrelation time): every estimate is a nonlinear function (an eigen-
decomposition) of the averaged matrices, so they are propagated by recomputing it with
each block left out.
"""

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import hamiltonian, observables, systems

JACKKNIFE_BLOCKS = 20  # Blocks of sweeps left out one at a time for the error bars.


def configurations(x: jax.Array, k: int) -> jax.Array:
  """The K configurations of one walker, (K 3N,) -> (K, 3N)."""
  return x.reshape(k, -1)


def scaled_matrix(signs: jax.Array, logs: jax.Array) -> tuple:
  """A_ij = psi_i(x_j) from signs and logs (K states, K configurations), each column scaled
  by its largest magnitude: (A / exp(c_j), c (K,)). The scale is held constant for
  differentiation, so log|det A| = log|det scaled| + sum c with every derivative exact."""
  c = jax.lax.stop_gradient(jnp.max(logs, axis=0))
  return signs * jnp.exp(logs - c[None]), c


def operator_matrix(a: jax.Array, local: jax.Array) -> jax.Array:
  """(local * A) A^-1, (K, K), for A from `scaled_matrix` (the column scales cancel) and
  local values local_ij = O psi_i(x_j) / psi_i(x_j)."""
  return jnp.linalg.solve(a.T, (local * a).T).T


def state_values(apply_states: Callable, params, x: jax.Array, k: int,
                 atoms: Optional[jax.Array] = None) -> tuple:
  """(signs, logs) (K states, K configurations) of one walker x (K 3N,), with the nuclei at
  `atoms` (M, 3) bohr (None: apply_states(params, x) is called, the system's own)."""
  f = apply_states if atoms is None else lambda p, xi: apply_states(p, xi, atoms)
  signs, logs = jax.vmap(f, in_axes=(None, 0))(params, configurations(x, k))
  return signs.T, logs.T


def make_energy_matrix(apply_states: Callable, ham: hamiltonian.Hamiltonian,
                       k: int) -> Callable:
  """(params, x (K 3N,), geometry=None) -> E_L (K, K), Ha: the local-energy matrix under the
  Hamiltonian `ham` of K states at one walker's K configurations (wavefunction/states.py),
  for `apply_states(params, x (3N,)[, atoms]) -> (signs (K,), logs (K,))`, with the nuclei
  of `geometry` (a systems.Geometry; None: the system's own). Its trace is the local energy
  of the total wavefunction."""
  state_energies = ham.local_energy(  # (params, x (3N,), geometry) -> (K,)
      lambda params, x, *atoms: apply_states(params, x, *atoms)[1])

  def matrix(params, x, geometry=None):
    atoms = None if geometry is None else geometry.positions
    signs, logs = state_values(apply_states, params, x, k, atoms)
    local = jax.vmap(lambda p, xi: state_energies(p, xi, geometry), in_axes=(None, 0))(
        params, configurations(x, k))
    return operator_matrix(scaled_matrix(signs, logs)[0], local.T)

  return matrix


def make_local_matrices(network, system: systems.System,
                        ham: hamiltonian.Hamiltonian) -> Callable:
  """(params, x (K 3N,)) -> (5 K^2,): the local matrices of the energy (K, K) under the
  Hamiltonian `ham`, S^2 (K, K) and the dipole (3, K, K) at one walker, flattened in that
  order."""
  k = system.states
  energy = make_energy_matrix(network.apply_states, ham, k)
  spin = observables.spin_squared(network.apply_states, system)  # (params, x (3N,)) -> (K,)
  dipole = observables.dipole(network.apply_states, system)  # (params, x (3N,)) -> (3,)

  def local(params, x):
    signs, logs = state_values(network.apply_states, params, x, k)
    a = scaled_matrix(signs, logs)[0]
    configs = configurations(x, k)
    s2 = jax.vmap(spin, in_axes=(None, 0))(params, configs).T  # (K states, K configs)
    d = jax.vmap(dipole, in_axes=(None, 0))(params, configs)  # (K configs, 3)
    d_mats = jax.vmap(lambda da: operator_matrix(a, jnp.broadcast_to(da, (k, k))))(d.T)
    return jnp.concatenate([energy(params, x).ravel(), operator_matrix(a, s2).ravel(),
                            d_mats.ravel()])

  return local


def reduce(values: jax.Array) -> jax.Array:
  """A sweep's estimate (5 K^2,): the mean over the walkers whose matrices are all finite."""
  return observables.finite_rows_mean(values)[0]


def analyse(mean: np.ndarray, k: int) -> dict:
  """State energies (Ha, ascending), <S^2> of each state, squared transition dipoles
  (e^2 bohr^2) and oscillator strengths from the ground state to each other, from the
  averaged local matrices `mean` (5 K^2,) (see the module docstring)."""
  mean = np.asarray(mean, np.float64)
  e, s2, d = mean[:k * k].reshape(k, k), mean[k * k:2 * k * k].reshape(k, k), mean[
      2 * k * k:].reshape(3, k, k)
  # Complex arithmetic throughout: the estimate of a degenerate multiplet's block is not
  # exactly symmetric, and its eigenvalues may come out as a complex-conjugate pair. Each
  # member of such a pair is meaningless alone (as any basis of a multiplet is), but sums
  # over the pair are real and exact: the products below are taken before the real part.
  w, v = np.linalg.eig(e)
  order = np.argsort(w.real, kind='stable')
  w, v = w[order], v[:, order]
  v_inv = np.linalg.inv(v)
  spin = np.real(np.diag(v_inv @ s2 @ v))
  t = np.einsum('ij,ajk,kl->ail', v_inv, d, v)  # (3, K, K)
  pair = np.sum(t[:, 0, 1:] * t[:, 1:, 0], axis=0)  # T_0k T_k0, summed over x, y, z.
  strength = 2.0 / 3.0 * (w[1:] - w[0]) * pair
  return {'energy': w.real, 'excitation_energy': (w[1:] - w[0]).real, 's2': spin,
          'transition_dipole_sq': pair.real, 'oscillator_strength': strength.real,
          'oscillator_strength_sum': np.real(np.sum(strength, keepdims=True))}


def jackknife(series: np.ndarray, k: int, blocks: int = JACKKNIFE_BLOCKS) -> tuple:
  """(estimates, errors): `analyse` of the mean of a series of sweep estimates (steps, 5 K^2)
  and its block-jackknife standard errors (dicts of arrays, as `analyse`)."""
  series = np.asarray(series, np.float64)
  blocks = max(2, min(blocks, series.shape[0]))
  size = series.shape[0] // blocks
  block_means = series[:blocks * size].reshape(blocks, size, -1).mean(axis=1)
  total = block_means.sum(axis=0)
  full = analyse(series.mean(axis=0), k)
  leave_one_out = [analyse((total - b) / (blocks - 1), k) for b in block_means]
  errors = {}
  for name in full:
    values = np.stack([r[name] for r in leave_one_out])
    errors[name] = np.sqrt((blocks - 1) / blocks *
                           np.sum((values - values.mean(axis=0)) ** 2, axis=0))
  return full, errors
