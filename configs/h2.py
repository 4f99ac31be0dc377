"""H2 at R = 1.4 bohr. Exact Born-Oppenheimer energy -1.174475 Ha (Kolos & Wolniewicz)."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'H 0 0 -0.7; H 0 0 0.7'
  cfg.system.units = 'bohr'
  cfg.system.name = 'H2'
  cfg.system.exact_energy = -1.174475
  cfg.optim.iterations = 5000
  return cfg
