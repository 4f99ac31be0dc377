"""Optimizers: KFAC and Adam both lower the energy of He; learning-rate defaults."""

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import config, optim, train


@pytest.mark.parametrize('optimizer', ['adam', 'kfac'])
def test_optimizer_lowers_helium_energy(tmp_path, optimizer):
  cfg = tiny_config('He', **{'optim.optimizer': optimizer, 'optim.iterations': 200,
                             'batch_size': 128, 'log.save_path': str(tmp_path / optimizer)})
  result = train.train(cfg, quiet=True)
  e = result.history['energy']
  assert np.all(np.isfinite(e))
  assert e[-50:].mean() < e[:10].mean() - 0.05, (e[:10].mean(), e[-50:].mean())
  assert e[-50:].mean() > -2.9037 - 0.02  # Variational: not far below the exact energy.


def test_learning_rate_defaults_follow_the_optimizer():
  cfg = config.default().optim
  cfg.optimizer = 'kfac'
  assert optim.lr_schedule(cfg)(0.0) == pytest.approx(0.05)
  assert optim.lr_schedule(cfg)(1e4) == pytest.approx(0.025)
  cfg.optimizer = 'adam'
  cfg.lr.rate = 0.003
  assert optim.lr_schedule(cfg)(1000.0) == pytest.approx(0.0015)
