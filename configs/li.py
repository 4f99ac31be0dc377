"""Lithium atom (doublet). Exact non-relativistic energy -7.478060 Ha.

Chosen for the ACCURACY.md target (within 1.0 mHa in <= 10 min on 2 CPU cores): KFAC,
2 determinants, 12000 steps (about 330 s there).
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'Li'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 12000
  cfg.evaluation.steps = 3000
  return cfg
