"""Local energy E_L = -1/2 (lap log|psi| + |grad log|psi||^2) + V_ee + V_en + V_nn, in Ha,
plus the effective core potentials' energy (ecp.py) where atoms have them; for a complex
wavefunction the kinetic term is -1/2 (lap log psi + (grad log psi)^2) of log psi = log|psi|
+ i theta (`complex_kinetic`), and E_L complex. The Coulomb
terms are a `coulomb.Coulomb`: plain 1/r sums for open boundaries (`coulomb.molecular_coulomb`),
the Ewald sum for periodic systems (ewald.py).

Everything here acts on ONE configuration x (3N,); callers vmap over walkers.
The Laplacian is a `laplacians.Method` record, resolved from the settings by the run.
"""

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import coulomb, ecp, laplacians, systems


def coulomb_of(system: systems.System, dtype=jnp.float32) -> coulomb.Coulomb:
  """The system's Coulomb energy, as its boundary gives it: the Ewald sum in its cell,
  converged for `dtype`, or the open-boundary sums."""
  return system.boundary.coulomb(system.n_electrons, len(system.charges), dtype)


def complex_kinetic(lap: jax.Array, g: jax.Array) -> jax.Array:
  """The local kinetic energy -1/2 (lap log psi + (grad log psi)^2) (), complex, Ha, of a
  complex log psi = L + i theta from the Laplacians (2,) and gradients (2, 3N) of L and
  theta: real part -1/2 (lap L + |grad L|^2 - |grad theta|^2), imaginary part -1/2 (lap
  theta + 2 grad L . grad theta)."""
  real = -0.5 * (lap[0] + jnp.sum(g[0] * g[0]) - jnp.sum(g[1] * g[1]))
  imag = -0.5 * (lap[1] + 2.0 * jnp.sum(g[0] * g[1]))
  return jax.lax.complex(real, imag)


def make_local_energy_at(log_psi_at: Callable, charges,
                         laplacian: laplacians.Method = laplacians.JVP_LOOP,
                         with_gradient: bool = False,
                         potential: coulomb.Coulomb = coulomb.molecular_coulomb,
                         complex_output: bool = False) -> Callable:
  """(params, x (3N,), atoms (M, 3)) -> E_L (), Ha, for nuclei of `charges` (M,) placed at
  `atoms` (bohr) and `log_psi_at(params, x, atoms) -> log|psi|`; with_gradient: (E_L,
  grad_x log|psi| (3N,)), the gradient that the Laplacian method computes anyway. For
  log_psi_at of K states, (K,) each state's local energy (and gradients (K, 3N)).
  `potential`: the Coulomb energy (open boundaries by default). complex_output: log_psi_at
  gives (log|psi|, theta) (2,) of a complex wavefunction, and E_L is complex (its real part
  is the energy's estimator, its imaginary part enters the gradient: vmc/loss.py)."""
  charges = np.asarray(charges)

  def local_energy(params, x, atoms):
    z = jnp.asarray(charges, x.dtype)
    lap, g = laplacian(lambda y: log_psi_at(params, y, atoms))(x)
    if complex_output:
      kinetic, g = complex_kinetic(lap, g), g[0]
    else:
      kinetic = -0.5 * (lap + jnp.sum(g * g, axis=-1))
    e_l = kinetic + potential(x, atoms, z)
    return (e_l, g) if with_gradient else e_l

  return local_energy


def make_local_energy(log_psi: Callable, system: systems.System,
                      laplacian: laplacians.Method = laplacians.JVP_LOOP,
                      apply: Optional[Callable] = None, dtype=jnp.float32,
                      log_psi_phase: Optional[Callable] = None) -> Callable:
  """(params, x (3N,)) -> E_L (), Ha, with the Laplacian method `laplacian`, nuclei fixed. A system
  with effective core potentials adds their energy (ecp.py), which needs the signed
  wavefunction `apply(params, x) -> (sign, log|psi|)`. A periodic system's Coulomb energy
  is its Ewald sum, converged for `dtype` (the walkers'). With `log_psi_phase(params, x) ->
  (log|psi|, theta)` (a complex wavefunction) E_L is complex, differentiated through it."""
  f = log_psi if log_psi_phase is None else log_psi_phase
  local_energy = make_local_energy_at(lambda params, x, atoms: f(params, x),
                                      system.charges, laplacian,
                                      potential=coulomb_of(system, dtype),
                                      complex_output=log_psi_phase is not None)
  ecp_energy = None
  if system.has_ecp:
    if apply is None:
      raise ValueError('a system with effective core potentials needs `apply`')
    ecp_energy = ecp.make_ecp_energy(apply, system.positions, system.ecp)

  def total(params, x):
    e_l = local_energy(params, x, jnp.asarray(system.positions, x.dtype))
    return e_l if ecp_energy is None else e_l + ecp_energy(params, x)

  return total

