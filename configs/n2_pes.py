"""N2's potential energy curve: one network over 8 bond lengths, 1.6 to 4.0 bohr, across
the equilibrium (2.068 bohr) into the stretched, strongly correlated region (a scan of the
N0-N1 distance; singlet, 14 electrons).

The network, optimizer, Hartree-Fock pretraining and evaluation of configs/n2.py. No
single reference energy.
"""

import os

from ferminet_fast.runtime import cli


def get_config():
  cfg = cli.load_config_file(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          'n2.py'))
  cfg.system.scan.atoms = (0, 1)
  cfg.system.scan.start = 1.6
  cfg.system.scan.stop = 4.0
  cfg.system.scan.points = 8
  cfg.system.name = 'N2_pes'
  cfg.system.exact_energy = None
  return cfg
