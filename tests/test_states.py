"""The total wavefunction of several states (wavefunction/states.py): antisymmetric in its
configurations, its local energy (by an independent Laplacian over all of them) is the trace
of the states' energy matrix, and mixing the states changes nothing physical."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import plan
from ferminet_fast.physics import coulomb, excited_states, hamiltonian, laplacians, systems
from ferminet_fast.wavefunction import states



@pytest.fixture(autouse=True)
def float64():
  with jax.enable_x64(True):
    yield

@pytest.fixture(scope='module')
def helium_states():
  """An untrained FermiNet of 3 He states, float64, and walkers (3 configurations each)."""
  cfg = tiny_config('He', **{'system.states': 3, 'network.ferminet.hidden_dims': ((8, 4),)})
  system = systems.make_system(cfg.system)
  with jax.enable_x64(True):
    network = plan.network_of(cfg.network, system, jnp.float64)
    params = network.init(jax.random.PRNGKey(1))
    # Perturb the envelopes away from their equal initial values, so the states differ more.
    params = jax.tree.map(lambda p: p + 0.3 * jax.random.normal(
        jax.random.PRNGKey(2), p.shape, p.dtype), params)
    x = jax.random.normal(jax.random.PRNGKey(3), (4, network.n_coords), jnp.float64)
  return system, network, params, x


def test_total_wavefunction_is_antisymmetric_in_configurations(helium_states):
  _, network, params, x = helium_states
  swapped = x.reshape(4, 3, -1)[:, [1, 0, 2]].reshape(4, -1)
  sign, log_abs = jax.vmap(network.apply, in_axes=(None, 0))(params, x)
  sign_s, log_s = jax.vmap(network.apply, in_axes=(None, 0))(params, swapped)
  np.testing.assert_allclose(log_s, log_abs, rtol=1e-12)
  np.testing.assert_array_equal(sign_s, -sign)


def test_trace_is_the_total_wavefunctions_local_energy(helium_states):
  """tr E_L = -1/2 (lap + |grad|^2) log|Psi| over all 3 x 3N coordinates + sum_j V(x_j), by
  the full Hessian of the total log|Psi| (no state-by-state algebra)."""
  system, network, params, x = helium_states
  matrix = jax.jit(jax.vmap(excited_states.make_energy_matrix(
      network.apply_states, hamiltonian.of(system, laplacians.JACFWD), system.states),
      in_axes=(None, 0)))(params, x)

  def total_local_energy(xi):
    f = lambda y: network.log_psi(params, y)  # noqa: E731
    kinetic = -0.5 * (jnp.trace(jax.hessian(f)(xi)) + jnp.sum(jax.grad(f)(xi) ** 2))
    atoms = jnp.asarray(system.positions)
    charges = jnp.asarray(system.charges)
    potential = sum(coulomb.potential_energy(c, atoms, charges, 0.0)
                    for c in excited_states.configurations(xi, 3))
    return kinetic + potential

  np.testing.assert_allclose(jnp.trace(matrix, axis1=1, axis2=2),
                             jax.jit(jax.vmap(total_local_energy))(x), rtol=1e-8)


def test_mixing_the_states_changes_no_energy(helium_states):
  """psi'_i = sum_k C_ik psi_k: |Psi'| = |det C| |Psi| (the same sampling) and E_L' =
  C E_L C^-1 (the same eigenvalues, so the same state energies)."""
  system, network, params, x = helium_states
  mixing = jnp.asarray([[1.0, 0.5, -0.2], [0.3, -1.1, 0.4], [0.2, 0.1, 0.9]])

  def mixed(p, xi):
    signs, logs = network.apply_states(p, xi)
    top = jnp.max(logs)
    psi = mixing @ (signs * jnp.exp(logs - top))
    return jnp.sign(psi), jnp.log(jnp.abs(psi)) + top

  def matrices(apply_states):
    ham = hamiltonian.of(system, laplacians.JACFWD)
    return jax.jit(jax.vmap(excited_states.make_energy_matrix(apply_states, ham, system.states),
                            in_axes=(None, 0)))(params, x)

  e, e_mixed = matrices(network.apply_states), matrices(mixed)
  np.testing.assert_allclose(e_mixed, mixing @ e @ jnp.linalg.inv(mixing), rtol=1e-7,
                             atol=1e-9)
  log_mixed = jax.vmap(lambda xi: states.total_value(
      *excited_states.state_values(mixed, params, xi, 3))[1])(x)
  log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))(params, x)
  np.testing.assert_allclose(log_mixed, log_psi + np.log(abs(np.linalg.det(mixing))),
                             rtol=1e-10)
