"""XLA flags set on import: YNNPACK fusions are off on CPU unless the user says otherwise."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from conftest import tiny_config
from ferminet_fast import plan
from ferminet_fast.physics import systems
from ferminet_fast.environment import xla_flags

pytestmark = pytest.mark.jax_range


def test_defaults_added_only_where_the_user_set_nothing():
  flag = '--xla_cpu_experimental_ynn_fusion_type'
  assert xla_flags.with_defaults('', (0, 12, 0)) == f'{flag}='
  assert xla_flags.with_defaults('--xla_dump_to=/tmp/d', (0, 8, 3)) == f'--xla_dump_to=/tmp/d {flag}='
  assert xla_flags.with_defaults(f'{flag}=dot', (0, 12, 0)) == f'{flag}=dot'  # The user's wins.
  assert xla_flags.with_defaults('', (0, 7, 2)) == ''  # Unknown to that jaxlib: not set.
  assert xla_flags.with_defaults('', (0, 13, 0)) == ''


def test_compiled_forward_pass_has_no_ynn_fusions():
  cfg = tiny_config('He')
  cfg.system.atom, cfg.system.molecule = '', 'Li 0 0 0; H 0 0 3.015'
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = jnp.ones((8, network.n_coords))
  hlo = jax.jit(jax.vmap(network.log_psi, (None, 0))).lower(params, x).compile().as_text()
  if jax.default_backend() == 'cpu':
    assert '%ynn_fusion' not in hlo  # What XLA names the fusions it gives YNNPACK.


def test_deterministic_flag_is_set_only_before_the_backend_starts(monkeypatch):
  """A flag requested after JAX started would do nothing, so `request` reports it; in a fresh
  process it lands in XLA_FLAGS before the backend starts."""
  jnp.ones(1).block_until_ready()
  assert xla_flags.backend_started()
  monkeypatch.setenv('XLA_FLAGS', '')
  assert not xla_flags.request(xla_flags.GPU_DETERMINISTIC)
  monkeypatch.setenv('XLA_FLAGS', xla_flags.GPU_DETERMINISTIC)
  assert xla_flags.request(xla_flags.GPU_DETERMINISTIC)  # The user set it: in effect.
  code = ('import os; from ferminet_fast.environment import xla_flags as f\n'
          'assert not f.backend_started()\n'
          'assert f.request(f.GPU_DETERMINISTIC)\n'
          'import jax.numpy as jnp; jnp.ones(1).block_until_ready()\n'
          'assert f.backend_started()\n'
          'print(os.environ["XLA_FLAGS"])')
  env = {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}
  out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)
  assert out.returncode == 0, out.stderr
  assert xla_flags.GPU_DETERMINISTIC in out.stdout.split()
