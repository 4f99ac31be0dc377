"""Shared fixtures: tiny systems and networks so the suite fits a 2-core CPU budget."""

import itertools
import os

import numpy as np


def _jaxlib_version() -> tuple:
  import re
  from importlib import metadata
  return tuple(int(re.match(r'\d*', p).group() or 0)
               for p in metadata.version('jaxlib').split('.')[:3])


# jaxlib versions [low, high) given --xla_cpu_use_fusion_emitters=false (checked: 0.8.3,
# 0.9.2; 0.12 no longer knows it, and XLA aborts on a flag it does not know). Not 0.10: with
# it, jaxlib 0.10.2's LAPACK deadlock, which tests/test_ordering.py reproduces, does not occur.
_LEGACY_CPU_EMITTERS = ((0, 8, 3), (0, 10, 0))


def xla_flags(devices: int = 1) -> str:
  """XLA_FLAGS of the tests and the processes they start: `devices` CPU devices, no LLVM
  optimisation of the generated code, and, where the jaxlib has the choice, fused
  computations emitted by XLA's elemental emitters rather than the MLIR fusion emitters,
  which take about twice as long to compile our programs. The suite compiles far more than
  it runs; XLA's own passes, which decide fusion and the order of floating-point operations,
  still run. The two settings take a fifth and then about a third off the suite's time on
  2 cores."""
  flags = (f'--xla_force_host_platform_device_count={devices} '
           '--xla_backend_optimization_level=0')
  if _LEGACY_CPU_EMITTERS[0] <= _jaxlib_version() < _LEGACY_CPU_EMITTERS[1]:
    flags += ' --xla_cpu_use_fusion_emitters=false'
  return flags


os.environ.setdefault('XLA_FLAGS', xla_flags())


def _share_compiled_programs() -> None:
  """Many tests (and the training processes some of them start, which inherit the
  environment) compile the same small programs: JAX's persistent compilation cache, in a
  directory of this session's own, compiles each once. Its key covers the program, the
  compile options, XLA_FLAGS and the versions, so a hit is the same executable."""
  if 'JAX_COMPILATION_CACHE_DIR' in os.environ:
    return
  import atexit
  import shutil
  import tempfile
  path = tempfile.mkdtemp(prefix='ferminet_fast_tests_jax_cache_')
  atexit.register(shutil.rmtree, path, ignore_errors=True)
  os.environ['JAX_COMPILATION_CACHE_DIR'] = path
  os.environ['JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS'] = '0.1'
  os.environ['JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES'] = '0'


_share_compiled_programs()

import pytest  # noqa: E402

from ferminet_fast import config, plan  # noqa: E402
from ferminet_fast.runtime import cli  # noqa: E402


# FERMINET_FAST_TESTS_COMBINATIONS: how much of each combination matrix of the training tests
# runs. Unset or 'all': every combination (README's test command); 'covering': the subset
# that covers every pair of values; 'each': the fewest combinations that hold every value
# once (CI's newest and oldest JAX, where what is checked is that each piece works with that
# JAX).
COMBINATIONS = os.environ.get('FERMINET_FAST_TESTS_COMBINATIONS', 'all')
if COMBINATIONS not in ('all', 'covering', 'each'):
  raise ValueError(f'FERMINET_FAST_TESTS_COMBINATIONS={COMBINATIONS!r}: all, covering or each')


def _fewest_holding_every_value(sets):
  """The smallest subset of `sets` (the first such in their order) in which every value of
  every position of `sets` appears."""
  def values(subset):
    return {(i, v) for s in subset for i, v in enumerate(s)}

  return next(list(subset) for size in range(1, len(sets) + 1)
              for subset in itertools.combinations(sets, size) if values(subset) == values(sets))


def combinations(every, covering, pairs_only=False):
  """The parameter sets of a combination matrix: `every` one, or with
  FERMINET_FAST_TESTS_COMBINATIONS=covering (or `pairs_only`) the subset `covering`, which
  must hold every pair of values of `every`'s sets (checked here, so the subset cannot
  drift), or with =each the fewest of `every`'s sets that hold each value."""
  every, covering = list(every), list(covering)

  def pairs(sets):
    return {(i, s[i], j, s[j]) for s in sets for j in range(len(s)) for i in range(j)}

  missing = pairs(every) - pairs(covering)
  if missing or not set(covering) <= set(every):
    raise ValueError(f'the covering subset misses the value pairs {sorted(missing)}')
  if COMBINATIONS == 'each':
    return _fewest_holding_every_value(every)
  return covering if COMBINATIONS == 'covering' or pairs_only else every


def network_optimizer_precision(optimizers, pairs_only=False, more=()):
  """The combination matrix of every network, optimizer (of `optimizers`) and precision a
  user may pick, as (network, optimizer, precision) sets for `combinations`, with its
  pairwise-covering subset. `pairs_only`: for a stage built on training (a set of
  geometries), whose network, optimizer and precision the molecular matrix of
  tests/test_train.py runs in every combination, every pair of values once. `more`: sets
  added to both (a network whose layers the others' share, e.g.
  `each_optimizer_and_precision`)."""
  return combinations(
      [(n, o, p) for n in ('ferminet', 'psiformer') for o in optimizers
       for p in ('float32', 'float64')] + list(more),
      [(n, o, p) for k, o in enumerate(optimizers)
       for n, p in (('ferminet', ('float32', 'float64')[k % 2]),
                    ('psiformer', ('float64', 'float32')[k % 2]))] + list(more), pairs_only)


def each_optimizer_and_precision(network, optimizers):
  """(network, optimizer, precision) sets of one more network beside the matrix of
  `network_optimizer_precision`, which its layers share: the fewest that hold each
  optimizer (of `optimizers`) and each precision once, the precisions in turn."""
  return [(network, o, ('float32', 'float64')[k % 2]) for k, o in enumerate(optimizers)]


def tiny_config(atom='He', **overrides):
  """A small, fast config; `overrides` are dotted keys, e.g. {'optim.iterations': 10}."""
  cfg = config.default()
  cfg.system.atom = atom
  cfg.batch_size = 64
  cfg.network.ferminet.hidden_dims = ((16, 4), (16, 4))
  cfg.network.determinants = 2
  cfg.optim.iterations = 20
  cfg.optim.optimizer = 'adam'
  cfg.mcmc.burn_in = 20
  cfg.log.print_every = 0
  cfg.log.timers = False
  cli.set_values(cfg, overrides)
  return cfg


@pytest.fixture(autouse=True)
def _x64_off_after_each_test():
  """train() and evaluate() of a float64 run turn on jax_enable_x64 for their whole process,
  as they must (and set the precision of float32 matrix products, matmul_precision); the
  next test starts from JAX's defaults again, whichever test ran before it (tests that want
  float64 say so with jax.enable_x64)."""
  yield
  import jax
  jax.config.update('jax_enable_x64', False)
  jax.config.update('jax_default_matmul_precision', None)


@pytest.fixture
def make_config():
  return tiny_config


def tiny_network(atom='He', dtype=None, seed=0, **overrides):
  """(system, network, params) of a tiny config; `dtype` defaults to float32."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast.physics import systems
  cfg = tiny_config(atom, **overrides)
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system, dtype or jnp.float32)
  return system, network, network.init(jax.random.PRNGKey(seed))


def electron_gas_hartree_fock_terms(length: float, n_up: int, twist=(0.0, 0.0, 0.0)) -> tuple:
  """(kinetic, exchange, Madelung) energies, Ha, and the occupied wavevectors (n_up, 3), of
  the plane-wave determinant of 2 n_up electrons in a cube of side `length` at the twist
  (fractional), the n_up lowest plane waves per spin, by direct sums: kinetic sum_s sum_k
  k^2 / 2; exchange -(2 pi / Omega) sum_s sum_{k != k'} 1 / |k - k'|^2 (the Ewald
  interaction's Fourier coefficients 4 pi / q^2, no q = 0 term); and the N electrons'
  Madelung self-energy N v_M / 2, v_M = -2.837297 / L for a cube (Fraser et al., Phys. Rev.
  B 53, 1814 (1996))."""
  n = np.array([v for v in np.ndindex(5, 5, 5)]) - 2 + np.asarray(twist)
  n = n[np.argsort(np.sum(n * n, axis=1), kind='stable')][:n_up]
  k = 2 * np.pi / length * n
  kinetic = 2 * np.sum(k * k) / 2
  q2 = np.sum((k[:, None] - k[None]) ** 2, axis=-1)
  off = ~np.eye(n_up, dtype=bool)
  exchange = -2 * (2 * np.pi / length**3) * np.sum(1 / q2[off])
  return kinetic, exchange, 2 * n_up * (-2.837297 / length) / 2, k
