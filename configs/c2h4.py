"""Ethene, C2H4 (16 electrons, singlet), at the geometry of DeepMind FermiNet's c2h4.py
config (bohr): C=C 2.5227, C-H 2.0509 bohr. A molecule of the size users publish, used
for benchmarks against FermiNet (python -m scripts.benchmark --systems C2H4) at the
comparison settings: KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC
moves per step, Hartree-Fock pretraining first. No exact energy is set.
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = ('C 0 0 1.26135; C 0 0 -1.26135; H 0 1.74390 2.33889; '
                         'H 0 -1.74390 2.33889; H 0 1.74390 -2.33889; H 0 -1.74390 -2.33889')
  cfg.system.name = 'C2H4'
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 20000
  cfg.pretrain.iterations = 1000
  cfg.evaluation.steps = 1000
  return cfg
