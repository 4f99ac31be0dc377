"""The five lowest states of the hydrogen atom, trained together by natural excited states
(NES-VMC): 1s (-1/2 Ha) and the four degenerate n = 2 states (2s, 2p; -1/8 Ha), any basis
of that manifold. A check with exact answers: the excitation energy is 3/8 Ha, and the
oscillator strengths from 1s summed over the n = 2 states are Lyman alpha's 1s -> 2p,
f = 0.4162 (2s contributes nothing; Bethe & Salpeter, Quantum Mechanics of One- and
Two-Electron Atoms (1957); from |<1s|z|2p_0>|^2 = 2^15 / 3^10 bohr^2).

    python -m ferminet_fast.train --config configs/h_states.py
    python -m ferminet_fast.evaluate --run <run dir>
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'H'
  cfg.system.states = 5
  cfg.network.ferminet.hidden_dims = ((32, 8), (32, 8))
  cfg.network.determinants = 1
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 5000
  cfg.evaluation.steps = 2000
  return cfg
