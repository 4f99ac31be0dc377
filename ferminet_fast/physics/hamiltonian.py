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


def make_local_energy_at(log_psi: Callable, charges,
                         laplacian: laplacians.Method = laplacians.JVP_LOOP,
                         with_gradient: bool = False,
                         potential: coulomb.Coulomb = coulomb.molecular_coulomb,
                         complex_output: bool = False) -> Callable:
  """(params, x (3N,), atoms (M, 3)) -> E_L (), Ha, for nuclei of `charges` (M,) placed at
  `atoms` (bohr) and `log_psi(params, x, atoms) -> log|psi|`; with_gradient: (E_L,
  grad_x log|psi| (3N,)), the gradient that the Laplacian method computes anyway. For
  log_psi of K states, (K,) each state's local energy (and gradients (K, 3N)).
  `potential`: the Coulomb energy (open boundaries by default). complex_output: log_psi
  gives (log|psi|, theta) (2,) of a complex wavefunction, and E_L is complex (its real part
  is the energy's estimator, its imaginary part enters the gradient: vmc/loss.py)."""
  local_energy = _local_energy(log_psi, charges, laplacian, with_gradient, potential,
                               complex_output)
  return lambda params, x, atoms: local_energy(params, x, atoms, atoms)


def _local_energy(log_psi: Callable, charges, laplacian: laplacians.Method,
                  with_gradient: bool, potential: coulomb.Coulomb,
                  complex_output: bool) -> Callable:
  """make_local_energy_at's (params, x, nuclei (M, 3), atoms) -> E_L, whose potential takes
  the nuclei at `nuclei` and whose log_psi takes `atoms`; with None log_psi(params, x) is
  called, the function's own positions (for a network, constants of its program)."""
  charges = np.asarray(charges)

  def local_energy(params, x, nuclei, atoms):
    z = jnp.asarray(charges, x.dtype)
    if atoms is None:
      lap, g = laplacian(lambda y: log_psi(params, y))(x)
    else:
      lap, g = laplacian(lambda y: log_psi(params, y, atoms))(x)
    if complex_output:
      kinetic, g = complex_kinetic(lap, g), g[0]
    else:
      kinetic = -0.5 * (lap + jnp.sum(g * g, axis=-1))
    e_l = kinetic + potential(x, nuclei, z)
    return (e_l, g) if with_gradient else e_l

  return local_energy


def nuclei_of(system: systems.System, geometry: Optional[systems.Geometry],
              dtype) -> jax.Array:
  """The nuclear positions (M, 3) bohr in `dtype`: those of `geometry`, or with None the
  system's own (a constant of the program)."""
  return jnp.asarray(system.positions if geometry is None else geometry.positions, dtype)


def make_local_energy(log_psi: Callable, system: systems.System,
                      laplacian: laplacians.Method = laplacians.JVP_LOOP,
                      apply: Optional[Callable] = None, dtype=jnp.float32,
                      log_psi_phase: Optional[Callable] = None) -> Callable:
  """(params, x (3N,), geometry=None) -> E_L (), Ha, with the Laplacian method `laplacian`,
  the nuclei where `geometry` (a systems.Geometry) puts them, or with None at the system's
  own positions. `log_psi(params, x, atoms)`, as a Network's (atoms: the positions (M, 3)),
  is called as log_psi(params, x) without a geometry, so that a function of a fixed
  geometry needs no `atoms`; so are `apply` and `log_psi_phase`. A system with effective
  core potentials adds their energy (ecp.py), which needs the signed wavefunction
  `apply(params, x, atoms=None) -> (sign, log|psi|)`. A periodic system's Coulomb energy is
  its Ewald sum, converged for `dtype` (the walkers'). With `log_psi_phase(params, x,
  atoms=None) -> (log|psi|, theta)` (a complex wavefunction) E_L is complex, differentiated
  through it."""
  f = log_psi if log_psi_phase is None else log_psi_phase
  local_energy = _local_energy(f, system.charges, laplacian, False,
                               coulomb_of(system, dtype), log_psi_phase is not None)
  ecp_energy = None
  if system.has_ecp:
    if apply is None:
      raise ValueError('a system with effective core potentials needs `apply`')
    ecp_energy = ecp.make_ecp_energy(apply, system.positions, system.ecp)

  def total(params, x, geometry=None):
    atoms = None if geometry is None else geometry.positions
    e_l = local_energy(params, x, nuclei_of(system, geometry, x.dtype), atoms)
    return e_l if ecp_energy is None else e_l + ecp_energy(params, x, atoms)

  return total
