"""Local energy E_L = -1/2 (lap log|psi| + |grad log|psi||^2) + V_ee + V_en + V_nn, in Ha,
plus the effective core potentials' energy (ecp.py) where atoms have them; for a complex
wavefunction the kinetic term is -1/2 (lap log psi + (grad log psi)^2) of log psi = log|psi|
+ i theta (`complex_kinetic`), and E_L complex. The Coulomb
terms are a `coulomb.Coulomb`: plain 1/r sums for open boundaries (`molecular_coulomb`),
the Ewald sum for periodic systems (ewald.py).

Everything here acts on ONE configuration x (3N,); callers vmap over walkers.
The Laplacian method is chosen by name from `LAPLACIANS`.
"""

import functools
from typing import Callable, Optional, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.environment import packages
from ferminet_fast.physics import coulomb, ecp, ewald, systems

LogPsi = Callable[[jax.Array], jax.Array]  # x (3N,) -> log|psi| () or (K,) for K states


class Laplacian(Protocol):
  """Builds, from f = log|psi| of one configuration, x -> (lap f (), grad f (3N,)); for a
  vector f (K,) of several states, (lap f (K,), grad f (K, 3N))."""

  def __call__(self, f: LogPsi) -> Callable[[jax.Array], tuple]:
    ...


def laplacian_jacfwd(f: LogPsi) -> Callable[[jax.Array], tuple]:
  """Forward-over-reverse Hessian, jacfwd(grad f), and its trace.

  The 3N x 3N Hessian is formed (3N tangents pushed through grad at once) and only
  its diagonal summed; the gradient comes out of the same pass as the auxiliary value.
  """

  def lap(x):
    grad_f = _gradient(f, x)

    def grad_twice(y):
      g = grad_f(y)
      return g, g

    hessian, g = jax.jacfwd(grad_twice, has_aux=True)(x)
    return jnp.trace(hessian, axis1=-2, axis2=-1), g

  return lap


def laplacian_jvp_loop(f: LogPsi) -> Callable[[jax.Array], tuple]:
  """sum_i d/dx_i (grad f)_i as a loop of 3N Jacobian-vector products through grad f.

  `linearize` evaluates grad f once; each loop step pushes one unit tangent, so
  memory stays that of a single gradient whatever N is.
  """

  def lap(x):
    g, grad_jvp = jax.linearize(_gradient(f, x), x)
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    total = jax.lax.fori_loop(0, x.shape[0], lambda i, acc: acc + grad_jvp(eye[i])[..., i],
                              jnp.zeros(g.shape[:-1], x.dtype))
    return total, g

  return lap


def _folx(sparsity_threshold: int) -> Laplacian:
  """Forward Laplacian (Li et al. 2023) through folx: value, gradient and Laplacian are
  pushed forward together in one pass. `sparsity_threshold` > 0 lets folx keep per-electron
  sparsity of the Jacobian; 0 is dense."""

  def make(f: LogPsi) -> Callable[[jax.Array], tuple]:
    import folx  # Optional dependency: pip install 'ferminet_fast[folx]'.
    _register_folx_barrier(folx)
    forward = folx.forward_laplacian(f, sparsity_threshold)

    def fn(x):
      out = forward(x)
      try:
        grad = out.jacobian.dense_array  # (3N,), or (3N, K) for K states
        if grad.ndim > 1:
          grad = grad.T
      except jax.errors.ConcretizationTypeError:
        # folx cannot densify a Jacobian that stays sparse to the output (a log|psi| that
        # is a sum of per-electron terms) under vmap; take the gradient directly then.
        grad = _gradient(f, x)(x)
      return out.laplacian, grad.reshape(out.laplacian.shape + x.shape)

    return fn

  return make


def _folx_barrier(args, kwargs, sparsity_threshold):
  """folx's rule for jax.lax.optimization_barrier (the identity): each operand's value,
  Jacobian entries and Laplacian pass through one barrier, the Jacobian's sparsity pattern
  unchanged. Without it folx falls back to its rule for a general function, through the
  function's Hessian, and warns on every periodic network that the call may be slow."""
  from folx.api import FwdJacobian, FwdLaplArray
  carried = [(a.x, a.jacobian.data, a.laplacian) if isinstance(a, FwdLaplArray) else a
             for a in args]
  out = jax.lax.optimization_barrier(carried)
  return [FwdLaplArray(o[0], FwdJacobian(o[1], a.jacobian.x0_idx), o[2])
          if isinstance(a, FwdLaplArray) else o for a, o in zip(args, out)]


@functools.cache
def _barrier_primitive():
  """jax.lax.optimization_barrier's primitive, found once from its jaxpr (JAX does not
  export it)."""
  return jax.make_jaxpr(jax.lax.optimization_barrier)((0.0,)).eqns[0].primitive


def _register_folx_barrier(folx) -> None:
  """Registers _folx_barrier for the barrier's primitive, once."""
  barrier = _barrier_primitive()
  if not folx.wrapped_functions.is_registered(barrier):
    folx.register_function(barrier, _folx_barrier)


def _gradient(f: LogPsi, x: jax.Array) -> Callable:
  """grad f for a scalar f; the Jacobian (K, 3N), by K reverse passes, for f of K states."""
  return jax.grad(f) if jax.eval_shape(f, x).shape == () else jax.jacrev(f)


LAPLACIANS = {
    'jacfwd': laplacian_jacfwd,
    'jvp_loop': laplacian_jvp_loop,
    'folx': _folx(0),
    'folx_sparse': _folx(6),  # FermiNet's choice of threshold.
}
LAPLACIAN_PACKAGES = {'folx': 'folx', 'folx_sparse': 'folx'}  # Method -> package it needs.


def available_laplacians() -> list:
  """The methods whose packages are installed."""
  return [m for m in LAPLACIANS if m not in LAPLACIAN_PACKAGES
          or packages.installed(LAPLACIAN_PACKAGES[m])]


def nuclear_repulsion(atoms: jax.Array, charges: jax.Array) -> jax.Array:
  """V_nn = sum_{I<J} Z_I Z_J / |R_I - R_J| (Ha) for atoms (M, 3) bohr and charges (M,)."""
  if atoms.shape[0] < 2:
    return jnp.zeros((), atoms.dtype)
  i, j = np.triu_indices(atoms.shape[0], k=1)
  return jnp.sum(charges[i] * charges[j] / jnp.linalg.norm(atoms[i] - atoms[j], axis=-1))


def potential_energy(x: jax.Array, atoms: jax.Array, charges: jax.Array,
                     v_nn) -> jax.Array:
  """V_ee + V_en + V_nn (Ha) for x (3N,), atoms (M, 3) and charges (M,)."""
  r = x.reshape(-1, 3)
  n = r.shape[0]
  r_en = jnp.linalg.norm(r[:, None, :] - atoms[None], axis=-1)
  v = -jnp.sum(charges[None] / r_en) + v_nn
  if n > 1:
    i, j = np.triu_indices(n, k=1)
    v = v + jnp.sum(1.0 / jnp.linalg.norm(r[i] - r[j], axis=-1))
  return v


def molecular_coulomb(x: jax.Array, atoms: jax.Array, charges: jax.Array) -> jax.Array:
  """V_ee + V_en + V_nn (Ha) with open boundaries: the molecular `coulomb.Coulomb`."""
  return potential_energy(x, atoms, charges, nuclear_repulsion(atoms, charges))


def coulomb_of(system: systems.System, dtype=jnp.float32) -> coulomb.Coulomb:
  """The system's Coulomb energy: the Ewald sum in its cell, converged for `dtype`, or the
  open-boundary sums."""
  if not system.periodic:
    return molecular_coulomb
  precision = 'float64' if np.dtype(dtype) == np.float64 else 'float32'
  return ewald.make_ewald(system.lattice, system.n_electrons, len(system.charges), precision)


def complex_kinetic(lap: jax.Array, g: jax.Array) -> jax.Array:
  """The local kinetic energy -1/2 (lap log psi + (grad log psi)^2) (), complex, Ha, of a
  complex log psi = L + i theta from the Laplacians (2,) and gradients (2, 3N) of L and
  theta: real part -1/2 (lap L + |grad L|^2 - |grad theta|^2), imaginary part -1/2 (lap
  theta + 2 grad L . grad theta)."""
  real = -0.5 * (lap[0] + jnp.sum(g[0] * g[0]) - jnp.sum(g[1] * g[1]))
  imag = -0.5 * (lap[1] + 2.0 * jnp.sum(g[0] * g[1]))
  return jax.lax.complex(real, imag)


def make_local_energy_at(log_psi_at: Callable, charges, laplacian: str = 'jvp_loop',
                         with_gradient: bool = False,
                         potential: coulomb.Coulomb = molecular_coulomb,
                         complex_output: bool = False) -> Callable:
  """(params, x (3N,), atoms (M, 3)) -> E_L (), Ha, for nuclei of `charges` (M,) placed at
  `atoms` (bohr) and `log_psi_at(params, x, atoms) -> log|psi|`; with_gradient: (E_L,
  grad_x log|psi| (3N,)), the gradient that the Laplacian method computes anyway. For
  log_psi_at of K states, (K,) each state's local energy (and gradients (K, 3N)).
  `potential`: the Coulomb energy (open boundaries by default). complex_output: log_psi_at
  gives (log|psi|, theta) (2,) of a complex wavefunction, and E_L is complex (its real part
  is the energy's estimator, its imaginary part enters the gradient: vmc/loss.py)."""
  method = LAPLACIANS[laplacian]
  charges = np.asarray(charges)

  def local_energy(params, x, atoms):
    z = jnp.asarray(charges, x.dtype)
    lap, g = method(lambda y: log_psi_at(params, y, atoms))(x)
    if complex_output:
      kinetic, g = complex_kinetic(lap, g), g[0]
    else:
      kinetic = -0.5 * (lap + jnp.sum(g * g, axis=-1))
    e_l = kinetic + potential(x, atoms, z)
    return (e_l, g) if with_gradient else e_l

  return local_energy


def make_local_energy(log_psi: Callable, system: systems.System, laplacian: str = 'jvp_loop',
                      apply: Optional[Callable] = None, dtype=jnp.float32,
                      log_psi_phase: Optional[Callable] = None) -> Callable:
  """(params, x (3N,)) -> E_L (), Ha, with the named Laplacian method, nuclei fixed. A system
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

