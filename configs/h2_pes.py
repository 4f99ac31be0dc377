"""H2's potential energy curve: one network over 12 bond lengths, 0.5 to 6.0 bohr (a scan
of the H0-H1 distance of the molecule below, which gives the axis).

The network and optimizer of configs/h2.py. No single reference energy: the exact
Born-Oppenheimer curve is Kolos & Wolniewicz's, -1.174475 Ha at 1.4 bohr.
"""

import os

from ferminet_fast.runtime import cli


def get_config():
  cfg = cli.load_config_file(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          'h2.py'))
  cfg.system.scan.atoms = (0, 1)
  cfg.system.scan.start = 0.5
  cfg.system.scan.stop = 6.0
  cfg.system.scan.points = 12
  cfg.system.name = 'H2_pes'
  cfg.system.exact_energy = None
  cfg.batch_size = 384  # 32 walkers per geometry.
  return cfg
