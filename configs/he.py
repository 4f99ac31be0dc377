"""Helium atom. Exact non-relativistic energy -2.903724 Ha.

Chosen for the ACCURACY.md target (within 0.5 mHa in <= 10 min on 2 CPU cores): KFAC,
hidden ((64, 8), (64, 8)), 2 determinants, 6000 steps.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'He'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 6000
  return cfg
