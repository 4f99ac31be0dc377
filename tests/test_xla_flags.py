"""XLA flags set on import: YNNPACK fusions are off on CPU unless the user says otherwise."""

import jax
import jax.numpy as jnp

from conftest import tiny_config
from ferminet_fast import networks, systems, xla_flags


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
  network = networks.make_network(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = jnp.ones((8, network.n_coords))
  hlo = jax.jit(jax.vmap(network.log_psi, (None, 0))).lower(params, x).compile().as_text()
  if jax.default_backend() == 'cpu':
    assert '%ynn_fusion' not in hlo  # What XLA names the fusions it gives YNNPACK.
