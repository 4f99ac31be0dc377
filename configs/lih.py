"""LiH at R = 3.015 bohr. Exact Born-Oppenheimer energy -8.070548 Ha."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  cfg.system.units = 'bohr'
  cfg.system.name = 'LiH'
  cfg.system.exact_energy = -8.070548
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 4
  cfg.optim.iterations = 5000
  return cfg
