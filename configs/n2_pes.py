"""N2's potential energy curve: one network over 8 bond lengths, 1.6 to 4.0 bohr, across
the equilibrium (2.068 bohr) into the stretched, strongly correlated region (a scan of the
N0-N1 distance; singlet, 14 electrons).

The network, optimizer, Hartree-Fock pretraining and evaluation of configs/n2.py. No
single reference energy.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'N 0 0 -1.034; N 0 0 1.034'
  cfg.system.scan.atoms = (0, 1)
  cfg.system.scan.start = 1.6
  cfg.system.scan.stop = 4.0
  cfg.system.scan.points = 8
  cfg.system.name = 'N2_pes'
  cfg.system.exact_energy = None
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
