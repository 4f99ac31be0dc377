"""Whether the compiled training step fits the device's memory, said before training with
the numbers (instead of an out-of-memory error from XLA in the first step), and, when the
local energies' chunk size is 'auto', the chunk that makes it fit."""

import os
from typing import Callable, Optional, Sequence

import jax

from ferminet_fast.errors import InputError
from ferminet_fast.vmc import loss, step

MIB = 2 ** 20


def planned_bytes(compiled_fn) -> Optional[dict]:
  """XLA's memory plan for one call of a compiled function, per device, in bytes: its
  arguments, temporaries and `new` (what a call allocates beyond its arguments:
  outputs + temporaries - outputs written into donated arguments). None if not reported."""
  a = compiled_fn.memory_analysis()
  if a is None:
    return None
  return {'arguments': a.argument_size_in_bytes, 'temporaries': a.temp_size_in_bytes,
          'new': a.output_size_in_bytes + a.temp_size_in_bytes - a.alias_size_in_bytes}


def memory_mb(compiled_fn) -> dict:
  """MiB of one call of a compiled function as XLA plans it (`step_memory_mb`: arguments +
  new allocations), and the device's peak so far where the backend reports it."""
  out = {}
  plan = planned_bytes(compiled_fn)
  if plan is not None:
    out['step_memory_mb'] = (plan['arguments'] + plan['new']) / MIB
  stats = jax.local_devices()[0].memory_stats()
  if stats and 'peak_bytes_in_use' in stats:
    out['device_peak_memory_mb'] = stats['peak_bytes_in_use'] / MIB
  return out


def _host_available_bytes() -> Optional[int]:
  """MemAvailable of /proc/meminfo (Linux), else the free physical pages; None if unknown."""
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  try:
    return os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
  except (ValueError, OSError, AttributeError):
    return None


def free_bytes(devices: Sequence[jax.Device]) -> Optional[int]:
  """Bytes free on the fullest of `devices`: the allocator's limit minus what is in use
  where the backend reports it (GPU, TPU); for CPU devices, which share the host's
  available memory, their equal share of it; None where neither is known."""
  free = []
  for d in devices:
    s = d.memory_stats()
    if s and 'bytes_limit' in s:
      free.append(s['bytes_limit'] - s.get('bytes_in_use', 0))
  if free:
    return min(free)
  if devices[0].platform == 'cpu':
    host = _host_available_bytes()
    return None if host is None else host // len(devices)
  return None


def compile_to_fit(make_parts: Callable[[int], step.Parts], chunk_size: int, adjustable: bool,
                   state: step.TrainState, free: Optional[Callable] = None,
                   agree: Optional[Callable] = None, geometry=None) -> tuple:
  """(parts, compiled step, MiB free or None): the step of `make_parts(chunk_size)` compiled
  for `state`, with its planned memory set against the free memory of the state's devices.

  When it does not fit and `adjustable` (chunk size 'auto'), the local energies are split
  into chunks of half as many walkers (the whole batch first), recompiling, down to one
  walker per device (over a set of geometries, to one walker of each geometry the step
  computes together: parts.swept); otherwise InputError with the numbers. `free(devices)`:
  bytes free on this process's devices (default free_bytes); `agree(bytes)`: the value
  every process decides by (distributed.Context.smallest: the same decision on every host).
  `geometry`: the nuclei as an argument of the step (step.compile_step), for nuclei that
  move."""
  free, agree = free or free_bytes, agree or (lambda v: v)
  devices = state.walkers.x.sharding.device_set
  local = sorted((d for d in devices if d.process_index == jax.process_index()),
                 key=lambda d: d.id)
  batch = state.walkers.x.shape[0]
  while True:
    parts = make_parts(chunk_size)
    compiled = step.compile_step(parts, state, geometry)
    plan, have = planned_bytes(compiled.train_step), agree(free(local))
    if plan is None or have is None or plan['new'] <= have:
      return parts, compiled, None if have is None else have / MIB
    # Over a set of G geometries the step computes the chains of parts.swept of them: a
    # chunk of more walkers than those is all of them at once.
    computed = batch if parts.geometries is None else (
        batch // parts.geometries.positions.shape[0] * parts.swept)
    smaller = min(chunk_size or batch, computed) // 2
    if not adjustable or smaller < max(len(devices), parts.swept):
      chunks = f'chunks of {chunk_size} walkers' if chunk_size else 'all walkers at once'
      if chunk_size and parts.swept > 1:
        chunks += (f' ({loss.chunk_per_geometry(chunk_size, parts.swept)} of each of '
                   f'{parts.swept} geometries)')
      hint = ('lower batch_size or use more devices' if adjustable else
              "set optim.energy_chunk_size to fewer walkers or 'auto', lower batch_size, or "
              'use more devices')
      raise InputError(
          f'the training step needs {plan["new"] / MIB:.0f} MiB per device beyond its '
          f'{plan["arguments"] / MIB:.0f} MiB of state ({plan["temporaries"] / MIB:.0f} MiB '
          f'of temporaries; {batch // len(devices)} walkers per device, local energies on '
          f'{chunks}), and the device has {have / MIB:.0f} MiB free: {hint}')
    chunk_size = smaller
