"""The Hamiltonian of a run (`Hamiltonian`, resolved once by `of` from the system, the
Laplacian method and the walkers' dtype: plan.py) and its local energy E_L = -1/2 (lap
log|psi| + |grad log|psi||^2) + V_ee + V_en + V_nn, in Ha, plus the effective core
potentials' energy (ecp.py) where atoms have them; for a complex wavefunction the kinetic
term is -1/2 (lap log psi + (grad log psi)^2) of log psi = log|psi| + i theta
(`complex_kinetic`), and E_L complex. The Coulomb terms are a `coulomb.Coulomb`: plain 1/r
sums for open boundaries (`coulomb.molecular_coulomb`), the Ewald sum for periodic systems
(ewald.py).

Everything here acts on ONE configuration x (3N,); callers vmap over walkers.
The Laplacian is a `laplacians.Method` record, resolved from the settings by the run.
"""

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import coulomb, ecp, laplacians, systems


def complex_kinetic(lap: jax.Array, g: jax.Array) -> jax.Array:
  """The local kinetic energy -1/2 (lap log psi + (grad log psi)^2) (), complex, Ha, of a
  complex log psi = L + i theta from the Laplacians (2,) and gradients (2, 3N) of L and
  theta: real part -1/2 (lap L + |grad L|^2 - |grad theta|^2), imaginary part -1/2 (lap
  theta + 2 grad L . grad theta)."""
  real = -0.5 * (lap[0] + jnp.sum(g[0] * g[0]) - jnp.sum(g[1] * g[1]))
  imag = -0.5 * (lap[1] + 2.0 * jnp.sum(g[0] * g[1]))
  return jax.lax.complex(real, imag)


@dataclasses.dataclass(frozen=True)
class Hamiltonian:
  """A system's Hamiltonian as a run evaluates it (`of`): the Laplacian operator of the
  kinetic term, the Coulomb energy, the nuclei and their ECPs. Its methods give a
  wavefunction's local energy."""
  laplacian: laplacians.Method  # The kinetic term's Laplacian operator, resolved.
  coulomb: coulomb.Coulomb  # V_ee + V_en + V_nn (Ha): the 1/r sums, or the cell's Ewald sum.
  charges: np.ndarray  # (M,) e, the nuclei's (effective ones with ECPs).
  positions: np.ndarray  # (M, 3) bohr, the system's own nuclei (where no geometry is given).
  ecp: Optional[tuple] = None  # One ecp.Ecp or None per atom; None without ECPs.

  def nuclei(self, geometry: Optional[systems.Geometry], dtype) -> jax.Array:
    """The nuclear positions (M, 3) bohr in `dtype`: those of `geometry`, or with None the
    system's own (a constant of the program)."""
    return jnp.asarray(self.positions if geometry is None else geometry.positions, dtype)

  def ecp_energy(self, apply: Callable) -> Optional[Callable]:
    """(params, x (3N,), atoms=None) -> the ECPs' energy (), Ha, of the signed wavefunction
    `apply(params, x[, atoms]) -> (sign, log|psi|)` (ecp.make_ecp_energy); None without
    ECPs."""
    return None if self.ecp is None else ecp.make_ecp_energy(apply, self.positions, self.ecp)

  def nonlocal_elements(self, apply: Callable) -> Optional[Callable]:
    """(params, x (3N,), i, sign, log|psi|, atoms=None) -> ecp.Elements: the non-local ECP
    operator's matrix elements V_x'x psi(x') / psi(x) of electron i of one configuration
    (ecp.make_nonlocal_elements) for the signed wavefunction `apply`; None without a
    non-local channel."""
    return (None if self.ecp is None else
            ecp.make_nonlocal_elements(apply, self.positions, self.ecp))

  def local_energy(self, log_psi: Callable, apply: Optional[Callable] = None,
                   log_psi_phase: Optional[Callable] = None,
                   with_gradient: bool = False) -> Callable:
    """(params, x (3N,), geometry=None) -> E_L (), Ha, the nuclei where `geometry` (a
    systems.Geometry) puts them, or with None at the system's own positions. `log_psi(params,
    x, atoms)`, as a Network's (atoms: the positions (M, 3)), is called as log_psi(params, x)
    without a geometry, so that a function of a fixed geometry needs no `atoms`; so are
    `apply` and `log_psi_phase`. For log_psi of K states, (K,) each state's. With ECPs their
    energy is added, which needs the signed wavefunction `apply(params, x, atoms=None) ->
    (sign, log|psi|)`. With `log_psi_phase(params, x, atoms=None) -> (log|psi|, theta)` (a
    complex wavefunction) E_L is complex, differentiated through it. with_gradient: (E_L,
    grad_x log|psi| (3N,)), the gradient that the Laplacian method computes anyway."""
    complex_output = log_psi_phase is not None
    local_energy = self._kinetic_and_potential(
        log_psi_phase if complex_output else log_psi, with_gradient, complex_output)
    if self.ecp is not None and apply is None:
      raise ValueError('a system with effective core potentials needs `apply`')
    ecp_energy = None if apply is None else self.ecp_energy(apply)

    def total(params, x, geometry=None):
      out = local_energy(params, x, self.nuclei(geometry, x.dtype),
                         systems.network_arguments(geometry), scale_of(geometry))
      if ecp_energy is None:
        return out
      e_ecp = ecp_energy(params, x, None if geometry is None else geometry.positions)
      return (out[0] + e_ecp, out[1]) if with_gradient else out + e_ecp

    return total

  def local_energy_at(self, log_psi: Callable, with_gradient: bool = False) -> Callable:
    """(params, x (3N,), atoms (M, 3)) -> E_L (), Ha, without the ECPs' energy, the nuclei
    placed at `atoms` (bohr) and `log_psi(params, x, atoms) -> log|psi|`; with_gradient:
    (E_L, grad_x log|psi| (3N,)), the gradient that the Laplacian method computes anyway.
    For log_psi of K states, (K,) each state's local energy (and gradients (K, 3N))."""
    local_energy = self._kinetic_and_potential(log_psi, with_gradient, False)
    return lambda params, x, atoms: local_energy(params, x, atoms, (atoms,))

  def local_energy_and_gradient(self, log_psi: Callable,
                                log_psi_phase: Optional[Callable] = None) -> Callable:
    """(params, x (3N,), geometry=None) -> (E_L (), Ha, without the ECPs' energy; grad_x
    log|psi| (3N,), the gradient that the Laplacian method computes anyway), the nuclei
    where `geometry` puts them or, with None, the system's own; log_psi(params, x, atoms)
    takes the same nuclei, or with none (the electron gas) is called as log_psi(params, x)
    (its network's own centre). With `log_psi_phase(params, x, atoms=None) ->
    (log|psi|, theta)` (a complex wavefunction) E_L is the real part Re(H psi / psi), the
    fixed-phase local energy (its kinetic term holds +|grad theta|^2 / 2)."""
    complex_output = log_psi_phase is not None
    local_energy = self._kinetic_and_potential(
        log_psi_phase if complex_output else log_psi, True, complex_output)

    def energy_and_gradient(params, x, geometry=None):
      nuclei = self.nuclei(geometry, x.dtype)
      arguments = (systems.network_arguments(geometry) if geometry is not None else
                   (nuclei,) if nuclei.shape[0] else ())
      e_l, g = local_energy(params, x, nuclei, arguments, scale_of(geometry))
      return jnp.real(e_l), g

    return energy_and_gradient

  def _kinetic_and_potential(self, log_psi: Callable, with_gradient: bool,
                             complex_output: bool) -> Callable:
    """(params, x, nuclei (M, 3), arguments, scale=None) -> E_L without the ECPs', whose
    Coulomb energy takes the nuclei at `nuclei` in the cell scaled by `scale` (None: as it
    is) and whose log_psi takes the trailing `arguments` (systems.network_arguments); with ()
    log_psi(params, x) is called, the function's own positions (for a network, constants of
    its program)."""
    laplacian, potential, charges = self.laplacian, scaled(self.coulomb), self.charges

    def local_energy(params, x, nuclei, arguments, scale=None):
      z = jnp.asarray(charges, x.dtype)
      lap, g = laplacian(lambda y: log_psi(params, y, *arguments))(x)
      if complex_output:
        kinetic, g = complex_kinetic(lap, g), g[0]
      else:
        kinetic = -0.5 * (lap + jnp.sum(g * g, axis=-1))
      e_l = kinetic + potential(x, nuclei, z, scale)
      return (e_l, g) if with_gradient else e_l

    return local_energy


def scale_of(geometry: Optional[systems.Geometry]):
  """The scale of `geometry`'s cell (systems.Geometry.scale), or None."""
  return None if geometry is None else geometry.scale


def scaled(potential: coulomb.Coulomb) -> Callable:
  """(x, nuclei, charges, scale=None) -> the Coulomb energy `potential` of a cell as it is,
  or in the cell scaled by `scale` s: the energy of x / s and nuclei / s there, over s (a
  Coulomb energy is homogeneous of degree -1 in every length, the Ewald sum's as well)."""

  def energy(x, nuclei, charges, scale=None):
    if scale is None:
      return potential(x, nuclei, charges)
    return potential(x / scale, nuclei / scale, charges) / scale

  return energy


def of(system: systems.System, laplacian: laplacians.Method,
       dtype=jnp.float32) -> Hamiltonian:
  """The Hamiltonian of `system` with the Laplacian method `laplacian`: its Coulomb energy as
  its boundary gives it (the Ewald sum in its cell, converged for `dtype`, the walkers'; or
  the open-boundary sums), its nuclei and their ECPs."""
  return Hamiltonian(laplacian,
                     system.boundary.coulomb(system.n_electrons, len(system.charges), dtype),
                     np.asarray(system.charges), np.asarray(system.positions),
                     system.ecp if system.has_ecp else None)
