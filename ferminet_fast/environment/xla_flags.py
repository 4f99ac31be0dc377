"""XLA flags the package sets before JAX starts its backend (read once, at that start).

On CPU, jaxlib 0.10 and later hand small element-wise and dot fusions to the YNNPACK
library; for our networks' small matrices that made the forward pass markedly slower than
XLA's own code (BENCHMARKS.md, "YNNPACK fusions on CPU"), and jaxlib 0.8.3 did not do it.
We switch it off unless XLA_FLAGS already names the flag (a user's setting wins). The flag
exists in every jaxlib of our supported range (0.8.3-0.12); outside it nothing is set,
since XLA aborts on a flag it does not know. A backend started before this package was
imported (e.g. a notebook that ran JAX first) keeps its flags.

`config.debug.deterministic` asks XLA for deterministic GPU kernels, a flag that also counts
only if it is set before the backend starts: `request` adds it and says whether that was
in time.
"""

import os

_YNN = '--xla_cpu_experimental_ynn_fusion_type'
_SUPPORTED = ((0, 8, 3), (0, 13, 0))  # jaxlib versions [low, high) known to have the flag.
GPU_DETERMINISTIC = '--xla_gpu_deterministic_ops=true'


def _jaxlib_version() -> tuple:
  from importlib import metadata
  try:
    return tuple(int(p) for p in metadata.version('jaxlib').split('.')[:3])
  except (metadata.PackageNotFoundError, ValueError):
    return ()


def with_defaults(flags: str, jaxlib_version: tuple) -> str:
  """`flags` (an XLA_FLAGS value) with our defaults added where the user set nothing."""
  if _YNN in flags or not _SUPPORTED[0] <= jaxlib_version < _SUPPORTED[1]:
    return flags
  return f'{flags} {_YNN}='.strip()


def set_defaults() -> None:
  """Adds our defaults to the XLA_FLAGS environment variable."""
  flags = os.environ.get('XLA_FLAGS', '')
  new = with_defaults(flags, _jaxlib_version())
  if new != flags:
    os.environ['XLA_FLAGS'] = new


def backend_started() -> bool:
  """Whether JAX has started a backend in this process (after which XLA_FLAGS is not read
  again). JAX has no public query for this; its private one exists, with this name, in
  every jax of our supported range (0.8.3-0.12), and is looked up defensively."""
  from jax._src import xla_bridge  # Private: only here, checked by tests/test_xla_flags.py.
  started = getattr(xla_bridge, 'backends_are_initialized', None)
  return bool(started()) if started is not None else bool(getattr(xla_bridge, '_backends', {}))


def request(flag: str) -> bool:
  """Adds `flag` to XLA_FLAGS (if absent). Returns whether it takes effect: True if it was
  there already or the backend has not started yet."""
  flags = os.environ.get('XLA_FLAGS', '')
  if flag in flags.split():
    return True
  if backend_started():
    return False
  os.environ['XLA_FLAGS'] = f'{flags} {flag}'.strip()
  return True
