"""Hydrogen atom. Exact energy -0.5 Ha; a single electron, so no determinant mixing."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'H'
  cfg.network.determinants = 1
  cfg.optim.iterations = 1000
  return cfg
