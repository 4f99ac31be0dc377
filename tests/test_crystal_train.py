"""configs/lih_crystal.py end to end through the command line, at a tiny size: the LiH cube is
pretrained from pyscf.pbc's k-point HF (the route and its energy per cell in the log), trains
a few steps with finite energies, and its run evaluates; the hydrogen chain (periodic in one
dimension) likewise, at the Gamma point and at two twists (complex Bloch orbitals, one run
with each network), whose runs the command line averages; and the slab (a layer of H2,
periodic in two dimensions) with each network. The chain's and the slab's configs with their
own network and optimizer (FermiNet, KFAC) train through the command line in
tests/test_shipped_configs.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ferminet_fast.errors import InputError
from ferminet_fast.stages import twists

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ('--config.batch_size=8', '--config.optim.iterations=3', '--config.pretrain.iterations=3',
        '--config.mcmc.burn_in=2', '--config.mcmc.steps=2', '--config.network.determinants=1',
        '--config.network.ferminet.hidden_dims=((8, 4),)', '--config.evaluation.steps=2',
        '--config.evaluation.burn_in=1', '--config.log.print_every=1')


def _train(config: str, run, *flags):
  """python -m ferminet_fast.train on `config` into `run` with `flags`; it must succeed."""
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.train', '--config', config,
                         *flags, f'--config.log.save_path={run}'],
                        cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _trained_three_finite_steps(run) -> None:
  energies = np.loadtxt(run / 'stats.csv', delimiter=',', skiprows=1, usecols=1, ndmin=1)
  assert len(energies) == 3 and np.all(np.isfinite(energies)), energies


def _evaluates(run) -> None:
  """python -m ferminet_fast.evaluate on the run gives a finite energy."""
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
                         '--steps=3', '--burn_in=1'], cwd=REPO, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert np.isfinite(json.loads((run / 'eval.json').read_text())['energy'])


def _pretrain_energy(proc) -> float:
  """pyscf.pbc's HF energy per cell that pretraining logged, Ha."""
  line = next(l for l in proc.stdout.splitlines() if 'Pretrain UHF/sto-3g energy' in l)
  return float(line.split('energy')[1].split()[0])


@pytest.mark.slow
def test_lih_crystal_config_pretrains_trains_and_evaluates(tmp_path):
  pytest.importorskip('pyscf')
  run = tmp_path / 'lih'
  proc = _train('configs/lih_crystal.py', run, *TINY)
  # KRHF/STO-3G of the primitive cell on 4 k-points, per cubic cell (4 LiH): pyscf.pbc's
  # energy, -31.4645 Ha (tests/test_periodic_hartree_fock.py checks the route's equality with
  # the cube's own Gamma-point HF).
  assert 'Pretrain KRHF/sto-3g energy -31.464' in proc.stdout, proc.stdout[-3000:]
  result = json.loads((run / 'result.json').read_text())
  _trained_three_finite_steps(run)
  assert np.isfinite(result['energy'])
  _evaluates(run)


def test_hydrogen_chain_config_pretrains_and_trains(tmp_path):
  """configs/h_chain.py, periodic in one dimension, with the Psiformer and SPRING: pyscf.pbc's
  HF of the 10-atom cell with dimension 1 (the route and pyscf's energy per cell in the log,
  below the 10 free atoms' -4.6658 Ha in STO-3G: the chain binds), then a few finite
  training steps. (The config's own FermiNet and KFAC train through the command line in
  tests/test_shipped_configs.py, and at a twist below.)"""
  pytest.importorskip('pyscf')
  run = tmp_path / 'chain'
  proc = _train('configs/h_chain.py', run, *TINY[:-3], '--config.network.network_type=psiformer',
                '--config.optim.optimizer=spring')
  assert 'chain (periodic along a1)' in proc.stdout, proc.stdout[-3000:]
  assert _pretrain_energy(proc) < 10 * -0.46658
  _trained_three_finite_steps(run)


@pytest.mark.slow
def test_hydrogen_chain_twist_average_through_the_command_line(tmp_path):
  """configs/h_chain.py at the two twists of the half-shifted two-point grid along the
  chain, +-(0.25, 0, 0), one run with FermiNet and KFAC, the other with Psiformer and Adam:
  each a complex wavefunction (said in the log), pretrained on pyscf.pbc's Bloch orbitals
  of the cell at its twist, whose HF energy per cell is the same at both (time reversal:
  E(k) = E(-k)); each trains a few finite steps and evaluates through the command line, and
  `python -m ferminet_fast.evaluate --twist_average` writes the mean of their evaluated
  energies, the combined error and the energy per electron (10 per cell). A run not yet
  evaluated and neither --run nor --twist_average are each one clear error (status 2), and
  the same twist twice is refused; none writes anything."""
  pytest.importorskip('pyscf')
  runs, pretrained = [tmp_path / 'plus', tmp_path / 'minus'], []
  for run, twist, (network, optimizer) in zip(runs, ('0.25', '-0.25'),
                                              (('ferminet', 'kfac'), ('psiformer', 'adam'))):
    proc = _train('configs/h_chain.py', run, *TINY, f'--config.system.twist=({twist}, 0, 0)',
                  f'--config.network.network_type={network}',
                  f'--config.optim.optimizer={optimizer}')
    assert f'twist ({twist}, 0, 0), complex wavefunction' in proc.stdout, proc.stdout[-3000:]
    pretrained.append(_pretrain_energy(proc))
    _trained_three_finite_steps(run)
  assert np.isfinite(pretrained[0])
  assert pretrained[0] == pytest.approx(pretrained[1], abs=1e-6)
  target = tmp_path / 'twist_average.json'
  average = lambda *args: subprocess.run(
      [sys.executable, '-m', 'ferminet_fast.evaluate', *args, f'--out={target}'], cwd=REPO,
      capture_output=True, text=True, timeout=600)
  _evaluates(runs[0])
  proc = average(f'--twist_average={runs[0]},{runs[1]}')
  assert proc.returncode == 2 and 'has not been evaluated' in proc.stderr, proc.stderr[-3000:]
  _evaluates(runs[1])
  with pytest.raises(InputError, match='appears twice'):  # What the command refuses, in process.
    twists.write([str(runs[0]), str(runs[0])], str(target), quiet=True)
  proc = average()
  assert proc.returncode == 2 and 'either --run' in proc.stderr, proc.stderr[-3000:]
  assert 'Traceback' not in proc.stderr
  assert not target.exists()
  proc = average(f'--twist_average={runs[0]},{runs[1]}')
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(target.read_text())
  evaluated = [json.loads((run / 'eval.json').read_text()) for run in runs]
  assert result['n_twists'] == 2
  assert result['energy'] == pytest.approx(np.mean([e['energy'] for e in evaluated]))
  assert result['error'] == pytest.approx(np.hypot(*[e['error'] for e in evaluated]) / 2)
  assert result['energy_per_electron'] == pytest.approx(result['energy'] / 10)
  assert [t['twist'] for t in result['twists']] == [[0.25, 0.0, 0.0], [0.75, 0.0, 0.0]]


@pytest.mark.parametrize('network_type,optimizer', [('psiformer', 'adam'), ('ferminet', 'spring')])
def test_h2_layer_slab_pretrains_trains_and_evaluates(tmp_path, network_type, optimizer):
  """configs/h2_layer.py, a slab, at one molecule per cell: pyscf.pbc's HF of the cell in two
  periodic dimensions (its energy per cell in the log, below two free H atoms' 2 x -0.46658
  Ha in STO-3G: the molecule binds), a few finite training steps, and the run evaluates;
  with each network, and the optimizers other than the config's own KFAC (which trains it
  through the command line in tests/test_shipped_configs.py)."""
  pytest.importorskip('pyscf')
  run = tmp_path / 'layer'
  proc = _train('configs/h2_layer.py', run, *TINY, '--config.system.supercell=(1, 1, 1)',
                f'--config.network.network_type={network_type}',
                f'--config.optim.optimizer={optimizer}')
  assert 'slab (periodic along a1, a2)' in proc.stdout, proc.stdout[-3000:]
  line = next(l for l in proc.stdout.splitlines() if '/sto-3g energy' in l)
  assert float(line.split('energy')[1].split()[0]) < 2 * -0.46658, line
  _trained_three_finite_steps(run)
  _evaluates(run)
