"""Lithium atom (doublet). Exact non-relativistic energy -7.478060 Ha."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'Li'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.optim.iterations = 5000
  return cfg
