"""LiH's potential energy curve: one network over 10 bond lengths, 2.0 to 6.0 bohr, across
the equilibrium (3.015 bohr) to the stretched bond (a scan of the Li0-H1 distance).

The network, optimizer and evaluation of configs/lih.py. No single reference energy.
"""

import os

from ferminet_fast.runtime import cli


def get_config():
  cfg = cli.load_config_file(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          'lih.py'))
  cfg.system.scan.atoms = (0, 1)
  cfg.system.scan.start = 2.0
  cfg.system.scan.stop = 6.0
  cfg.system.scan.points = 10
  cfg.system.name = 'LiH_pes'
  cfg.system.exact_energy = None
  cfg.batch_size = 320  # 32 walkers per geometry.
  return cfg
