"""scripts/convergence.py: a long training's step energies are judged flat, falling or rising
from the two halves of their last 40%, in block means for the curve, and each run is one row
of the rendered table."""

import os

import numpy as np
import pytest

from scripts import artifacts
from scripts import convergence


def _noisy(mean: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
  return mean + sigma * np.random.default_rng(seed).normal(size=mean.shape)


def test_a_plateau_is_flat_and_a_slope_is_falling():
  """10 mHa of noise per step over 10000 steps: the halves' means are known to about
  0.14 mHa, so a plateau is flat and a fall of 1 mHa per 1000 steps is seen."""
  steps = np.arange(10000)
  flat = convergence.tail_change(_noisy(np.full(10000, -0.5), 0.01))
  assert flat['verdict'] == 'flat' and abs(flat['change']) < 2 * flat['error']
  assert flat['steps'] == 10000 and flat['first_step'] == 6000 and flat['spacing_steps'] == 2000
  falling = convergence.tail_change(_noisy(-0.5 - 1e-6 * steps, 0.01))
  assert falling['verdict'] == 'falling'
  assert falling['change'] == pytest.approx(-2e-3, abs=5 * falling['error'])
  rising = convergence.tail_change(_noisy(-0.5 + 1e-6 * steps, 0.01))
  assert rising['verdict'] == 'rising'


def test_too_few_steps_have_no_verdict():
  assert convergence.tail_change(np.zeros(50)) is None


def test_blocks_are_the_means_of_consecutive_steps():
  energy = np.repeat([-1.0, -2.0, -3.0], 500)
  b = convergence.blocks(np.concatenate([energy, np.zeros(200)]))  # The rest: no block.
  assert [(s, m) for s, m, _ in b] == [(0, -1.0), (500, -2.0), (1000, -3.0)]


def test_each_run_is_a_row_with_its_verdict(tmp_path):
  path = str(tmp_path / 'convergence.json')
  energy = _noisy(np.full(4000, 8.0), 0.01)
  data = {'system': 'HEG', 'zero': 8.5, 'zero_source': 'Hartree-Fock energy of the cell',
          'steps': 4000, 'wall_s': 600.0, 'blocks': convergence.blocks(energy),
          'tail_change': convergence.tail_change(energy),
          'evaluated_last': {'error_mha': -500.0, 'stat_mha': 1.0},
          'evaluated_average': None, 'eval_sweeps': 2000, 'eval_burn_in': 100}
  artifacts.append(path, data, {'date': '2026-11-30T00:00:00+00:00', 'machine': None,
                                'commit': 'abc', 'dirty': False})
  table = convergence.render(path)
  row = next(line for line in table.splitlines() if line.startswith('| 2026-11-30'))
  assert '| HEG | 4000 | 10 min | 150 |' in row
  assert '| −500.0 ± 1.0 | −35.71 ± 0.07 | not evaluated |' in row  # 14 electrons.
  assert row.endswith(': flat |')
  convergence.plot(data, str(tmp_path / 'curve.png'))
  assert os.path.getsize(tmp_path / 'curve.png') > 0
