"""Homogeneous electron gas: 14 electrons (7 up, 7 down) at r_s = 1 bohr in a simple cubic
cell with periodic boundaries, the Gamma point (DeepMind FermiNet's configs/heg.py system).
Coulomb energy by Ewald summation with a neutralising background; plane-wave envelopes of
the filled k-shells (1 + 6 plane waves per spin, a closed shell), which start as the
Hartree-Fock determinant, so there is no pretraining. Energies are per cell (divide by 14
for per electron).
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.rs = 1.0
  cfg.system.cell = 'sc'
  cfg.system.electrons = (7, 7)
  cfg.network.envelope = 'planewave'
  cfg.network.full_det = True
  cfg.pretrain.iterations = 0
  cfg.mcmc.move_width = 0.1
  return cfg
