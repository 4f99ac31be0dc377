"""The four lowest states of helium with M_s = 0 (one electron of each spin), trained
together by natural excited states (NES-VMC).

Exact non-relativistic energies (G. W. F. Drake, "High precision calculations for
helium", Springer Handbook of Atomic, Molecular, and Optical Physics (2006), ch. 11):
1 1S -2.903724, 2 3S -2.175229, 2 1S -2.145974, 2 3P -2.133164 Ha; the fourth state is one
component of the 2 3P multiplet (M_L = -1, 0, 1 are degenerate). The triplets are the
M_s = 0 components, so evaluation labels them by <S^2> = 2 and the singlets by 0.

    python -m ferminet_fast.train --config configs/he_states.py
    python -m ferminet_fast.evaluate --run <run dir>
"""

from ferminet_fast import config


def get_config():
  cfg = config.default()
  cfg.system.atom = 'He'
  cfg.system.states = 4
  cfg.network.ferminet.hidden_dims = ((64, 8), (64, 8))
  cfg.network.determinants = 2
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 10000
  cfg.evaluation.steps = 2000
  return cfg
