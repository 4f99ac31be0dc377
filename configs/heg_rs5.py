"""Homogeneous electron gas at r_s = 5 bohr: 14 electrons (7 up, 7 down) in a simple cubic
cell, the Gamma point; as configs/heg.py at a lower density, where correlation is a larger
part of the energy."""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.rs = 5.0
  cfg.system.cell = 'sc'
  cfg.system.electrons = (7, 7)
  cfg.network.envelope = 'planewave'
  cfg.pretrain.iterations = 0
  cfg.mcmc.move_width = 0.5
  return cfg
