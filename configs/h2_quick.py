"""Quick H2 test from the FermiNeuT profile: 128 walkers, hidden (64, 8) x 2, 2 determinants."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'H 0 0 -0.7; H 0 0 0.7'
  cfg.system.name = 'H2'
  cfg.system.exact_energy = -1.174475
  cfg.batch_size = 128
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'adam'
  cfg.optim.iterations = 200
  cfg.mcmc.burn_in = 100
  return cfg
