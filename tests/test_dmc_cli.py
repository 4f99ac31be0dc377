"""The DMC stage (ferminet_fast/dmc.py) on trained runs: the command writes dmc.json with
finite estimates for each network and precision and for an ECP atom, a stopped run resumes
to the same result as one never stopped, and bad input stops with one line and status 2."""

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import tiny_config, xla_flags
from ferminet_fast import dmc, train
from ferminet_fast.runtime import rundir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def small(atom, path, **overrides):
  return tiny_config(atom, **{
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'network.psiformer.layers': 1, 'network.psiformer.heads': 2,
      'network.psiformer.head_dim': 4, 'batch_size': 16, 'optim.iterations': 4,
      'mcmc.steps': 2, 'mcmc.burn_in': 2, 'log.save_path': str(path), **overrides})


@pytest.fixture(scope='module')
def trained_he(tmp_path_factory):
  """A briefly trained He run (`small`), trained once for the tests that only read it."""
  run = tmp_path_factory.mktemp('trained') / 'run'
  train.train(small('He', run), quiet=True)
  return run


@pytest.fixture
def he_run(trained_he, tmp_path):
  """A copy of the trained He run of this module, this test's own to write into."""
  run = tmp_path / 'run'
  shutil.copytree(trained_he, run)
  return run


def command(*args):
  return subprocess.run([sys.executable, '-m', 'ferminet_fast.dmc', *args], cwd=REPO,
                        capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize('network,precision,atom,ecp', [
    ('ferminet', 'float32', 'He', ''),
    pytest.param('psiformer', 'float64', 'Li', '', marks=pytest.mark.slow),
    ('ferminet', 'float64', 'Si', 'ccecp')])
def test_command_writes_dmc_json(tmp_path, network, precision, atom, ecp):
  run = tmp_path / 'run'
  train.train(small(atom, run, **{'network.network_type': network, 'precision': precision,
                                  'system.ecp': ecp}), quiet=True)
  proc = command(f'--run={run}', '--tau=0.02,0.01', '--steps=6', '--equilibration=2')
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads((run / 'dmc.json').read_text())
  assert [r['tau'] for r in result['per_tau']] == [0.02, 0.01]
  assert all(math.isfinite(r['energy']) and 0 < r['tau_eff'] <= r['tau']
             for r in result['per_tau'])
  assert math.isfinite(result['extrapolated']['energy'])
  assert result['ecp'] == ('tmoves' if ecp else None)  # T-moves: the default with an ECP.
  assert result['precision'] == precision
  assert result['moves'] == 'electron'  # The default.
  assert all(0 < r['acceptance'] <= 1 and r['ms_per_step'] > 0 for r in result['per_tau'])
  sign = result['sign_check']
  assert sign['walkers'] == 16 and 0 <= sign['fraction_opposite_sign'] <= 1
  assert sign['nodeless_over_samples'] == (sign['fraction_opposite_sign'] == 0)
  rows = (run / 'dmc_stats.csv').read_text().splitlines()
  assert len(rows) == 1 + 2 * 8
  assert (run / 'plots' / 'dmc_energy.png').exists() and (run / 'plots' / 'dmc_tau.png').exists()


class StopAt:
  """A stop signal that arrives once `calls` steps have looked for it."""

  def __init__(self, calls):
    self.calls = calls

  @property
  def received(self):
    self.calls -= 1
    return 'SIGTERM' if self.calls < 0 else None


@pytest.mark.parametrize('moves', ['electron', 'all'])
def test_stopped_run_resumes_to_the_same_result(tmp_path, he_run, moves):
  settings = dict(tau=(0.02, 0.01), steps=5, equilibration=2, quiet=True, moves=moves)
  whole = dmc.dmc(str(he_run), **settings)
  os.rename(he_run / 'dmc.json', tmp_path / 'whole.json')
  shutil.rmtree(he_run / 'dmc')
  stopped = dmc.dmc(str(he_run), stop=StopAt(9), **settings)  # In the second time step.
  assert stopped == {'stopped_by': 'SIGTERM'}
  assert not (he_run / 'dmc.json').exists()
  resumed = dmc.dmc(str(he_run), **settings)
  for a, b in zip(whole['per_tau'], resumed['per_tau']):
    np.testing.assert_allclose(a['energy'], b['energy'], rtol=1e-6)
    np.testing.assert_allclose(a['tau_eff'], b['tau_eff'], rtol=1e-6)
    np.testing.assert_allclose(a['acceptance'], b['acceptance'], rtol=1e-6)
  assert resumed['moves'] == moves


def test_a_run_of_other_moves_is_not_resumed(he_run):
  """The moves fix a DMC run's state: a resume with the other moves is refused by name, and
  the settings of a run from before the moves could be chosen read as all-electron moves."""
  import json as json_lib
  from ferminet_fast.errors import InputError
  settings = dict(tau=(0.02,), steps=2, equilibration=1, quiet=True)
  dmc.dmc(str(he_run), stop=StopAt(1), moves='all', **settings)
  with pytest.raises(InputError, match='other settings'):
    dmc.dmc(str(he_run), moves='electron', **settings)
  saved = he_run / 'dmc' / 'settings.json'
  old = json_lib.loads(saved.read_text())
  del old['moves']
  saved.write_text(json_lib.dumps(old))
  assert dmc.dmc(str(he_run), moves='all', **settings)['moves'] == 'all'


def test_command_takes_the_moves_and_reports_them(he_run):
  """--moves=electron through the command: dmc.json names the moves and gives the acceptance,
  tau_eff and ms per step of each time step; the output prints them."""
  proc = command(f'--run={he_run}', '--tau=0.02', '--steps=4', '--equilibration=1',
                 '--moves=electron')
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads((he_run / 'dmc.json').read_text())
  assert result['moves'] == 'electron'
  (r,) = result['per_tau']
  assert 0 < r['acceptance'] <= 1 and 0 < r['tau_eff'] <= 0.02 and r['ms_per_step'] > 0
  assert 'electron moves' in proc.stdout and 'acceptance' in proc.stdout, proc.stdout


def test_bad_input_is_one_line_and_status_2(tmp_path, he_run):
  """The command: one line and status 2 for a missing run, a flag that does not parse and
  a setting out of range; the stage itself names each bad setting and a run of two states."""
  from ferminet_fast.errors import InputError
  proc = command(f'--run={tmp_path / "none"}')
  assert proc.returncode == 2 and 'not a directory' in proc.stderr, proc.stderr
  for flag, words in (('--tau=-0.01', 'config.dmc.tau'), ('--tau=x', '--tau'),
                      ('--moves=both', 'config.dmc.moves')):
    proc = command(f'--run={he_run}', flag)
    assert proc.returncode == 2 and words in proc.stderr, (flag, proc.stderr)
    assert 'Traceback' not in proc.stderr
  for setting, words in (({'parameters': 'best'}, 'config.dmc.parameters'),
                         ({'moves': 'one'}, 'config.dmc.moves'),
                         ({'ecp_moves': 'none'}, 'config.dmc.ecp_moves'),
                         ({'steps': 0}, 'config.dmc.steps')):
    with pytest.raises(InputError, match=words):
      dmc.dmc(str(he_run), quiet=True, **setting)
  states = tmp_path / 'states'  # The stage reads the run's config first.
  states.mkdir()
  rundir.write_json(str(states / 'config.json'),
                    small('He', states, **{'system.states': 2}).to_dict())
  with pytest.raises(InputError, match='one state'):
    dmc.dmc(str(states), quiet=True)
  assert not (he_run / 'dmc.json').exists() and not (states / 'dmc.json').exists()


@pytest.mark.slow
def test_li_dmc_lies_between_exact_and_vmc(tmp_path):
  """Fixed-node DMC is variational and below the VMC energy of its trial function: for a
  briefly trained Li network the DMC energy lies between the exact energy and the evaluated
  VMC energy of the same parameters, within their error bars."""
  from ferminet_fast import evaluate
  run = tmp_path / 'run'
  train.train(tiny_config('Li', **{'batch_size': 128, 'optim.iterations': 150,
                                   'log.save_path': str(run)}), quiet=True)
  vmc = evaluate.evaluate(str(run), steps=200, burn_in=20, quiet=True)
  result = dmc.dmc(str(run), tau=(0.02,), steps=400, equilibration=150, quiet=True)
  exact, e, err = result['exact_energy'], result['energy'], result['error']
  print(f'Li VMC {vmc.mean:.5f} +- {vmc.error:.5f}; DMC {e:.5f} +- {err:.5f}; exact {exact}')
  assert e > exact - 4 * err
  assert e < vmc.mean + 4 * np.hypot(err, vmc.error)
  assert result['vmc']['energy'] == pytest.approx(vmc.mean)


def test_walkers_split_over_two_devices(he_run):
  """The DMC step jitted over two (host) devices, the walkers split between them."""
  env = dict(os.environ, XLA_FLAGS=xla_flags(2))
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={he_run}',
                         '--tau=0.02', '--steps=5', '--equilibration=1'], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert math.isfinite(json.loads((he_run / 'dmc.json').read_text())['energy'])


@pytest.mark.slow
def test_sigterm_checkpoints_exits_75_and_the_rerun_resumes(tmp_path, he_run):
  """SIGTERM to the command (as a batch system sends it): the DMC state is checkpointed at
  the next step, the exit status is 75, and running the same command again finishes with
  the energies of a run never stopped."""
  import signal
  run, whole = he_run, tmp_path / 'whole'
  shutil.copytree(run, whole)
  flags = ['--tau=0.02,0.01', '--steps=30', '--equilibration=2']
  assert command(f'--run={whole}', *flags).returncode == 0
  proc = subprocess.Popen([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}', *flags],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in proc.stdout:  # The stage has started (signals handled from its start).
    if line.startswith('DMC of'):
      proc.send_signal(signal.SIGTERM)
      break
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 75, err[-3000:]
  assert 'SIGTERM received' in out and not (run / 'dmc.json').exists()
  assert command(f'--run={run}', *flags).returncode == 0
  a, b = (json.loads((d / 'dmc.json').read_text())['per_tau'] for d in (whole, run))
  np.testing.assert_allclose([r['energy'] for r in a], [r['energy'] for r in b], rtol=1e-6)


def test_periodic_run_is_refused_by_name(tmp_path):
  from ferminet_fast.errors import InputError
  from ferminet_fast.runtime import cli
  for name in ('heg', 'lih_crystal'):
    run = tmp_path / name
    run.mkdir()
    cfg = cli.load_config_file(os.path.join(REPO, 'configs', f'{name}.py'))
    rundir.write_json(str(run / 'config.json'), cfg.to_dict())
    with pytest.raises(InputError, match='periodic system is not supported yet'):
      dmc.dmc(str(run), quiet=True)
