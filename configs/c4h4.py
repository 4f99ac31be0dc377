"""Cyclobutadiene, C4H4 (28 electrons, singlet), in its rectangular ground-state geometry
(bohr; C=C 2.5587, C-C 2.9555 bohr) from the MR-BWCCSD(T) calculations of Bhaskaran-Nair et
al., J. Chem. Phys. 129, 184104 (2008), as DeepMind FermiNet's organic.py ('cycbut-ground')
and Hermann et al., Nat. Chem. 12, 891 (2020) use it. The largest
molecule of the size sweep against FermiNet (python -m scripts.benchmark --systems C4H4),
at the comparison settings: KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants,
10 MCMC moves per step, Hartree-Fock pretraining first. No exact energy is set.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = ('C 0 0 0; C 2.9555318 0 0; C 2.9555318 2.5586891 0; '
                         'C 0 2.5586891 0; H -1.4402903 -1.4433100 0; '
                         'H 4.3958220 -1.4433100 0; H 4.3958220 4.0019994 0; '
                         'H -1.4402903 4.0019994 0')
  cfg.system.name = 'C4H4'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
