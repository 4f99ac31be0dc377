"""LiH's potential energy curve: one network over 10 bond lengths, 2.0 to 6.0 bohr, across
the equilibrium (3.015 bohr) to the stretched bond (a scan of the Li0-H1 distance).

The network, optimizer and evaluation of configs/lih.py. No single reference energy.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  cfg.system.units = 'bohr'
  cfg.system.scan.atoms = (0, 1)
  cfg.system.scan.start = 2.0
  cfg.system.scan.stop = 6.0
  cfg.system.scan.points = 10
  cfg.system.name = 'LiH_pes'
  cfg.system.exact_energy = None
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.batch_size = 320  # 32 walkers per geometry.
  cfg.optim.iterations = 11000
  cfg.evaluation.steps = 3000
  return cfg
