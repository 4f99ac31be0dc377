"""Helium atom. Exact non-relativistic energy -2.903724 Ha."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'He'
  cfg.optim.iterations = 5000
  return cfg
