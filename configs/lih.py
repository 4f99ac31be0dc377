"""LiH at R = 3.015 bohr. Exact Born-Oppenheimer energy -8.070548 Ha.

Chosen for the ACCURACY.md targets (within 1.0 mHa in <= 10 min on 2 CPU cores, and at
least FermiNet's accuracy at its wall time): KFAC, 2 determinants (4 cost 15% more per
step and converged no better in the first 2000 steps), 11000 steps (about 450 s there).
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  cfg.system.units = 'bohr'
  cfg.system.name = 'LiH'
  cfg.system.exact_energy = -8.070548
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 11000
  cfg.evaluation.steps = 3000
  return cfg
