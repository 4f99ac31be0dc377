"""The VMC energy and its gradient.

E = <E_L> over walkers drawn from |psi|^2. Its gradient with respect to the
parameters is 2 <(E_L - <E_L>) d log|psi|>, which does not differentiate E_L
itself; a custom JVP supplies it, so `jax.grad` of the energy is the VMC gradient
and the Laplacian is never differentiated. Local energies entering the gradient
are clipped (outliers near nodes and nuclei otherwise dominate it); the reported
energy is the unclipped mean.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp


class EnergyAux(NamedTuple):
  local_energy: jax.Array  # (B,) Ha, unclipped.
  variance: jax.Array  # () Ha^2, of the unclipped local energies.


def _window(centre, scale, e, k):
  return jnp.clip(e, centre - k * scale, centre + k * scale)


def clip_mean_absdev(e: jax.Array, k: float) -> jax.Array:
  """FermiNet's: mean +- k * mean |E - mean|."""
  centre = jnp.mean(e)
  return _window(centre, jnp.mean(jnp.abs(e - centre)), e, k)


def clip_median_absdev(e: jax.Array, k: float) -> jax.Array:
  """median +- k * mean |E - median|: the median does not move with the outliers it cuts."""
  centre = jnp.median(e)
  return _window(centre, jnp.mean(jnp.abs(e - centre)), e, k)


def clip_median_mad(e: jax.Array, k: float) -> jax.Array:
  """median +- k * median |E - median|: most robust, cuts more of a heavy tail."""
  centre = jnp.median(e)
  return _window(centre, jnp.median(jnp.abs(e - centre)), e, k)


CLIPPING = {
    'mean_absdev': clip_mean_absdev,
    'median_absdev': clip_median_absdev,
    'median_mad': clip_median_mad,
}


def batch_local_energies(local_energy: Callable, chunk_size: int = 0) -> Callable:
  """(params, x (B, 3N)) -> (B,): vmapped, or in chunks of `chunk_size` walkers (a loop of
  vmaps, bounding the memory of the Laplacian) when chunk_size > 0."""
  if not chunk_size:
    return jax.vmap(local_energy, in_axes=(None, 0))

  def batched(params, x):
    return jax.lax.map(lambda xi: local_energy(params, xi), x, batch_size=chunk_size)

  return batched


def make_energy(log_psi: Callable, local_energy: Callable, clip_method: str,
                clip_k: float, chunk_size: int = 0) -> Callable:
  """energy(params, x (B, 3N)) -> (E (), EnergyAux), differentiable in params.

  log_psi and local_energy act on one configuration: (params, x (3N,)) -> ().
  """
  batch_log_psi = jax.vmap(log_psi, in_axes=(None, 0))
  batch_local_energy = batch_local_energies(local_energy, chunk_size)
  clip = CLIPPING[clip_method]

  @jax.custom_jvp
  def energy(params, x):
    e_l = batch_local_energy(params, x)
    mean = jnp.mean(e_l)
    return mean, EnergyAux(e_l, jnp.mean((e_l - mean) ** 2))

  @energy.defjvp
  def energy_jvp(primals, tangents):
    params, x = primals
    mean, aux = energy(params, x)
    e_l = clip(aux.local_energy, clip_k) if clip_k > 0 else aux.local_energy
    diff = e_l - jnp.mean(e_l)
    _, dlog_psi = jax.jvp(lambda p: batch_log_psi(p, x), (params,), (tangents[0],))
    tangent = 2.0 * jnp.mean(diff * dlog_psi)
    zeros = jax.tree.map(jnp.zeros_like, aux)
    return (mean, aux), (tangent, zeros)

  return energy
