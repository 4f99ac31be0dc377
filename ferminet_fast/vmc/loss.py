"""The VMC energy and its gradient.

E = <E_L> over walkers drawn from |psi|^2. Its gradient with respect to the
parameters is 2 <(E_L - <E_L>) d log|psi|>, which does not differentiate E_L
itself; a custom JVP supplies it, so `jax.grad` of the energy is the VMC gradient
and the Laplacian is never differentiated. Local energies entering the gradient
are clipped (outliers near nodes and nuclei otherwise dominate it); the reported
energy is the unclipped mean. Non-finite local energies (a walker on a node or a
nucleus) are left out of both, and counted.

Near a node of an inexact psi the score d log|psi| / d params grows as 1/s, s the distance
to the node, as does E_L there. A window whose scale is a mean deviation widens with such a
walker and cuts its weight only to about k |E_L| / B; the median window bounds the weight,
but no window bounds the score, so one walker close to a node can set the direction of a
whole step. With a node cutoff eps the weights are multiplied by Pathak and Wagner's factor
f(s / eps) (observables.node_regularisation; AIP Adv. 10, 085213 (2020)), s estimated as
1 / |grad_x log|psi||: each term of the gradient then has finite moments, at a bias of
order eps^3.

An optional penalty P_L (a local estimator of another observable, already weighted, such
as lambda S^2_L) is added to E_L in the gradient only: the update then lowers
<E_L> + <P_L>, while the reported energy stays <E_L>.
"""

import math
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import batching, choices
from ferminet_fast.physics import excited_states, hamiltonian, observables, systems


class EnergyAux(NamedTuple):
  local_energy: jax.Array  # (B,) Ha, unclipped.
  variance: jax.Array  # () Ha^2, of the unclipped finite local energies.
  nonfinite: jax.Array  # () count (float dtype) of walkers whose local energy is NaN or inf.
  # (B,) Ha: the clipped local energies minus their mean, 0 for non-finite ones: the weights
  # of d log|psi| in the gradient, and what sample-space optimizers (SPRING) fit.
  centred: jax.Array
  clipped: jax.Array  # () count (float dtype) of finite walkers the clipping window moved.
  # A complex wavefunction: (B,) Ha, the same of the imaginary parts of the local energies,
  # the weights of d theta (the phase) in the gradient; None for a real one.
  centred_imaginary: Optional[jax.Array] = None


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


MEDIAN_ABSDEV = choices.Choice('median_absdev', clip_median_absdev,
                               'median, mean |E - median|')
MEAN_ABSDEV = choices.Choice('mean_absdev', clip_mean_absdev, "FermiNet's: mean, mean |E - mean|")
MEDIAN_MAD = choices.Choice('median_mad', clip_median_mad, 'median, median |E - median|: most '
                            'robust, cuts more of a heavy tail')
CLIPPING = choices.table(MEDIAN_ABSDEV, MEAN_ABSDEV, MEDIAN_MAD)


def batch_local_energies(local_energy: Callable, chunk_size: int = 0) -> Callable:
  """(params, x (B, 3N), geometry=None) -> (B,) (each output of local_energy with a leading
  axis of B): vmapped, or in chunks of `chunk_size`
  walkers (a loop of vmaps) when 0 < chunk_size < B. `geometry` (a systems.Geometry),
  shared by the walkers, is passed on as local_energy(params, x, geometry); without it,
  local_energy(params, x) is called.

  Chunk j holds walkers j, j + n, j + 2n, ... (n chunks), so that with the walkers split
  over devices in contiguous blocks each chunk takes the same number from every device
  and no walker moves between devices."""

  def batched(params, x, geometry=None):
    one = (local_energy if geometry is None
           else lambda params, xi: local_energy(params, xi, geometry))
    vmapped = jax.vmap(one, in_axes=(None, 0))
    b = x.shape[0]
    n = -(-b // chunk_size) if chunk_size else 1
    if n == 1:
      return vmapped(params, x)
    if b % n:  # Uneven: contiguous chunks and a remainder (lax.map's own batching).
      return jax.lax.map(lambda xi: one(params, xi), x, batch_size=chunk_size)
    strided = jnp.swapaxes(x.reshape(b // n, n, *x.shape[1:]), 0, 1)  # (n, B / n, 3N)
    out = jax.lax.map(lambda xs: vmapped(params, xs), strided)  # (n, B / n, ...)
    return jax.tree.map(lambda o: jnp.swapaxes(o, 0, 1).reshape(b, *o.shape[2:]), out)

  return batched


def chunk_per_geometry(chunk_size: int, geometries: int) -> int:
  """Walkers per chunk of each geometry's local energies where those of `geometries`
  geometries are computed together (batch_local_energies vmapped over them, so that each
  of its chunks holds that many geometries' at once): the run's chunk of `chunk_size`
  walkers divided among them, at least one; 0 (all at once) stays 0."""
  return max(1, chunk_size // geometries) if chunk_size else 0


# Bytes of one chunk's largest forward-Laplacian intermediate that run fastest on CPU: small
# enough to stay in a core's caches. The sweeps over chunk sizes that chose it are in
# BENCHMARKS.md ("Local energies in cache-sized chunks").
CPU_CHUNK_BYTES = 2 * 2**20


def largest_intermediate(f: Callable, *args) -> int:
  """Elements of the largest array that f(*args) computes from its last argument (args may
  be jax.ShapeDtypeStructs): what a forward Laplacian carries 3N tangents of. Nested calls
  (pjit, custom derivatives) count by their outputs."""
  closed = jax.make_jaxpr(f)(*args)
  depends = set(closed.jaxpr.invars[-len(jax.tree.leaves(args[-1])):])
  largest = 0
  for eqn in closed.jaxpr.eqns:
    if any(not hasattr(v, 'val') and v in depends for v in eqn.invars):  # (Literals have .val)
      for v in eqn.outvars:
        depends.add(v)
        largest = max(largest, int(np.prod(v.aval.shape)))
  return largest


def auto_chunk_size(log_psi: Callable, params, n_coords: int, dtype,
                    devices: Sequence[jax.Device]) -> int:
  """Walkers per chunk (summed over `devices`) for local energies; 0: all at once.

  On CPU the forward Laplacian's tangents (3N per element of each intermediate) are
  streamed through memory many times; a chunk whose largest tangent array fits in about
  CPU_CHUNK_BYTES stays in cache and runs faster (BENCHMARKS.md). On GPUs
  and TPUs the whole batch at once keeps the device busy: 0."""
  if devices[0].platform != 'cpu':
    return 0
  x = jax.ShapeDtypeStruct((n_coords,), dtype)
  per_walker = n_coords * largest_intermediate(log_psi, params, x) * np.dtype(dtype).itemsize
  per_device = 2 ** max(0, round(math.log2(CPU_CHUNK_BYTES / max(per_walker, 1))))
  return per_device * len(devices)


def gradient_weights(aux: EnergyAux, imaginary: bool = False) -> jax.Array:
  """(B,) dE / d log|psi(x_i)|: the VMC gradient is sum_i w_i d log|psi(x_i)| / d params
  with w_i = 2 (E_L,i - <E_L>) / n over the n walkers with a finite local energy (clipped,
  centred: aux.centred; 0 for the others). imaginary: the weights of d theta of a complex
  wavefunction instead, 2 (Im E_L,i - <Im E_L>) / n (aux.centred_imaginary)."""
  n = jnp.maximum(aux.centred.shape[0] - aux.nonfinite, 1)
  return 2.0 * (aux.centred_imaginary if imaginary else aux.centred) / n


def make_energy(log_psi: Callable, local_energy: Callable, clip: choices.Choice,
                clip_k: float, chunk_size: int = 0, penalty: Optional[Callable] = None,
                log_psi_phase: Optional[Callable] = None, node_cutoff: float = 0.0) -> Callable:
  """energy(params, x (B, 3N), geometry=None) -> (E (), EnergyAux), differentiable in params
  (not in the geometry, whose tangent is dropped). `geometry` (a systems.Geometry) places
  the nuclei of every walker; None: the system's own, as local_energy and log_psi have them.

  `clip`: a record of CLIPPING, the window of the local energies in the gradient, of
  half-width clip_k (0: none). log_psi, local_energy and `penalty` (if given: added to E_L in
  the gradient only) act on one configuration: (params, x (3N,)) -> (); with a geometry,
  local_energy and penalty take it third, log_psi its positions (atoms (M, 3)). With
  `log_psi_phase` (params, x) -> (log|psi|, theta) (2,), the wavefunction is complex and so is local_energy: E is the mean of its
  real parts, and the gradient 2 <(Re E_L - E) d log|psi|> + 2 <Im E_L d theta>, both
  weights clipped and centred alike. With `node_cutoff` (eps, bohr; 0: none) local_energy
  returns (E_L, grad_x log|psi|) and every weight is multiplied by its walker's node factor
  f(s / eps) (module docstring)."""
  complex_output = log_psi_phase is not None
  batch_log_psi = batch_network(log_psi if log_psi_phase is None else log_psi_phase)
  batch_local_energy = batch_local_energies(local_energy, chunk_size)
  batch_penalty = batch_local_energies(penalty, chunk_size) if penalty else None

  def centred_clipped(e_l, finite, mean):
    """(the clipped local energies minus their mean, 0 for non-finite ones; how many
    finite ones the window moved)."""
    n = jnp.maximum(jnp.sum(finite), 1)
    e_l = jnp.where(finite, e_l, mean)
    kept = clip(e_l, clip_k) if clip_k > 0 else e_l
    moved = jnp.sum(finite & (kept != e_l)).astype(e_l.dtype)
    return jnp.where(finite, kept - jnp.sum(jnp.where(finite, kept, 0.0)) / n, 0.0), moved

  @jax.custom_jvp
  def energy(params, x, geometry=None):
    e_l = batch_local_energy(params, x, geometry)
    node = None
    if node_cutoff:
      e_l, g = e_l
      node = jax.vmap(lambda gi: observables.node_regularisation(gi, node_cutoff))(g)
    imag = None
    if complex_output:
      e_l, imag = jnp.real(e_l), jnp.imag(e_l)
    finite = jnp.isfinite(e_l) if imag is None else jnp.isfinite(e_l) & jnp.isfinite(imag)
    n = jnp.maximum(jnp.sum(finite), 1)
    mean = jnp.sum(jnp.where(finite, e_l, 0.0)) / n
    variance = jnp.sum(jnp.where(finite, (e_l - mean) ** 2, 0.0)) / n
    if batch_penalty is None:
      centred, clipped = centred_clipped(e_l, finite, mean)
    else:
      g_l = e_l + batch_penalty(params, x, geometry)
      finite = jnp.isfinite(g_l)
      centred, clipped = centred_clipped(g_l, finite, jnp.sum(jnp.where(finite, g_l, 0.0)) /
                                         jnp.maximum(jnp.sum(finite), 1))
    if imag is not None:
      imag, _ = centred_clipped(imag, finite, jnp.sum(jnp.where(finite, imag, 0.0)) / n)
    if node is not None:  # Non-finite walkers keep their weight 0 (their factor may be NaN).
      centred = jnp.where(finite, centred * node, 0.0)
      imag = None if imag is None else jnp.where(finite, imag * node, 0.0)
    e_l = jnp.where(finite, e_l, jnp.nan) if imag is not None else e_l
    return mean, EnergyAux(e_l, variance, jnp.sum(~finite).astype(e_l.dtype), centred, clipped,
                           imag)

  @energy.defjvp
  def energy_jvp(primals, tangents):
    params, x, geometry = primals
    mean, aux = energy(params, x, geometry)
    # Walkers with a non-finite local energy get zero weight. (Should log|psi|'s parameter
    # derivative itself be non-finite there, e.g. a walker at a NaN position, 0 * NaN
    # reaches the gradient and the step rejects the update; the next sweep restarts such
    # walkers, mcmc.replace_nonfinite.)
    _, dlog_psi = jax.jvp(lambda p: batch_log_psi(p, x, geometry), (params,), (tangents[0],))
    if complex_output:  # (B, 2): d log|psi| and d theta.
      tangent = (jnp.sum(gradient_weights(aux) * dlog_psi[:, 0])
                 + jnp.sum(gradient_weights(aux, imaginary=True) * dlog_psi[:, 1]))
    else:
      tangent = jnp.sum(gradient_weights(aux) * dlog_psi)
    zeros = jax.tree.map(jnp.zeros_like, aux)
    return (mean, aux), (tangent, zeros)

  return energy


def batch_network(f: Callable) -> Callable:
  """(params, x (B, 3N), geometry=None) -> f of each walker, for a network's function
  f(params, x (3N,), atoms=None, scale=None): called with the geometry's positions ((M, 3),
  shared by the walkers, or (B, M, 3), one geometry per walker) and a scaled cell's scale,
  or without them for None (the network's own positions, constants of its program)."""
  batched = batching.over_walkers(f)
  return lambda params, x, geometry=None: batched(
      params, x, *systems.network_arguments(geometry))


def make_local_energy(network, ham: hamiltonian.Hamiltonian,
                      with_gradient: bool = False) -> Callable:
  """(params, x, geometry=None) -> E_L (), Ha, of a networks.Network under the Hamiltonian
  `ham`: one state's local energy (complex for a complex wavefunction), or for several
  states that of the total wavefunction (the trace of the energy matrix); the nuclei of
  `geometry` (a systems.Geometry), or with None the system's own. with_gradient (one state):
  (E_L, grad_x log|psi| (3N,))."""
  if network.states == 1:
    return ham.local_energy(network.log_psi, network.apply, network.log_psi_phase,
                            with_gradient)
  if with_gradient:
    raise ValueError('the gradient of log|psi| is given for one state')
  matrix = excited_states.make_energy_matrix(network.apply_states, ham, network.states)
  return lambda params, x, geometry=None: jnp.trace(matrix(params, x, geometry))
