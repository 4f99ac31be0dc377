"""Evaluation's options in the combinations users try, through the command line: each
network x each observable x {all electrons, ECP} x {float32, float64}, and several states
with each network, a few sweeps each. Every one must finish with finite estimates (or, where
a combination is not offered, stop with one line and status 2)."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import tiny_config
from ferminet_fast import config, train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An all-electron atom and one with the ccECP, each with up and down electrons (for <S^2>).
SYSTEMS = {'all-electron': ('Be', ''), 'ecp': ('Si', 'ccecp')}
OBSERVABLES = {'all-electron': 's2,dipole,density,forces,forces_warp',
               'ecp': 's2,dipole,density'}  # Forces are not offered with an ECP.


def small(atom, network, path, **overrides):
  return tiny_config(atom, **{
      'network.network_type': network, 'network.ferminet.hidden_dims': ((8, 4),),
      'network.determinants': 1, 'network.psiformer.layers': 1,
      'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4, 'batch_size': 32,
      'optim.iterations': 4, 'mcmc.steps': 2, 'mcmc.burn_in': 2,
      'log.save_path': str(path), **overrides})


def evaluate(run, *args):
  return subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
                         '--steps=3', '--burn_in=1', *args], cwd=REPO, capture_output=True,
                        text=True, timeout=600)


def finite(values) -> bool:
  return all(math.isfinite(v) for v in values)


# Every pair of (network, system kind, precision) values occurs once in these four runs.
PAIRWISE = [('ferminet', 'all-electron', 'float32'), ('ferminet', 'ecp', 'float64'),
            ('psiformer', 'all-electron', 'float64'),
            pytest.param('psiformer', 'ecp', 'float32', marks=pytest.mark.slow)]


@pytest.mark.parametrize('network,kind,precision', PAIRWISE)
def test_every_observable_with_each_network_system_and_precision(tmp_path, network, kind,
                                                                 precision):
  atom, ecp = SYSTEMS[kind]
  run = tmp_path / 'run'
  train.train(small(atom, network, run, **{'system.ecp': ecp, 'precision': precision}),
              quiet=True)
  proc = evaluate(run, f'--observables={OBSERVABLES[kind]}')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert '  s2: S^2 ' in proc.stdout and '  dipole: x ' in proc.stdout, proc.stdout[-3000:]
  result = json.loads((run / 'eval.json').read_text())
  assert math.isfinite(result['energy'])
  for name in OBSERVABLES[kind].split(','):
    obs = result['observables'][name]
    assert finite(obs['value']) if 'value' in obs else obs['summary'], (name, obs)
  if kind == 'all-electron':  # The forces' node regularisation: recorded, and set or refused.
    assert result['node_cutoff'] == config.SETTINGS['forces.node_cutoff'].default
    proc = evaluate(run, '--observables=forces', '--node_cutoff=0')
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((run / 'eval.json').read_text())
    assert result['node_cutoff'] == 0 and finite(result['observables']['forces']['value'])
    proc = evaluate(run, '--observables=forces', '--node_cutoff=-0.1')
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert 'node_cutoff' in proc.stderr, proc.stderr[-3000:]
  if kind == 'ecp':  # Offered combinations only: forces with an ECP are one clear error.
    proc = evaluate(run, '--observables=forces')
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert 'not available with effective core potentials' in proc.stderr


@pytest.mark.parametrize('network', [
    'ferminet', pytest.param('psiformer', marks=pytest.mark.slow)])
def test_several_states_report_spin_and_dipoles_when_asked(tmp_path, network):
  run = tmp_path / 'run'
  train.train(small('He', network, run, **{'system.states': 2}), quiet=True)
  proc = evaluate(run, '--observables=s2,dipole')
  assert proc.returncode == 0, proc.stderr[-3000:]
  states = json.loads((run / 'eval.json').read_text())['states']
  assert len(states['energy']['value']) == 2 and finite(states['s2']['value'])
  assert finite(states['transition_dipole_sq']['value'])
  proc = evaluate(run, '--observables=density')
  assert proc.returncode == 2 and 'Traceback' not in proc.stderr
  assert '--observables density: with 2 states evaluation estimates s2 and dipole' in proc.stderr


@pytest.mark.slow
def test_spin_of_a_psiformer_sulfur_atom_finishes(tmp_path):
  """A 16-electron atom's <S^2> (63 exchanges per walker) with the Psiformer: the
  evaluation that once never finished on jaxlib 0.10 (vmc/ordering.py). What it waited on
  is the electrons' exchanges, not the network's width: the small network of `small`, as in
  scripts/startup.py's case of the same atom."""
  run = tmp_path / 'run'
  train.train(small('S', 'psiformer', run, **{'batch_size': 64}), quiet=True)
  proc = evaluate(run, '--observables=s2')
  assert proc.returncode == 0, proc.stderr[-3000:]
  s2 = json.loads((run / 'eval.json').read_text())['observables']['s2']
  assert finite(s2['value'])
