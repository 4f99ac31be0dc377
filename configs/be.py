"""Beryllium atom. Exact non-relativistic energy -14.667356 Ha."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'Be'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 4
  cfg.optim.iterations = 5000
  return cfg
