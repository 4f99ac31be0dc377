"""Shared fixtures: tiny systems and networks so the suite fits a 2-core CPU budget."""

import os
import sys

os.environ.setdefault('XLA_FLAGS', '--xla_force_host_platform_device_count=1')
# The comparison workloads (comparisons/) are not installed with the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

from ferminet_fast import config  # noqa: E402


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
  for key, value in overrides.items():
    node = cfg
    *path, last = key.split('.')
    for p in path:
      node = node[p]
    node[last] = value
  return cfg


@pytest.fixture
def make_config():
  return tiny_config


def tiny_network(atom='He', dtype=None, seed=0, **overrides):
  """(system, network, params) of a tiny config; `dtype` defaults to float32."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast.physics import systems
  from ferminet_fast.wavefunction import networks
  cfg = tiny_config(atom, **overrides)
  system = systems.make_system(cfg.system)
  network = networks.make_network(cfg.network, system, dtype or jnp.float32)
  return system, network, network.init(jax.random.PRNGKey(seed))
