"""What a run records about where it ran: the machine, its devices and the versions of
the libraries, written into timings.json and into every artifact under benchmarks/, so
that every figure can be traced."""

import datetime
import os
import platform
import subprocess

import jax

import ferminet_fast

VERSIONED = ('jax', 'jaxlib', 'flax', 'optax', 'chex', 'ml_collections', 'orbax-checkpoint',
             'numpy', 'scipy', 'threadpoolctl', 'folx', 'pyscf')


def versions() -> dict:
  """Versions of the package, Python and the libraries a run depends on (those installed)."""
  from importlib import metadata
  out = {'ferminet_fast': ferminet_fast.__version__, 'python': platform.python_version()}
  for name in VERSIONED:
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      pass
  return out


def _cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      return next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
  except (OSError, StopIteration):
    return platform.processor()


def memory_gib() -> float | None:
  """Total physical memory in GiB (None where the system does not say)."""
  try:
    with open('/proc/meminfo') as f:
      kib = next(int(line.split()[1]) for line in f if line.startswith('MemTotal:'))
    return round(kib / 2**20, 1)
  except (OSError, StopIteration, ValueError):
    try:
      return round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30, 1)
    except (ValueError, OSError, AttributeError):
      return None


def gpus() -> list:
  """Names of the NVIDIA GPUs nvidia-smi lists ([] without one or without nvidia-smi)."""
  try:
    out = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'],
                         capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return []
  return [line.strip() for line in out.stdout.splitlines() if line.strip()] if (
      out.returncode == 0) else []


def host() -> dict:
  """The machine without asking JAX for its devices: CPU model and cores, memory, GPUs."""
  return {'cpu': _cpu_model(), 'cpu_count': os.cpu_count(), 'memory_gib': memory_gib(),
          'gpus': gpus(), 'host': platform.node(), 'os': platform.platform()}


def machine() -> dict:
  devices = jax.devices()
  return {'platform': devices[0].platform, 'device': devices[0].device_kind,
          'cpu': _cpu_model(), 'device_count': len(devices), 'cpu_count': os.cpu_count(),
          'memory_gib': memory_gib(), 'host': platform.node(),
          'date': datetime.datetime.now().isoformat(timespec='seconds')}
