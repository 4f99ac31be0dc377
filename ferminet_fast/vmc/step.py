"""One jitted training step (MCMC -> local energy -> gradient -> optimizer) and its
ahead-of-time compilation; how its stages are timed is in profiling.py.

`train_step(state) -> (state, stats)` runs entirely on the device; its input
buffers are donated, and nothing in it returns to the host. Every function of the step
takes an optional last argument `geometry` (a systems.Geometry: where the nuclei are, data
of the program, so that one compiled step serves many geometries); None, the default,
traces the system's own positions into the program as constants. A run that anneals its
learning rate towards a time budget (optim.anneals_by_clock) also gives the step a `clock`,
the () fraction of the budget spent, as data (`Parts.clocked`).
"""

import dataclasses
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec
import numpy as np
import optax

from ferminet_fast import choices
from ferminet_fast.environment import dispatch, distributed
from ferminet_fast.optimizers import kfac as kfac_lib
from ferminet_fast.optimizers import optim
from ferminet_fast.physics import hamiltonian, laplacians, observables, systems
from ferminet_fast.vmc import loss, mcmc
from ferminet_fast.wavefunction import networks


class TrainState(NamedTuple):
  params: Any
  opt_state: Any
  walkers: mcmc.Walkers
  key: jax.Array
  step: jax.Array  # () int32, parameter updates done so far.


class StepStats(NamedTuple):
  """Per-step statistics, device scalars until the host asks for them."""
  energy: jax.Array  # Ha, unclipped mean local energy of the step's walkers.
  variance: jax.Array  # Ha^2, variance of the local energies.
  pmove: jax.Array  # Fraction of accepted MH moves in the step's sweep.
  width: jax.Array  # bohr, proposal width used in the sweep.
  lr: jax.Array  # Learning rate of the update applied (after any norm constraint); 0 if rejected.
  nonfinite: jax.Array  # Walkers whose local energy was NaN/inf (left out of E and gradient).
  rejected: jax.Array  # 1 if the update would have made a parameter non-finite (not applied).
  # What a collapse is looked for in: the gradient's and the applied update's Euclidean
  # norms over all parameters, and the fraction of walkers the clipping window moved.
  grad_norm: jax.Array
  update_norm: jax.Array
  clipped: jax.Array
  # How far the update moved the wavefunction, against how far the optimizer's own model
  # said it would (`fisher_steps`): the update's squared length in the Fisher metric as the
  # step's walkers see it, and as the optimizer measured it (KFAC: what its norm constraint
  # bounds). fisher_step is NaN where a step draws a subset of geometries.
  fisher_step: jax.Array
  model_step: jax.Array
  # Over a set of geometries (the fields above are then means over them, nonfinite a sum):
  # (G,) Ha, the mean local energy of each geometry's walkers; None for one geometry.
  energies: Optional[jax.Array] = None


@dataclasses.dataclass(frozen=True)
class Parts:
  """The pure functions a run is made of, built once from the settings and system. The
  step is their composition, sample -> energy_grad -> update; the stage timers
  (runtime/profiling.py) time the same functions."""
  network: networks.Network
  batch_log_psi: Callable  # (params, x (B, 3N), geometry=None) -> (B,)
  sweep: Callable  # (params, Walkers, key, geometry=None) -> (Walkers, pmove): fixed width
  # (TrainState, geometry=None) -> (TrainState, pmove): sample, one sweep, width adapted.
  mcmc_step: Callable
  energy: Callable  # (params, x (B, 3N), geometry=None) -> (E, EnergyAux), VMC gradient.
  # (params, x (B, 3N), geometry=None) -> ((E, EnergyAux), grads, curvature): local
  # energies, the VMC gradient and, for an optimizer whose curvature pass gives the gradient
  # too (KFAC: optim.fused_gradient), its curvature statistics (else None).
  energy_grad: Callable
  # (params, opt_state, grads, Samples, clock=None) -> (params, opt_state): the optimizer's
  # update applied (a rejected one changes nothing but opt_state.rejected:
  # optim.reject_nonfinite); `clock` the fraction of the time budget spent (optim.anneal_factor).
  update: Callable
  optimizer: optax.GradientTransformationExtraArgs
  train_step: Callable  # (TrainState, geometry=None, clock=None) -> (TrainState, StepStats)
  dtype: Any
  hamiltonian: hamiltonian.Hamiltonian  # Whose local energy the step takes.
  chunk_size: int  # Walkers per chunk of local energies (0: all at once), resolved.
  # Over a set of geometries (system.surface), their nuclei stacked, positions (G, M, 3), and
  # for a scan of a cell its scales (G,): the state's walkers are G groups of B / G in a
  # row, each at its own. None for one geometry.
  geometries: Optional[systems.Geometry] = None
  # The compiled step takes a clock, the () fraction of the time budget spent, as its last
  # argument (optim.anneals_by_clock): its learning rate anneals towards that end too.
  clocked: bool = False
  # Over a set of geometries, the G' of them whose chains each train step sweeps and whose
  # local energies it computes together (all G, or optim.geometries_per_step), each in
  # chunks of its share of chunk_size (loss.chunk_per_geometry): a chunk_size below G'
  # changes nothing. 1 for one geometry.
  swept: int = 1
  # Over a set of geometries, the train step's (params, xs (G', W, 3N), stack of G') ->
  # ((E (G',), EnergyAux of (G', W)), grads, curvature): each chain's local energies at its
  # own nuclei. None for one geometry.
  surface_energy_grad: Optional[Callable] = None
  # Over a set of geometries, the train step's sampling (params, chains: Walkers (G', W),
  # stack of G', key) -> (chains, pmove (G',)): each chain swept at its own nuclei, its
  # width adapted (with geometries drawn, its log|psi| first recomputed for `params`). None
  # for one geometry.
  surface_sample: Optional[Callable] = None

  @property
  def laplacian(self) -> laplacians.Method:
    """The Hamiltonian's Laplacian operator (what resolved.json records)."""
    return self.hamiltonian.laplacian

  def walkers_log_psi(self, params, x: jax.Array) -> jax.Array:
    """log|psi| (B,) of a state's walkers x (B, 3N), each at its own geometry."""
    if self.geometries is None:
      return self.batch_log_psi(params, x)
    per = x.shape[0] // self.geometries.positions.shape[0]
    return self.batch_log_psi(params, x, each_walker(self.geometries, per))


class Pieces(NamedTuple):
  """The step's swappable pieces, resolved from the settings once (plan.py)."""
  hamiltonian: hamiltonian.Hamiltonian  # With the Laplacian operator resolved.
  optimizer: optim.Method
  clip: choices.Choice  # A record of loss.CLIPPING.
  chunk_size: int  # Walkers per chunk of local energies (0: all at once).


DTYPES = {'float32': jnp.float32, 'float64': jnp.float64}  # config.precision -> dtype


def make_parts(system: systems.System, network: networks.Network, mcmc_cfg, optim_cfg,
               pieces: Pieces) -> Parts:
  """The run's functions for `network` (networks.make_network), from the `mcmc` and `optim`
  settings and the resolved `pieces` (the local energy their Hamiltonian's)."""
  chunk_size = pieces.chunk_size
  dtype = network.dtype
  batch_log_psi = loss.batch_network(network.log_psi)
  sweep = mcmc.make_sweep(batch_log_psi, mcmc_cfg.steps, systems.wrap_in(system.boundary))
  local_energy = loss.make_local_energy(network, pieces.hamiltonian, bool(optim_cfg.node_cutoff))
  penalty = None
  if optim_cfg.spin_penalty:
    spin_squared = observables.spin_squared(network.apply, system)
    weight = optim_cfg.spin_penalty
    penalty = lambda params, x, geometry=None: weight * spin_squared(  # noqa: E731
        params, x, *atoms_of(geometry))[0]

  def energy_in_chunks(chunk: int) -> Callable:
    return loss.make_energy(network.log_psi, local_energy, pieces.clip, optim_cfg.clip_local_energy,
                            chunk, penalty, network.log_psi_phase, optim_cfg.node_cutoff)

  # Over a set of geometries the energy is vmapped over them (every geometry's in each of
  # its chunks), so each geometry's chunk holds its share of the run's.
  count = system.geometry_count
  energy = energy_in_chunks(loss.chunk_per_geometry(chunk_size, count))
  optimizer = optim.make_optimizer(pieces.optimizer, optim_cfg, network)
  fused = optim.fused_gradient(pieces.optimizer, optim_cfg, network)
  target, rate = mcmc_cfg.target_pmove, mcmc_cfg.adapt_rate

  def mcmc_step(state: TrainState, geometry: Optional[systems.Geometry] = None):
    """One sweep, then the width adapted for the next one."""
    key, k_mcmc = jax.random.split(state.key)
    walkers, pmove = sweep(state.params, state.walkers, k_mcmc, geometry)
    walkers = walkers._replace(width=mcmc.adapt_width(walkers.width, pmove, target, rate))
    return state._replace(walkers=walkers, key=key), pmove

  def energy_grad(params, x, geometry: Optional[systems.Geometry] = None):
    if fused is None:
      return (*jax.value_and_grad(energy, has_aux=True)(params, x, geometry), None)
    # One pass of log|psi|'s derivatives per walker gives the gradient and the curvature
    # statistics; the energy's own derivative (another pass) is not taken.
    e, aux = energy(params, x, geometry)
    grads, curvature = fused(params, x, loss.gradient_weights(aux), *atoms_of(geometry))
    return (e, aux), grads, curvature

  def update(params, opt_state, grads, samples: optim.Samples, clock=None):
    extra = {} if clock is None else {'clock': clock}
    updates, opt_state = optimizer.update(grads, opt_state, params, samples=samples, **extra)
    return optax.apply_updates(params, updates), opt_state

  def train_step(state: TrainState, geometry: Optional[systems.Geometry] = None, clock=None):
    width = state.walkers.width
    state, pmove = mcmc_step(state, geometry)
    x, old_log_psi = state.walkers.x, state.walkers.log_psi
    (e, aux), grads, curvature = energy_grad(state.params, x, geometry)
    key, k_opt = jax.random.split(state.key)
    params, opt_state = update(state.params, state.opt_state, grads,
                               optim.Samples(x, k_opt, aux.centred, curvature,
                                             **nuclei_of(geometry)), clock)
    # The parameters changed, so the carried log|psi| is refreshed once for the next sweep.
    walkers = state.walkers._replace(log_psi=batch_log_psi(params, x, geometry))
    stats = step_stats(e, aux, pmove, width, opt_state, None, changes(
        grads, state.params, params, opt_state, old_log_psi, walkers.log_psi))
    return TrainState(params, opt_state, walkers, key, state.step + 1), stats

  geometries, steps, swept, surface_energy_grad = None, (mcmc_step, train_step, None), 1, None
  if system.surface is not None:
    scales = system.surface.scales
    geometries = systems.Geometry(jnp.asarray(system.surface.positions, dtype),
                                  None if scales is None else jnp.asarray(scales, dtype))
    drawn = optim_cfg.geometries_per_step
    swept = drawn if 0 < drawn < count else count
    surface_energy_grad = _surface_energy_grad(
        energy if swept == count else
        energy_in_chunks(loss.chunk_per_geometry(chunk_size, swept)), fused)
    steps = _surface_steps(geometries, sweep, surface_energy_grad, update, batch_log_psi,
                           mcmc_cfg, drawn)
  return Parts(network, batch_log_psi, sweep, steps[0], energy, energy_grad, update, optimizer,
               steps[1], dtype, pieces.hamiltonian, chunk_size, geometries,
               optim.anneals_by_clock(optim_cfg), swept, surface_energy_grad, steps[2])


def _surface_steps(geometries: systems.Geometry, sweep, energy_grad, update, batch_log_psi,
                   mcmc_cfg, per_step: int = 0) -> tuple:
  """(mcmc_step, train_step, sampled) over a set of G geometries (physics/geometries.py):
  one network, its parameters shared, sees the nuclei of each geometry as inputs. The
  walkers are G groups of W = B / G in a row, one chain per geometry with its own move width
  (G,); each step sweeps every chain with its own nuclei, and the update lowers the mean of
  the G energies, each walker's local energy centred on its own geometry's mean. mcmc_step
  and train_step take an optional stack of geometries (positions (G, M, 3)); None: the
  surface's own, as constants.

  `per_step` = S (0 or G: all): each train step draws S of the G geometries at random,
  without replacement (S is static, so the step stays one compiled function), and sweeps
  and trains on their chains only, an unbiased estimate of the mean's gradient from S W
  walkers; the other chains wait, their log|psi| recomputed for the parameters of the step
  that next draws them (so does mcmc_step, for all of them). StepStats.energies holds NaN
  for the geometries not drawn. sampled(params, chains, stack, key): the sweep of chains
  (Parts.surface_sample)."""
  count = geometries.positions.shape[0]
  subset = 0 < per_step < count
  refreshed, swept = _chain_functions(sweep, batch_log_psi, mcmc_cfg)

  def stack_of(geometry):
    return geometries if geometry is None else geometry

  def sampled(params, chains: mcmc.Walkers, stack: systems.Geometry, key):
    if subset:  # Chains that waited carry log|psi| of earlier parameters.
      chains = refreshed(params, chains, stack)
    return swept(params, chains, stack, key)

  def mcmc_step(state: TrainState, geometry: Optional[systems.Geometry] = None):
    stack = stack_of(geometry)
    key, k_mcmc = jax.random.split(state.key)
    chains, pmove = sampled(state.params, by_geometry(state.walkers, stack), stack, k_mcmc)
    return state._replace(walkers=in_a_row(chains), key=key), pmove

  def trained(state: TrainState, chains: mcmc.Walkers, stack: systems.Geometry, key, clock,
              refresh: bool):
    """The update from `chains` (G', W) swept at `stack`: (params, opt_state, E (G',),
    EnergyAux, the walkers' log|psi| for the new parameters (G' W,) where `refresh`, else
    None, `changes`)."""
    (e, aux), grads, curvature = energy_grad(state.params, chains.x, stack)
    samples = chain_samples(chains.x, key, aux.centred, curvature, stack)
    params, opt_state = update(state.params, state.opt_state, grads, samples, clock)
    new_log_psi, old_log_psi = None, chains.log_psi.reshape(-1)
    if refresh:
      new_log_psi = batch_log_psi(params, samples.x, each_walker(stack, chains.x.shape[1]))
    return (params, opt_state, e, aux, new_log_psi,
            changes(grads, state.params, params, opt_state, old_log_psi, new_log_psi))

  def train_step(state: TrainState, geometry: Optional[systems.Geometry] = None, clock=None):
    stack = stack_of(geometry)
    if subset:
      return train_subset(state, stack, clock)
    width = state.walkers.width
    state, pmove = mcmc_step(state, stack)
    chains = by_geometry(state.walkers, stack)
    key, k_opt = jax.random.split(state.key)
    params, opt_state, e, aux, log_psi, change = trained(state, chains, stack, k_opt, clock,
                                                         refresh=True)
    walkers = state.walkers._replace(log_psi=log_psi)
    stats = step_stats(e, aux, pmove, width, opt_state, e, change)
    return TrainState(params, opt_state, walkers, key, state.step + 1), stats

  def train_subset(state: TrainState, stack: systems.Geometry, clock):
    key, k_pick, k_mcmc, k_opt = jax.random.split(state.key, 4)
    picked = jax.random.choice(k_pick, count, (per_step,), replace=False)
    chains = by_geometry(state.walkers, stack)
    drawn = jax.tree.map(lambda a: a[picked], stack)
    sub, pmove = sampled(state.params, jax.tree.map(lambda a: a[picked], chains), drawn, k_mcmc)
    # The chains drawn are refreshed when next drawn, not here (their fisher_step is NaN).
    params, opt_state, e, aux, _, change = trained(state, sub, drawn, k_opt, clock,
                                                   refresh=False)
    chains = jax.tree.map(lambda a, b: a.at[picked].set(b), chains, sub)
    stats = step_stats(e, aux, pmove, state.walkers.width[picked], opt_state,
                           jnp.full((count,), jnp.nan, e.dtype).at[picked].set(e), change)
    return TrainState(params, opt_state, in_a_row(chains), key, state.step + 1), stats

  return mcmc_step, train_step, sampled


def _surface_energy_grad(energy, fused) -> Callable:
  """(params, xs (G', W, 3N), stack) -> ((E (G',), EnergyAux of (G', W)), the gradient of the
  mean of E, curvature statistics or None): each geometry's energy at its walkers; with an
  optimizer whose curvature pass gives the gradient (KFAC), that pass over all walkers,
  each at its own nuclei."""
  energies = jax.vmap(energy, in_axes=(None, 0, 0))

  def energy_grad(params, xs, stack):
    if fused is None:
      def mean_energy(p):
        e, aux = energies(p, xs, stack)
        return jnp.mean(e), (e, aux)
      (_, out), grads = jax.value_and_grad(mean_energy, has_aux=True)(params)
      return out, grads, None
    e, aux = energies(params, xs, stack)
    weights = jax.vmap(loss.gradient_weights)(aux) / xs.shape[0]
    grads, curvature = fused(params, xs.reshape(-1, xs.shape[-1]), weights.reshape(-1),
                             *atoms_of(each_walker(stack, xs.shape[1])))
    return (e, aux), grads, curvature

  return energy_grad


def chain_samples(xs: jax.Array, key, centred: jax.Array, curvature,
                  stack: systems.Geometry) -> optim.Samples:
  """The optimizer's Samples of chains xs (G', W, 3N) at the nuclei of `stack` (G'), their
  centred local energies (G', W): G' groups of W walkers in a row, each at its own nuclei."""
  g, w = xs.shape[:2]
  return optim.Samples(xs.reshape(g * w, -1), key, centred.reshape(g * w), curvature,
                       groups=g, **nuclei_of(each_walker(stack, w)))


def _chain_functions(sweep, batch_log_psi, mcmc_cfg) -> tuple:
  """(refreshed, swept) over chains of a surface (G', W walkers at G' geometries):
  refreshed(params, chains, stack), their log|psi| recomputed for `params`, each chain at
  its own nuclei; swept(params, chains, stack, key) -> (chains, pmove (G',)), one sweep of
  each chain at its nuclei, then each width adapted."""
  target, rate = mcmc_cfg.target_pmove, mcmc_cfg.adapt_rate

  def refreshed(params, chains: mcmc.Walkers, stack: systems.Geometry) -> mcmc.Walkers:
    x = chains.x.reshape(-1, chains.x.shape[-1])
    walkers_at = each_walker(stack, chains.x.shape[1])
    return chains._replace(log_psi=batch_log_psi(params, x, walkers_at).reshape(
        chains.log_psi.shape))

  def swept(params, chains: mcmc.Walkers, stack: systems.Geometry, key):
    keys = jax.random.split(key, stack.positions.shape[0])
    chains, pmove = jax.vmap(sweep, in_axes=(None, 0, 0, 0))(params, chains, keys, stack)
    return chains._replace(width=mcmc.adapt_width(chains.width, pmove, target, rate)), pmove

  return refreshed, swept


def step_stats(e, aux, pmove, width, opt_state, energies, change) -> StepStats:
  """A step's statistics from E, its EnergyAux, acceptance and width, of one geometry
  (scalars) or of the G' a surface step swept ((G',): their means, the non-finite summed),
  `change` the update's `changes`, and over a surface `energies` (G,) per geometry (else
  None)."""
  grad_norm, update_norm, realised, model = change
  return StepStats(jnp.mean(e), jnp.mean(aux.variance), jnp.mean(pmove), jnp.mean(width),
                   optim.applied_lr(opt_state), jnp.sum(aux.nonfinite),
                   opt_state.rejected.astype(jnp.int32), grad_norm, update_norm,
                   jnp.sum(aux.clipped) / aux.local_energy.size, realised, model,
                   energies=energies)


def changes(grads, old, new, opt_state, old_log_psi, new_log_psi=None) -> tuple:
  """(|g|, |new - old|, realised, model): the update's `norms` and `fisher_steps`, at the
  rate it was applied with."""
  return (*norms(grads, old, new),
          *fisher_steps(old_log_psi, new_log_psi, grads, old, new, optim.applied_lr(opt_state)))


def fisher_steps(old_log_psi, new_log_psi, grads, old, new, lr) -> tuple:
  """(realised, model): the squared length of the update applied, u = new - old, in the
  Fisher metric F = (2 / B) sum_i J_i^T J_i of log|psi| at the step's B walkers (kfac.py's),
  measured two ways. realised = kfac.squared_length of the changes log|psi_new(x_i)| -
  log|psi_old(x_i)| (centred, the largest 1% left out: a walker near a node changes far
  more than the rest), to leading order in u the length in F centred (2 u^T C u, C the
  covariance of the J_i) over the walkers kept: how far the update moved the wavefunction
  where it is sampled (NaN without `new_log_psi`).
  model = -lr <u, g> with `lr` the rate applied and g the gradient: for an update -lr d it
  is lr^2 <d, g>, KFAC's own estimate lr^2 g^T F~^-1 g of the same length with its damped
  block-diagonal F~, which its norm constraint bounds (Adam's and SPRING's analogue of it
  otherwise). A realised length far above the model's says that the curvature the
  optimizer used understated how far its step would move psi."""
  model = -lr * optax.tree.vdot(jax.tree.map(lambda a, b: a - b, new, old), grads)
  if new_log_psi is None:
    return jnp.full_like(model, jnp.nan), model
  return kfac_lib.squared_length(new_log_psi - old_log_psi).astype(model.dtype), model


def norms(grads, old, new) -> tuple:
  """(|g|, |new - old|): Euclidean norms over all parameters of the gradient and of the
  update applied (0 when it was rejected)."""
  return (optax.tree.norm(grads),
          optax.tree.norm(jax.tree.map(lambda a, b: a - b, new, old)))


def by_geometry(walkers: mcmc.Walkers, stack: systems.Geometry) -> mcmc.Walkers:
  """The walkers of a surface, B in a row, as a chain per geometry of `stack`
  (mcmc.as_chains)."""
  return mcmc.as_chains(walkers, stack.positions.shape[0])


in_a_row = mcmc.in_a_row  # The inverse of by_geometry.


def each_walker(stack: systems.Geometry, per_geometry: int) -> systems.Geometry:
  """The geometry of each walker of G groups of `per_geometry` in a row: positions (G W, M,
  3) and, for a scaled cell, scales (G W,)."""
  return jax.tree.map(lambda a: jnp.repeat(a, per_geometry, axis=0), stack)


# The trailing arguments of a network's function for a geometry: (positions,), with a scaled
# cell (positions, scale), or () with None.
atoms_of = systems.network_arguments


def nuclei_of(geometry: Optional[systems.Geometry]) -> dict:
  """The optimizer's Samples' `atoms` and `scale` for `geometry` (those it has)."""
  return dict(zip(('atoms', 'scale'), atoms_of(geometry)))


def init_state(parts: Parts, system: systems.System, batch_size: int, mcmc_cfg,
               key: jax.Array, ctx: Optional[distributed.Context] = None) -> TrainState:
  """Fresh parameters, optimizer state and `batch_size` walkers (before burn-in; placed by
  the `mcmc` settings), built in one jit and laid out over the devices of `ctx` (default:
  all devices), walkers split among them."""
  ctx = ctx or distributed.context(batch_size)

  def build(key):
    k_params, k_walkers, _, k_run = jax.random.split(key, 4)
    params = parts.network.init(k_params)
    x = mcmc.init_positions(k_walkers, system, batch_size, mcmc_cfg.init_width, parts.dtype)
    width = jnp.asarray(mcmc_cfg.move_width, parts.dtype)
    if parts.geometries is not None:  # A chain per geometry, each with its own width.
      width = jnp.full(parts.geometries.positions.shape[:1], width)
    walkers = mcmc.Walkers(x, parts.walkers_log_psi(params, x), width)
    return TrainState(params, parts.optimizer.init(params), walkers, k_run,
                      jnp.zeros((), jnp.int32))

  shardings = distributed.state_shardings(ctx, jax.eval_shape(build, key))
  return jax.jit(build, out_shardings=shardings)(key)


def shardings_of(state: TrainState) -> tuple:
  """(the state's shardings, the replicated sharding of its mesh)."""
  shardings = jax.tree.map(lambda a: a.sharding, state)
  mesh = state.walkers.x.sharding.mesh
  return shardings, NamedSharding(mesh, PartitionSpec())


class Compiled(NamedTuple):
  train_step: Callable  # TrainState -> (TrainState, StepStats); donates its input.
  mcmc: Callable  # TrainState -> (TrainState, pmove): one sweep + width adaptation.
  compile_s: float
  clocked: bool = False  # train_step takes a `clock` last (Parts.clocked).


def clock(fraction: float) -> np.ndarray:
  """The clock a clocked step takes: the fraction of the time budget spent, in [0, 1]."""
  return np.asarray(min(max(float(fraction), 0.0), 1.0), np.float32)


def compile_step(parts: Parts, state: TrainState,
                 geometry: Optional[systems.Geometry] = None) -> Compiled:
  """Compiles, ahead of the loop, the train step and the MCMC sweep for the shapes and
  shardings of `state`; their outputs keep those shardings, so each step feeds the next.
  With `geometry` (nuclei that move: positions (M, 3), replicated), both take it as their
  second argument, data of the program, and are called as f(state, geometry). A clocked
  step (Parts.clocked) takes `clock(fraction)` last: f(state[, geometry], clock)."""
  start = time.perf_counter()
  shardings, replicated = shardings_of(state)
  args, in_shardings = (state,), (shardings,)
  if geometry is not None:
    args, in_shardings = (state, geometry), (shardings, replicated)
  train_step, step_args, step_shardings = parts.train_step, args, in_shardings
  if parts.clocked:  # By keyword: the geometry before it may be absent.
    train_step = lambda *a: parts.train_step(*a[:-1], clock=a[-1])  # noqa: E731
    step_args, step_shardings = (*args, clock(0.0)), (*in_shardings, replicated)
  step = jax.jit(train_step, donate_argnums=0, in_shardings=step_shardings,
                 out_shardings=(shardings, replicated)).lower(*step_args).compile()
  sweep = jax.jit(parts.mcmc_step, in_shardings=in_shardings,
                  out_shardings=(shardings, replicated)).lower(*args).compile()
  return Compiled(step, sweep, time.perf_counter() - start, parts.clocked)


def burn_in(compiled: Compiled, state: TrainState, steps: int, steps_per_sweep: int,
            beat: Optional[Callable[[str], None]] = None) -> TrainState:
  """MCMC burn-in of `steps` moves, adapting the width after every sweep; params unchanged.
  `beat(what comes next)`, if given, is called as each sweep completes (a watchdog's), one
  sweep behind the dispatch so that the device never waits for the host, nor runs more than
  a sweep behind it (environment/dispatch.py)."""
  n = mcmc.n_sweeps(steps, steps_per_sweep)
  ahead = dispatch.Bounded(1)  # Never more than two sweeps in flight.
  for i in range(n):
    state, pmove = compiled.mcmc(state)
    if ahead.pushed(pmove) is not None and beat is not None:
      beat(f'sweep {i + 1} of {n} of the burn-in')
  return jax.block_until_ready(state)
