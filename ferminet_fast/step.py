"""One jitted training step (MCMC -> local energy -> gradient -> optimizer), its
ahead-of-time compilation, and the stage timers.

`train_step(state) -> (state, stats)` runs entirely on the device; its input
buffers are donated, and nothing in it returns to the host.
"""

import dataclasses
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec
import numpy as np
import optax

from ferminet_fast import distributed, hamiltonian, loss, mcmc, networks, optim, systems


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
  lr: jax.Array  # Learning rate of the update applied: 0 when it was rejected.
  nonfinite: jax.Array  # Walkers whose local energy was NaN/inf (left out of E and gradient).
  rejected: jax.Array  # 1 if the update would have made a parameter non-finite (not applied).


@dataclasses.dataclass(frozen=True)
class Parts:
  """The pure functions a run is made of, built once from the config and system."""
  network: networks.Network
  batch_log_psi: Callable  # (params, x (B, 3N)) -> (B,)
  sweep: Callable  # (params, Walkers, key) -> (Walkers, pmove): fixed width
  mcmc_step: Callable  # TrainState -> (TrainState, pmove): one sweep, width adapted
  energy: Callable  # (params, x (B, 3N)) -> (E, EnergyAux), with the VMC gradient
  optimizer: optax.GradientTransformationExtraArgs
  train_step: Callable  # TrainState -> (TrainState, StepStats)
  dtype: Any
  laplacian: str


def make_parts(cfg, system: systems.System, laplacian: str = '') -> Parts:
  """The run's functions; `laplacian` overrides cfg.optim.laplacian (used to resolve 'auto')."""
  dtype = jnp.float64 if cfg.precision == 'float64' else jnp.float32
  network = networks.make_network(cfg.network, system, dtype)
  batch_log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))
  sweep = mcmc.make_sweep(batch_log_psi, cfg.mcmc.steps)
  laplacian = hamiltonian.resolve(laplacian or cfg.optim.laplacian)
  if laplacian == 'auto':
    laplacian = 'jacfwd'  # Only to build the parts that time the candidates.
  local_energy = hamiltonian.make_local_energy(network.log_psi, system, laplacian)
  energy = loss.make_energy(network.log_psi, local_energy, cfg.optim.clip_method,
                            cfg.optim.clip_local_energy, cfg.optim.energy_chunk_size)
  optimizer = optim.make_optimizer(cfg.optim, network)
  schedule = optim.lr_schedule(cfg.optim)
  target, rate = cfg.mcmc.target_pmove, cfg.mcmc.adapt_rate

  def mcmc_step(state: TrainState):
    """One sweep, then the width adapted for the next one."""
    key, k_mcmc = jax.random.split(state.key)
    walkers, pmove = sweep(state.params, state.walkers, k_mcmc)
    walkers = walkers._replace(width=mcmc.adapt_width(walkers.width, pmove, target, rate))
    return state._replace(walkers=walkers, key=key), pmove

  def train_step(state: TrainState):
    width = state.walkers.width
    state, pmove = mcmc_step(state)
    x = state.walkers.x
    (e, aux), grads = jax.value_and_grad(energy, has_aux=True)(state.params, x)
    key, k_opt = jax.random.split(state.key)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params,
                                          samples=optim.Samples(x, k_opt, aux.centred))
    params = optax.apply_updates(state.params, updates)
    # An update that would make any parameter non-finite is rejected: parameters and
    # optimizer state stay as they were (the walkers and key move on).
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(p)) for p in jax.tree.leaves(params)]))
    params, opt_state = jax.lax.cond(ok, lambda: (params, opt_state),
                                     lambda: (state.params, state.opt_state))
    # The parameters changed, so the carried log|psi| is refreshed once for the next sweep.
    walkers = state.walkers._replace(log_psi=batch_log_psi(params, x))
    stats = StepStats(e, aux.variance, pmove, width,
                      jnp.where(ok, jnp.asarray(schedule(state.step), dtype), 0),
                      aux.nonfinite, (~ok).astype(jnp.int32))
    return TrainState(params, opt_state, walkers, key, state.step + 1), stats

  return Parts(network, batch_log_psi, sweep, mcmc_step, energy, optimizer, train_step, dtype,
               laplacian)


def init_state(parts: Parts, cfg, system: systems.System, key: jax.Array,
               ctx: Optional[distributed.Context] = None) -> TrainState:
  """Fresh parameters, optimizer state and walkers (before burn-in), built in one jit and
  laid out over the devices of `ctx` (default: all devices), walkers split among them."""
  ctx = ctx or distributed.context(cfg.batch_size)

  def build(key):
    k_params, k_walkers, _, k_run = jax.random.split(key, 4)
    params = parts.network.init(k_params)
    x = mcmc.init_positions(k_walkers, system, cfg.batch_size, cfg.mcmc.init_width, parts.dtype)
    walkers = mcmc.Walkers(x, parts.batch_log_psi(params, x),
                           jnp.asarray(cfg.mcmc.move_width, parts.dtype))
    return TrainState(params, parts.optimizer.init(params), walkers, k_run,
                      jnp.zeros((), jnp.int32))

  shardings = distributed.state_shardings(ctx, jax.eval_shape(build, key))
  return jax.jit(build, out_shardings=shardings)(key)


def shardings_of(state: TrainState) -> tuple:
  """(the state's shardings, the replicated sharding of its mesh)."""
  shardings = jax.tree.map(lambda a: a.sharding, state)
  mesh = state.walkers.x.sharding.mesh
  return shardings, NamedSharding(mesh, PartitionSpec())


def _stage_functions(parts: Parts) -> dict:
  """The stages of a step, each as a function of the training state."""

  def forward(s):
    return parts.batch_log_psi(s.params, s.walkers.x)

  def energy_grad(s):
    return jax.value_and_grad(parts.energy, has_aux=True)(s.params, s.walkers.x)

  def optimizer_stage(s, grads, centred):
    updates, opt_state = parts.optimizer.update(
        grads, s.opt_state, s.params, samples=optim.Samples(s.walkers.x, s.key, centred))
    return optax.apply_updates(s.params, updates), opt_state

  return {'forward_ms': forward, 'energy_grad_ms': energy_grad, 'optimizer_ms': optimizer_stage}


class Compiled(NamedTuple):
  train_step: Callable  # TrainState -> (TrainState, StepStats); donates its input.
  mcmc: Callable  # TrainState -> (TrainState, pmove): one sweep + width adaptation.
  compile_s: float


def compile_step(parts: Parts, state: TrainState) -> Compiled:
  """Compiles, ahead of the loop, the train step and the MCMC sweep for the shapes and
  shardings of `state`; their outputs keep those shardings, so each step feeds the next."""
  start = time.perf_counter()
  shardings, replicated = shardings_of(state)
  step = jax.jit(parts.train_step, donate_argnums=0, in_shardings=(shardings,),
                 out_shardings=(shardings, replicated)).lower(state).compile()
  sweep = jax.jit(parts.mcmc_step, in_shardings=(shardings,),
                  out_shardings=(shardings, replicated)).lower(state).compile()
  return Compiled(step, sweep, time.perf_counter() - start)


def shapes_of(tree):
  """Shapes, dtypes and shardings of a pytree of arrays, for lowering without the data."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), tree)


def compile_stages(parts: Parts, state) -> dict:
  """Compiles the stages other than MCMC separately, for the stage timers.

  Given `shapes_of(state)`, it is safe to run in a background thread while training
  proceeds: it only traces and compiles, and never touches the state's buffers.
  """
  fns = _stage_functions(parts)  # MCMC was compiled with the step: it is also the burn-in.
  (_, aux), grads = jax.eval_shape(fns['energy_grad_ms'], state)
  stages = {}
  for name, fn in fns.items():
    args = (state, grads, aux.centred) if name == 'optimizer_ms' else (state,)
    stages[name] = jax.jit(fn).lower(*args).compile()
  return stages


AUTO_CANDIDATES = ('jacfwd', 'jvp_loop', 'folx')  # folx_sparse compiles too slowly to try.


def choose_laplacian(cfg, parts: Parts, system: systems.System, state: TrainState,
                     repeats: int = 5) -> tuple:
  """Times the local energy of each available candidate method on `state` (the real
  parameters and walkers, chunked as configured) and returns (fastest, {method: ms})."""
  times = {}
  for method in [m for m in AUTO_CANDIDATES if m in hamiltonian.available_laplacians()]:
    local_energy = hamiltonian.make_local_energy(parts.network.log_psi, system, method)
    fn = jax.jit(loss.batch_local_energies(local_energy, cfg.optim.energy_chunk_size))
    fn = fn.lower(state.params, state.walkers.x).compile()
    jax.block_until_ready(fn(state.params, state.walkers.x))
    times[method] = _median_ms(lambda: fn(state.params, state.walkers.x), repeats)
  return min(times, key=times.get), times


def memory_mb(compiled_fn) -> dict:
  """Memory of one call of a compiled function as XLA plans it (arguments + outputs +
  temporaries - donated aliases), and the device's peak where the backend reports it."""
  out = {}
  analysis = compiled_fn.memory_analysis()
  if analysis is not None:
    total = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes +
             analysis.temp_size_in_bytes - analysis.alias_size_in_bytes)
    out['step_memory_mb'] = total / 2**20
  stats = jax.local_devices()[0].memory_stats()
  if stats and 'peak_bytes_in_use' in stats:
    out['device_peak_memory_mb'] = stats['peak_bytes_in_use'] / 2**20
  return out


def burn_in(compiled: Compiled, state: TrainState, steps: int, steps_per_sweep: int) -> TrainState:
  """MCMC burn-in of `steps` moves, adapting the width after every sweep; params unchanged."""
  for _ in range(mcmc.n_sweeps(steps, steps_per_sweep)):
    state, _ = compiled.mcmc(state)
  return jax.block_until_ready(state)


def _median_ms(fn: Callable, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return 1e3 * float(np.median(times))


def measure_stages(compiled: Compiled, stages: dict, state: TrainState, repeats: int = 5) -> dict:
  """Median wall time (ms) of each compiled stage and of the whole step on `state`."""
  stages = {'mcmc_ms': compiled.mcmc, **stages}
  (_, aux), grads = stages['energy_grad_ms'](state)
  out = {}
  for name, fn in stages.items():
    args = (state, grads, aux.centred) if name == 'optimizer_ms' else (state,)
    jax.block_until_ready(fn(*args))  # One unmeasured call: first-run allocations.
    out[name] = _median_ms(lambda: fn(*args), repeats)
  out['train_step_ms'] = time_train_step(compiled, state, repeats)
  return out


def time_train_step(compiled: Compiled, state: TrainState, repeats: int = 5) -> float:
  """Median ms of the compiled step; it donates its input, so each call gets a fresh copy
  of `state` (made outside the timed region) and `state` itself is left untouched."""
  times = []
  for _ in range(repeats + 1):  # The first call is not counted: first-run allocations.
    copy = jax.block_until_ready(jax.tree.map(jnp.copy, state))
    t0 = time.perf_counter()
    jax.block_until_ready(compiled.train_step(copy))
    times.append(time.perf_counter() - t0)
  return 1e3 * float(np.median(times[1:]))
