"""The two lowest states of H2 at R = 1.4 bohr with M_s = 0: X 1Sigma_g+ and the M_s = 0
component of b 3Sigma_u+, trained together by natural excited states (NES-VMC).

Born-Oppenheimer energies at R = 1.4 bohr: X -1.174475 Ha, b -0.78418 Ha (W. Kolos and
L. Wolniewicz, J. Chem. Phys. 43, 2429 (1965)), a vertical excitation energy of 0.39030 Ha
(10.62 eV). The next state (a triplet, -0.7127 Ha by pyscf FCI/aug-cc-pVTZ) is 71 mHa higher.

    python -m ferminet_fast.train --config configs/h2_states.py
    python -m ferminet_fast.evaluate --run <run dir>
"""

import os

from ferminet_fast.runtime import cli


def get_config():
  # configs/h2.py's molecule, network and optimizer (its exact energy is the ground state's).
  cfg = cli.load_config_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'h2.py'))
  cfg.system.states = 2
  cfg.network.determinants = 2
  cfg.optim.iterations = 10000
  cfg.evaluation.steps = 2000
  return cfg
