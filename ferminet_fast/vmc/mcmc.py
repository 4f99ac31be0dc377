"""Metropolis-Hastings sampling of |psi|^2, entirely on the device.

Walkers are a batch x (B, 3N) with their current log|psi| (B,). A sweep of `steps`
all-electron Gaussian moves is one `lax.fori_loop` that carries the positions,
log|psi|, PRNG key and acceptance count, so each step costs exactly one batched
network evaluation (the proposal's); the current value is never recomputed.

The move width is held fixed within a sweep (so a sweep is an exact MH kernel for
|psi|^2) and adapted between sweeps toward a target acceptance, multiplicatively:
width *= exp(rate * (pmove - target)). From FermiNet's starting width of 0.02 bohr
this reaches the working width within a few sweeps of burn-in instead of the
hundreds of steps a fixed x1.1 per 100 steps schedule needs.

A walker whose position or log|psi| became non-finite is restarted from a healthy
walker at the start of the next sweep (see `replace_nonfinite`).

In a periodic cell every proposal is wrapped back into the cell (the system's
boundary, physics/boundary.py; with open boundaries wrapping is the identity). The
wavefunction is lattice-periodic by construction (its features are), so wrapping changes
neither |psi|^2 nor the symmetric proposal on the torus; it keeps the coordinates small,
so float32 keeps its resolution however far the walkers diffuse, and saved walkers lie
in the cell.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import systems

MIN_WIDTH, MAX_WIDTH = 1e-3, 10.0  # bohr; keeps a pathological sweep from collapsing the walk.


class Walkers(NamedTuple):
  """The Markov chain: positions (B, 3N) bohr, log|psi| (B,), proposal width () bohr."""
  x: jax.Array
  log_psi: jax.Array
  width: jax.Array


def init_positions(key: jax.Array, system: systems.System, batch: int, init_width: float,
                   dtype=jnp.float32) -> jax.Array:
  """(batch, 3N) positions: each electron Gaussian-distributed around its home nucleus;
  (batch, K 3N) for K states, K independent configurations per walker. In a periodic cell
  they are wrapped into it; a system without nuclei (the electron gas) starts uniform in
  its cell. Over a set of G geometries (system.surface), G groups of batch / G walkers in a
  row, each around the nuclei of its own geometry."""
  scales = None  # A scan of the cell: each walker's cell's scale (batch,).
  if system.surface is not None and system.surface.scales is not None:
    scales = jnp.asarray(np.repeat(system.surface.scales, batch // system.geometry_count), dtype)
  if not len(system.charges):
    s = system.boundary.uniform_positions(
        key, (batch, system.n_electrons * system.states), dtype)
    s = s.reshape(batch, -1)
    return s if scales is None else s * scales[:, None]
  homes = systems.electron_homes(system)
  if system.surface is not None:
    stack = np.asarray(system.surface.positions)
    per = batch // len(stack)
    centres = jnp.asarray(np.repeat(stack[:, homes].reshape(len(stack), -1), per, axis=0),
                          dtype)  # (batch, 3N)
    x = centres + init_width * jax.random.normal(key, centres.shape, dtype)
    return x if scales is None else system.boundary.wrap(x, scales)
  centres = jnp.asarray(np.tile(system.positions[homes].reshape(-1), system.states), dtype)
  x = centres[None] + init_width * jax.random.normal(key, (batch, centres.shape[0]), dtype)
  return system.boundary.wrap(x)


def make_sweep(batch_log_psi: Callable, steps: int,
               wrap: Callable = lambda x, geometry=None: x) -> Callable:
  """Builds sweep(params, walkers, key, geometry=None) -> (walkers, pmove) doing `steps` MH
  moves of |psi|^2 with the nuclei of `geometry` (shared by the walkers; None: the system's
  own).

  `batch_log_psi(params, x (B, 3N)[, geometry]) -> (B,)` (called without the geometry when
  it is None). pmove is the fraction of accepted moves. `wrap(x (B, 3N)[, geometry]) -> x`,
  applied to each proposal: the identity by default; into a periodic cell, scaled by a
  systems.Geometry's scale, with systems.wrap_in(the system's boundary).
  """

  def sweep(params, walkers: Walkers, key, geometry=None):
    at = () if geometry is None else (geometry,)
    width = walkers.width
    walkers = replace_nonfinite(walkers)

    def step(i, carry):
      x, log_psi, accepted = carry
      k_move, k_accept = jax.random.split(jax.random.fold_in(key, i))
      x_new = x + width * jax.random.normal(k_move, x.shape, x.dtype)
      x_new = wrap(x_new, *at)
      log_psi_new = batch_log_psi(params, x_new, *at)
      # Accept with probability min(1, |psi'|^2 / |psi|^2), compared in log space.
      log_u = jnp.log(jax.random.uniform(k_accept, log_psi.shape, x.dtype))
      accept = log_u < 2.0 * (log_psi_new - log_psi)
      x = jnp.where(accept[:, None], x_new, x)
      log_psi = jnp.where(accept, log_psi_new, log_psi)
      return x, log_psi, accepted + jnp.sum(accept, dtype=accepted.dtype)

    x, log_psi, accepted = jax.lax.fori_loop(
        0, steps, step, (walkers.x, walkers.log_psi, jnp.zeros((), jnp.int32)))
    pmove = accepted / (steps * walkers.x.shape[0])
    return Walkers(x, log_psi, width), pmove.astype(walkers.x.dtype)

  return sweep


def replace_nonfinite(walkers: Walkers) -> Walkers:
  """Walkers at a non-finite position or log|psi| (a chain that can never move again:
  every proposal from NaN is NaN) restart from the first healthy walker's state. Cheap
  (elementwise); a no-op in a healthy run. With no healthy walker all stay as they are.

  With the walkers sharded over devices, finding the donor and fetching its state are
  collectives: two reductions, one after the other (the donor's index, then its position
  and log|psi| as one row), instead of gathering every walker's state to every device."""
  b = walkers.log_psi.shape[0]
  ok = jnp.isfinite(walkers.log_psi) & jnp.all(jnp.isfinite(walkers.x), axis=1)
  donor = jnp.min(jnp.where(ok, jnp.arange(b), b))  # b: no healthy walker.
  rows = jnp.concatenate([walkers.x, walkers.log_psi[:, None]], axis=1)
  # The donor's row as a masked sum: a reduction that waits for the donor's index (an
  # indexed read would gather every row at once, beside that index's own reduction).
  row = jnp.sum(jnp.where((jnp.arange(b) == donor)[:, None], rows, 0), axis=0)
  keep = ok | (donor == b)
  return walkers._replace(x=jnp.where(keep[:, None], walkers.x, row[:-1]),
                          log_psi=jnp.where(keep, walkers.log_psi, row[-1]))


def adapt_width(width: jax.Array, pmove: jax.Array, target: float, rate: float) -> jax.Array:
  """Multiplicative step toward the target acceptance, bounded to [MIN_WIDTH, MAX_WIDTH]."""
  return jnp.clip(width * jnp.exp(rate * (pmove - target)), MIN_WIDTH, MAX_WIDTH)


def width_text(width) -> str:
  """The move width in bohr, or over a set of geometries the range of theirs, as text."""
  w = np.asarray(jax.device_get(width))
  return f'{float(w):.3f}' if w.ndim == 0 else f'{w.min():.3f}-{w.max():.3f}'


def n_sweeps(steps: int, per_sweep: int) -> int:
  """Number of sweeps of `per_sweep` moves covering `steps` moves."""
  return int(np.ceil(steps / per_sweep)) if steps > 0 else 0


def as_chains(walkers: Walkers, g: int) -> Walkers:
  """B walkers in a row as G chains of B / G (a chain per geometry of a surface, each with
  its own width (G,)): x (G, W, 3N), log|psi| (G, W)."""
  return Walkers(walkers.x.reshape(g, -1, walkers.x.shape[-1]), walkers.log_psi.reshape(g, -1),
                 walkers.width)


def in_a_row(chains: Walkers) -> Walkers:
  """The inverse of as_chains."""
  return Walkers(chains.x.reshape(-1, chains.x.shape[-1]), chains.log_psi.reshape(-1),
                 chains.width)


def cycled(walkers: Walkers, g: int, per_chain: int) -> Walkers:
  """G chains of B / G walkers in a row (host arrays) as G chains of `per_chain`: each
  chain's walkers repeated in turn (or its first `per_chain`), each chain's width kept. The
  copies start where the originals are and part with the moves of a burn-in."""
  chains = as_chains(walkers, g)
  take = np.arange(per_chain) % chains.x.shape[1]
  return in_a_row(Walkers(chains.x[:, take], chains.log_psi[:, take], chains.width))
