"""XLA flags the package sets before JAX starts its backend (read once, at that start).

On CPU, jaxlib 0.10 and later hand small element-wise and dot fusions to the YNNPACK
library; for our networks' small matrices that made the forward pass up to 2x slower than
XLA's own code (LiH: 1.9 against 0.8 ms per 256 walkers on 2 cores; BENCHMARKS.md), and
jaxlib 0.8.3 did not do it. We switch it off unless XLA_FLAGS already names the flag (a
user's setting wins). The flag exists in every jaxlib of our supported range (0.8.3-0.12);
outside it nothing is set, since XLA aborts on a flag it does not know. A backend started
before this package was imported (e.g. a notebook that ran JAX first) keeps its flags.
"""

import os

_YNN = '--xla_cpu_experimental_ynn_fusion_type'
_SUPPORTED = ((0, 8, 3), (0, 13, 0))  # jaxlib versions [low, high) known to have the flag.


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
