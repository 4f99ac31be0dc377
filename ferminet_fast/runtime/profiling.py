"""Where a step's time goes: its stages compiled and timed separately on the real state,
the whole step timed, and the 'auto' Laplacian choice (its memory: runtime/memory.py)."""

import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.optimizers import optim
from ferminet_fast.physics import hamiltonian, laplacians, systems
from ferminet_fast.runtime import memory
from ferminet_fast.vmc import loss
from ferminet_fast.vmc import step
from ferminet_fast.vmc.step import Compiled, Parts, TrainState


def _stage_functions(parts: Parts) -> dict:
  """The stages of the step (its own functions: parts.energy_grad, or over a set of
  geometries parts.surface_energy_grad, and parts.update), and one forward pass as the unit
  of cost, each as a function of the training state. For one geometry sampling is timed
  with the compiled MCMC sweep (the burn-in's, compiled with the step); over a set of
  geometries it is a stage here too, the step's own sampling of the chains it sweeps."""
  if parts.geometries is not None:
    return _surface_stage_functions(parts)

  def forward(s):
    return parts.batch_log_psi(s.params, s.walkers.x)

  def energy_grad(s):
    return parts.energy_grad(s.params, s.walkers.x)

  def update(s, grads, centred, curvature):
    return parts.update(s.params, s.opt_state, grads,
                        optim.Samples(s.walkers.x, s.key, centred, curvature))

  return {'forward_ms': forward, 'energy_grad_ms': energy_grad, 'optimizer_ms': update}


def _surface_stage_functions(parts: Parts) -> dict:
  """The stages of a surface's step (vmc/step.py) as it computes them, on the chains of the
  parts.swept geometries it sweeps (the first ones where the step draws some at random: the
  same shapes): their sampling, each at its own nuclei (parts.surface_sample), their local
  energies and gradient, then the update from them; and the forward pass of every walker at
  its geometry."""
  stack = jax.tree.map(lambda a: a[:parts.swept], parts.geometries)

  def chains(s):  # Walkers (G', W)
    return jax.tree.map(lambda a: a[:parts.swept], step.by_geometry(s.walkers, parts.geometries))

  def sample(s):
    return parts.surface_sample(s.params, chains(s), stack, s.key)

  def forward(s):
    return parts.walkers_log_psi(s.params, s.walkers.x)

  def energy_grad(s):
    return parts.surface_energy_grad(s.params, chains(s).x, stack)

  def update(s, grads, centred, curvature):
    return parts.update(s.params, s.opt_state, grads,
                        step.chain_samples(chains(s).x, s.key, centred, curvature, stack))

  return {'mcmc_ms': sample, 'forward_ms': forward, 'energy_grad_ms': energy_grad,
          'optimizer_ms': update}


def shapes_of(tree):
  """Shapes, dtypes and shardings of a pytree of arrays, for lowering without the data."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), tree)


def compile_stages(parts: Parts, state) -> dict:
  """Compiles the stages of _stage_functions separately, for the stage timers.

  Given `shapes_of(state)`, it is safe to run in a background thread while training
  proceeds: it only traces and compiles, and never touches the state's buffers.
  """
  fns = _stage_functions(parts)
  (_, aux), grads, curvature = jax.eval_shape(fns['energy_grad_ms'], state)
  stages = {}
  for name, fn in fns.items():
    args = (state, grads, aux.centred, curvature) if name == 'optimizer_ms' else (state,)
    stages[name] = jax.jit(fn).lower(*args).compile()
  return stages


def choose_laplacian(network, system: systems.System, params, x: jax.Array,
                     chunk_size: int = 0, repeats: int = 5) -> tuple:
  """Times the batched local energy of each available candidate method for `network` at
  `params` and walkers x (B, 3N), in chunks of `chunk_size` walkers as the run will make
  them (0: all at once), and returns (fastest, {method: ms}). How 'auto' is
  resolved, before the step is built: the installed methods whose records say they are
  timed (laplacians.Method.timed), the fastest returned as its record."""
  times = {}
  for method in [m for m in laplacians.available() if m.timed]:
    local_energy = loss.make_local_energy(network, hamiltonian.of(system, method, network.dtype))
    fn = jax.jit(loss.batch_local_energies(local_energy, chunk_size))
    fn = fn.lower(params, x).compile()
    jax.block_until_ready(fn(params, x))
    times[method.name] = _median_ms(lambda: fn(params, x), repeats)
  return laplacians.METHODS[min(times, key=times.get)], times


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
  (_, aux), grads, curvature = stages['energy_grad_ms'](state)
  out = {}
  for name, fn in stages.items():
    args = (state, grads, aux.centred, curvature) if name == 'optimizer_ms' else (state,)
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
    jax.block_until_ready(compiled.train_step(copy, *clock_args(compiled)))
    times.append(time.perf_counter() - t0)
  return 1e3 * float(np.median(times[1:]))


def clock_args(compiled: Compiled) -> tuple:
  """The trailing arguments of the compiled step: a clocked one's clock (at the start)."""
  return (step.clock(0.0),) if compiled.clocked else ()


def format_ms(ms: dict) -> str:
  """'name 1.23 ms, ...' of timings in ms by name (the 'auto' Laplacian's candidates)."""
  return ', '.join(f'{m} {t:.2f} ms' for m, t in ms.items())


def format_timings(t: dict) -> str:
  keys = ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms')
  return '  '.join(f'{k}={t[k]:.3f}' for k in keys if k in t) + f'  compile_s={t["compile_s"]:.2f}'


class StageTimers:
  """The stages of the step compiled separately (`timers_compile_s`), to be timed on the
  real state. Compiled when made, not alongside training: a compilation running next to
  the loop would take the cores the training steps need."""

  def __init__(self, parts, state):
    t0 = time.perf_counter()
    self._stages = compile_stages(parts, shapes_of(state))
    self.compile_s = time.perf_counter() - t0

  def measure(self, compiled, state) -> dict:
    """Median ms of each stage and of the whole step on `state`."""
    return {**measure_stages(compiled, self._stages, state),
            'timers_compile_s': self.compile_s}


def run_facts(ctx, batch_size: int, mcmc_steps: int, optimizer: str, parts: Parts,
              compiled: Compiled) -> dict:
  """The run's layout and the compiled step's memory, for timings.json."""
  return {'batch_size': batch_size, 'devices': ctx.device_count,
          'processes': ctx.process_count, 'walkers_per_device': batch_size // ctx.device_count,
          'mcmc_steps': mcmc_steps, 'laplacian': parts.laplacian.name,
          'energy_chunk_size': parts.chunk_size, 'optimizer': optimizer,
          **memory.memory_mb(compiled.train_step)}
