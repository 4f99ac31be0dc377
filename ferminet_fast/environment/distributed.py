"""Devices and processes: walkers sharded over every device of every process.

One mesh axis, 'walkers', spans all devices (jax.devices(), over all processes after
`jax.distributed.initialize`). The walkers' positions and log|psi| are split along it;
parameters, optimizer state, move width, key and step are replicated. The train step is
one `jax.jit` with these shardings, so XLA inserts the reductions over walkers (energy
mean, gradient, curvature statistics) itself; the code of the step is the same on one
device and on many.

Host-side decisions that every process must take at the same step (stop on a signal,
save by wall time) are agreed through `Context.agree`; everything else the host acts on
(statistics) is replicated, so the processes agree on it by construction. Only process
0 writes the run directory's files and prints; all processes take part in checkpoints.
"""

import os
import pickle
from typing import Any, NamedTuple, Optional

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import numpy as np

from ferminet_fast.errors import InputError

AXIS = 'walkers'
_initialized = False


def wants_initialize(dcfg) -> bool:
  """Whether this run is one of several processes (jax.distributed.initialize is called)."""
  if dcfg.initialize == 'yes':
    return True
  if dcfg.initialize == 'no':
    return False
  # auto: a multi-task SLURM step, or explicit coordinates.
  tasks = os.environ.get('SLURM_STEP_NUM_TASKS') or os.environ.get('SLURM_NTASKS') or '1'
  return bool(dcfg.coordinator) or (int(tasks) > 1 and 'SLURM_PROCID' in os.environ)


def initialize(dcfg) -> None:
  """`jax.distributed.initialize` once per process when the config asks for it (under
  SLURM it finds coordinator, process count and id from the environment)."""
  global _initialized
  if _initialized or not wants_initialize(dcfg):
    return
  kwargs = {}
  if dcfg.coordinator:
    kwargs = dict(coordinator_address=dcfg.coordinator, num_processes=dcfg.num_processes,
                  process_id=dcfg.process_id)
  try:
    jax.distributed.initialize(**kwargs)
  except (RuntimeError, ValueError) as e:
    raise InputError(f'jax.distributed.initialize failed: {str(e).splitlines()[0]}') from None
  _initialized = True


class Context(NamedTuple):
  mesh: Mesh
  process_index: int
  process_count: int

  @property
  def is_main(self) -> bool:
    return self.process_index == 0

  @property
  def device_count(self) -> int:
    return self.mesh.size

  def walker_sharding(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec(AXIS))

  def replicated(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec())

  def broadcast(self, obj: Any) -> Any:
    """Process 0's `obj` (any picklable value) on every process."""
    if self.process_count == 1:
      return obj
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    size = int(multihost_utils.broadcast_one_to_all(np.int64(data.size)))
    buf = np.zeros(size, np.uint8)
    if self.is_main:
      buf[:] = data
    return pickle.loads(np.asarray(multihost_utils.broadcast_one_to_all(buf)).tobytes())

  def main_value(self, value: float) -> float:
    """Process 0's `value` (a number) on every process, in one collective."""
    if self.process_count == 1:
      return value
    return float(multihost_utils.broadcast_one_to_all(np.float64(value)))

  def smallest(self, value: Optional[int]) -> Optional[int]:
    """The smallest of every process's `value` (None if any process has None)."""
    if self.process_count == 1:
      return value
    values = multihost_utils.process_allgather(np.array(-1 if value is None else value,
                                                        np.int64))
    values = np.asarray(values).ravel()
    return None if (values < 0).any() else int(values.min())

  def agree(self, any_of: bool, main_says: bool) -> tuple:
    """(any process's `any_of`, process 0's `main_says`), the same on every process."""
    if self.process_count == 1:
      return any_of, main_says
    flags = multihost_utils.process_allgather(np.array([any_of, main_says], np.int32))
    flags = np.asarray(flags).reshape(self.process_count, 2)
    return bool(flags[:, 0].any()), bool(flags[0, 1])


def check_split(batch_size: int, what: str = '', setting: str = 'config.batch_size') -> None:
  """InputError unless `batch_size` walkers (`what` says whose; `setting` is the key or flag
  that sets them) split evenly over this process's view of all devices."""
  n = len(jax.devices())
  if batch_size % n:
    raise InputError(f'{what or f"config.batch_size = {batch_size}"} does not divide evenly '
                     f'over the {n} devices of this run; give {setting} a multiple of {n}')


def context(batch_size: int) -> Context:
  """The mesh over all devices; `batch_size` must split evenly over them."""
  check_split(batch_size)
  devices = jax.devices()
  mesh = Mesh(np.asarray(devices), (AXIS,))
  return Context(mesh, jax.process_index(), jax.process_count())


def state_shardings(ctx: Context, state_shapes) -> Any:
  """Shardings for a TrainState pytree (of arrays or shapes): walker positions and
  log|psi| split over devices, everything else replicated."""
  walkers = ctx.walker_sharding()
  shardings = jax.tree.map(lambda _: ctx.replicated(), state_shapes)
  w = shardings.walkers._replace(x=walkers, log_psi=walkers)
  return shardings._replace(walkers=w)
