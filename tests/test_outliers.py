"""scripts/outliers.py: the nearest nucleus (by r Z), electron pair and node of sampled
walkers, which walkers alone would blow a step up, and a trained run sampled end to end
with each outlier's potential the Coulomb energy of its electrons."""

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import train
from scripts import artifacts
from scripts import outliers


def test_the_nearest_nucleus_is_taken_by_its_charge():
  nuclei, charges = np.array([[0.0, 0, 0], [2.0, 0, 0]]), np.array([7.0, 1.0])
  # Electron 0 is 0.05 bohr from the N (r Z = 0.35), electron 1 0.2 from the H (r Z = 0.2),
  # electron 2 0.1 bohr from electron 1.
  x = np.array([[0.05, 0, 0, 1.8, 0, 0, 1.8, 0.1, 0]])
  rz, z, r_ee = outliers.nearest(x, nuclei, charges)
  assert rz == pytest.approx([0.2]) and z.tolist() == [1.0] and r_ee == pytest.approx([0.1])


def test_only_a_walker_that_alone_blows_a_step_up_is_flagged():
  """A normal spread of 1.5 Ha over 256 walkers: a step blows up (variance 20 times its
  usual) when one walker lies sqrt(20 * 256) * 1.5 = 107 Ha from the median."""
  e = np.random.default_rng(0).normal(-109.0, 1.5, 256)
  e[10], e[20] = -109.0 - 60.0, -109.0 + 200.0
  assert np.flatnonzero(outliers.flagged(e, 256)).tolist() == [20]


def test_an_outlier_is_put_down_to_the_place_of_its_smallest_quantile():
  rng = np.random.default_rng(1)
  population = {p: np.sort(rng.uniform(0.5, 2.0, 1000)) for p in outliers.PLACES}
  o = {'nucleus': 0.6, 'electron': 0.7, 'node': 0.51}
  out = outliers.attribute(o, population)
  assert out['cause'] == 'node' and 0 <= out['quantile']['node'] < 0.02


def test_a_trained_run_is_sampled_and_rendered(tmp_path, monkeypatch):
  """With every walker away from the median flagged (the factor 0), each record's potential
  is the Coulomb energy of its electrons (He: -2/r1 - 2/r2 + 1/r12), its parts add up to the
  local energy's deviation's walker, and its nearest places are those of its positions."""
  run = tmp_path / 'he'
  train.train(tiny_config('He', **{'optim.iterations': 5, 'batch_size': 16,
                                   'log.save_path': str(run)}), quiet=True)
  monkeypatch.setattr(outliers.soak, 'BLOWUP_FACTOR', 0.0)
  data = outliers.sample(str(run), sweeps=3, burn_in=1, parameters='last')
  assert data['samples'] == 3 * 16 and data['checkpoint_step'] == 5
  assert len(data['outliers']) >= 3 * 15  # All but each sweep's median walker, at most.
  for o in data['outliers']:
    e = np.reshape(o['x'], (2, 3))
    r1, r2 = np.linalg.norm(e, axis=1)
    assert o['potential'] == pytest.approx(-2 / r1 - 2 / r2 + 1 / np.linalg.norm(e[0] - e[1]),
                                           rel=1e-4)
    assert o['nucleus'] == pytest.approx(2 * min(r1, r2), rel=1e-5)
    assert o['cause'] in outliers.PLACES and o['node'] > 0
  path = str(tmp_path / 'outliers.json')
  artifacts.append(path, {**data, 'label': 'He'})
  rows = [line for line in outliers.render_table(path).splitlines() if line.startswith('| He')]
  assert rows[0].split(' | ')[2] == '0'  # Five training steps: none judged blown up.
  assert rows[1].split(' | ')[3] == str(len(data['outliers']))


def test_a_blown_up_step_is_read_in_its_context():
  """A step whose samples jumped (the energy 2 Ha down, the variance 200-fold, the update
  before it ordinary) and one after a jump of the parameters (the update before it 10-fold)
  are told apart by the previous update's norm."""
  rows = [{'energy': -109.0, 'variance': 3.0, 'update_norm': 0.3, 'grad_norm': 5.0}
          for _ in range(1000)]
  rows[700] = {**rows[700], 'energy': -111.0, 'variance': 600.0, 'grad_norm': 50.0}
  rows[899] = {**rows[899], 'update_norm': 3.0}
  rows[900] = {**rows[900], 'variance': 300.0}
  samples, parameters = outliers.blown_up_steps(rows)
  assert samples == {'step': 700, 'variance': 200.0, 'energy_shift': -2.0,
                     'previous_update': 1.0, 'gradient': 10.0, 'next_variance': 1.0}
  assert parameters['step'] == 900 and parameters['previous_update'] == 10.0
