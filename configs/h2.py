"""H2 at R = 1.4 bohr. Exact Born-Oppenheimer energy -1.174475 Ha (Kolos & Wolniewicz).

Chosen for the ACCURACY.md target (within 0.5 mHa in <= 10 min on 2 CPU cores): KFAC,
hidden ((64, 8), (64, 8)), 2 determinants, 6000 steps.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'H 0 0 -0.7; H 0 0 0.7'
  cfg.system.units = 'bohr'
  cfg.system.name = 'H2'
  cfg.system.exact_energy = -1.174475
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 6000
  return cfg
