"""The two lowest states of H2 at R = 1.4 bohr with M_s = 0: X 1Sigma_g+ and the M_s = 0
component of b 3Sigma_u+, trained together by natural excited states (NES-VMC).

Born-Oppenheimer energies at R = 1.4 bohr: X -1.174475 Ha, b -0.78418 Ha (W. Kolos and
L. Wolniewicz, J. Chem. Phys. 43, 2429 (1965)), a vertical excitation energy of 0.39030 Ha
(10.62 eV). The next state (a triplet, -0.7127 Ha by pyscf FCI/aug-cc-pVTZ) is 71 mHa higher.

    python -m ferminet_fast.train --config configs/h2_states.py
    python -m ferminet_fast.evaluate --run <run dir>
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.molecule = 'H 0 0 -0.7; H 0 0 0.7'
  cfg.system.units = 'bohr'
  cfg.system.name = 'H2'
  cfg.system.exact_energy = -1.174475  # The ground state's; the states' sum has none.
  cfg.system.states = 2
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 10000
  cfg.evaluation.steps = 2000
  return cfg
