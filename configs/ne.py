"""Neon atom (singlet, 10 electrons). Exact non-relativistic energy -128.9376 Ha
(Chakravorty et al., Phys. Rev. A 47, 3649 (1993)).

The settings of the time-to-energy comparison with DeepMind FermiNet (scripts/race.py,
ACCURACY.md): KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC moves
per step, Hartree-Fock pretraining first.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'Ne'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
