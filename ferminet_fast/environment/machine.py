"""What a run records about where it ran: the machine, its devices and the versions of
the libraries, written into timings.json so that every figure can be traced."""

import datetime
import os
import platform

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


def machine() -> dict:
  devices = jax.devices()
  return {'platform': devices[0].platform, 'device': devices[0].device_kind,
          'cpu': _cpu_model(), 'device_count': len(devices), 'cpu_count': os.cpu_count(),
          'host': platform.node(), 'date': datetime.datetime.now().isoformat(timespec='seconds')}
