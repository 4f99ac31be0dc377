"""Nitrogen molecule at its equilibrium bond length, 2.068 bohr (singlet, 14 electrons).
Estimated exact non-relativistic energy -109.5423 Ha, the reference of Pfau et al.,
Phys. Rev. Research 2, 033429 (2020), Table 1.

The settings of the time-to-energy comparison with DeepMind FermiNet (scripts/race.py,
ACCURACY.md): KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC moves
per step, Hartree-Fock pretraining first.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'N 0 0 -1.034; N 0 0 1.034'
  cfg.system.name = 'N2'
  cfg.system.exact_energy = -109.5423
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
