"""Beryllium atom. Exact non-relativistic energy -14.667356 Ha.

Chosen for the ACCURACY.md targets (within 1.6 mHa in <= 10 min on 2 CPU cores, and at
least FermiNet's accuracy at its wall time): KFAC, 2 determinants (4 cost 20% more per
step and converged no better in the first 2000 steps), 11000 steps (about 420 s there).
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'Be'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 11000
  cfg.evaluation.steps = 3000
  return cfg
