"""The host's cores split into XLA CPU devices, one thread each, for runs on the CPU.

On one CPU device XLA runs the step's operations one after another and spreads each over
the cores with its own threads; our networks' matrices are small (tens of rows per walker
chunk), so that leaves the cores partly idle. Split into one device per core, the walkers
are sharded over the devices exactly as over GPUs (environment/distributed.py) and every
core runs its share of walkers on a thread of its own, the reductions over walkers (energy
mean, gradient, curvature statistics) inserted by XLA as on GPUs; each device then keeps
its products on its own thread, so XLA's thread pool is not asked to split them again
(BENCHMARKS.md, "The CPU split into devices").

The count is read by JAX once, when its backend starts: it is set here before that (every
entry point, training, evaluation and DMC, calls `split` first, through build.settings). A
count the user gave JAX (JAX_NUM_CPU_DEVICES, or --xla_force_host_platform_device_count in
XLA_FLAGS) wins over 'auto'; a process whose backend already started (a notebook that ran
JAX) keeps its devices. GPUs are not affected: the count applies to JAX's CPU platform
only.

jaxlib 0.10.0-0.11.0 split a large batched LAPACK call (the LU factorisation of the
determinants over a device's walkers) across the runtime's shared thread pool and wait for
the pieces; two devices doing so side by side each wait for a thread the other holds, and
the program never finishes (from five electrons of a spin on two cores). On those builds
'auto' keeps one device (`lapack_fault`); setup.cfg keeps pip away from them.
"""

import os
from importlib import metadata
from typing import Optional

import jax

from ferminet_fast.environment import xla_flags
from ferminet_fast.errors import InputError

FORCE_COUNT = '--xla_force_host_platform_device_count'
ONE_THREAD_EACH = '--xla_cpu_multi_thread_eigen=false'
_EIGEN = ONE_THREAD_EACH.split('=')[0]


def cores() -> int:
  """The cores this process may run on (its affinity mask where the OS has one)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # macOS, Windows.
    return os.cpu_count() or 1


# jaxlib builds [first, last) whose CPU LAPACK kernels deadlock side by side (module docstring).
LAPACK_FAULT = ((0, 10, 0), (0, 11, 1))


def jaxlib_version() -> tuple:
  """The installed jaxlib's (major, minor, patch), read without importing it."""
  return tuple(int(p) for p in metadata.version('jaxlib').split('.')[:3])


def lapack_fault(version: Optional[tuple] = None) -> bool:
  """Whether jaxlib `version` (default: the installed one) has the LAPACK deadlock."""
  return LAPACK_FAULT[0] <= (version or jaxlib_version()) < LAPACK_FAULT[1]


def fault_note() -> str:
  """Why 'auto' keeps one device on this jaxlib, for the log and --dry-run."""
  first, last = ('.'.join(map(str, v)) for v in LAPACK_FAULT)
  return (f"jaxlib {metadata.version('jaxlib')}'s CPU LAPACK kernels deadlock when two "
          f'devices factorise determinants side by side (jaxlib {first} up to {last}, not '
          f'included; builds outside that range split the cores into one device each)')


def fault_warning(n_devices: int) -> Optional[str]:
  """A warning for a run on `n_devices` CPU devices on a jaxlib with the fault, else None."""
  if n_devices < 2 or jax.default_backend() != 'cpu' or not lapack_fault():
    return None
  return (f'Warning: {n_devices} CPU devices on a jaxlib whose LAPACK kernels can deadlock '
          f'side by side: {fault_note()}. A stalled run ends with exit status 4 '
          "(watchdog.idle_s); distributed.cpu_devices = 'auto' avoids the fault.")


def count(setting, batch_size: int, n_cores: int, environ, multi_process: bool,
          faulty: Optional[bool] = None) -> Optional[int]:
  """The CPU device count `distributed.cpu_devices` = `setting` asks for, or None to leave
  JAX's own: 'auto' gives the most devices, at most one per core, that split `batch_size`
  evenly (one on a jaxlib whose LAPACK kernels deadlock side by side: `faulty`, default
  `lapack_fault()`), and leaves a count the user set in `environ` and multi-process runs
  (whose batch is split over processes first) alone; an integer is taken as it is."""
  if setting != 'auto':
    return int(setting)
  if (multi_process or 'JAX_NUM_CPU_DEVICES' in environ
      or FORCE_COUNT in environ.get('XLA_FLAGS', '')):
    return None
  if lapack_fault() if faulty is None else faulty:
    return 1
  return max(n for n in range(1, max(n_cores, 1) + 1) if batch_size % n == 0)


def split(setting, batch_size: int, multi_process: bool = False,
          strict: bool = True) -> Optional[int]:
  """Sets JAX's CPU device count from `setting` before its backend starts (module
  docstring); returns the count set, or None where JAX's own count stands. An integer that
  can no longer take effect (the backend has started with another count) is an InputError
  if `strict` (the count was asked for now), else left (a later stage reading the count
  its run was trained with)."""
  n = count(setting, batch_size, cores(), os.environ, multi_process)
  if n is None:
    return None
  if xla_flags.backend_started():
    started = None if setting == 'auto' or not strict else len(jax.devices('cpu'))
    if started in (None, n):
      return None
    raise InputError(f'config.distributed.cpu_devices = {n}: JAX has already started in this '
                     f'process with {started} CPU device(s), and the count is '
                     'read only when it starts; set it in a fresh process (or the environment '
                     'variable JAX_NUM_CPU_DEVICES before importing jax)')
  jax.config.update('jax_num_cpu_devices', n)
  if n > 1 and _EIGEN not in os.environ.get('XLA_FLAGS', ''):
    xla_flags.request(ONE_THREAD_EACH)
  return n
