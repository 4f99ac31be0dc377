"""Benzene, C6H6 (42 electrons, singlet), in its D6h ground-state geometry (bohr; C-C
2.6314, C-H 2.0419 bohr, i.e. 1.3925 and 1.0805 angstrom) as DeepMind FermiNet's
configs/excited/benzene.py gives it for Pfau et al., Science 385, eadn0137 (2024), Fig. 6.
The largest molecule of the size sweep against FermiNet (python -m scripts.benchmark
--systems C6H6), at the comparison settings: KFAC, batch 256, hidden ((64, 8), (64, 8)),
2 determinants, 10 MCMC moves per step, Hartree-Fock pretraining first. No exact energy is
set.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = ('C 0 2.63144965 0; C -2.27890225 1.31572483 0; '
                         'C -2.27890225 -1.31572483 0; C 0 -2.63144965 0; '
                         'C 2.27890225 -1.31572483 0; C 2.27890225 1.31572483 0; '
                         'H -4.04725813 2.33668557 0; H -4.04725813 -2.33668557 0; '
                         'H 0 -4.67337115 0; H 4.04725813 -2.33668557 0; '
                         'H 4.04725813 2.33668557 0; H 0 4.67337115 0')
  cfg.system.name = 'C6H6'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
