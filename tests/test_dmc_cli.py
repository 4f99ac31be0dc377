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
from ferminet_fast.diffusion import stage
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
  # The ECP atom at its default time steps: from its effective charge, 4 (Si, ccECP).
  taus = [0.01, 0.005, 0.0025] if ecp else [0.02, 0.01]
  flags = [] if ecp else ['--tau=0.02,0.01']
  proc = command(f'--run={run}', *flags, '--steps=6', '--equilibration=2')
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads((run / 'dmc.json').read_text())
  assert [r['tau'] for r in result['per_tau']] == taus
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
  assert len(rows) == 1 + len(taus) * 8
  assert (run / 'plots' / 'dmc_energy.png').exists() and (run / 'plots' / 'dmc_tau.png').exists()


class StopAt:
  """A stop signal that arrives once `calls` steps have looked for it."""

  def __init__(self, calls):
    self.calls = calls

  @property
  def received(self):
    self.calls -= 1
    return 'SIGTERM' if self.calls < 0 else None


@pytest.fixture
def whole_blocks(monkeypatch):
  """Each time step's first block one step, every later one as long as the steps left
  allow (at most stage.BLOCK): a stop signal looked for once per block then falls at the
  same step on every machine."""
  monkeypatch.setattr(stage, 'BLOCK_SECONDS', 1e9)


@pytest.mark.parametrize('moves', ['electron', 'all'])
def test_stopped_run_resumes_to_the_same_result(tmp_path, he_run, moves, whole_blocks):
  settings = dict(tau=(0.02, 0.01), steps=5, equilibration=2, quiet=True, moves=moves)
  whole = dmc.dmc(str(he_run), **settings)
  os.rename(he_run / 'dmc.json', tmp_path / 'whole.json')
  shutil.rmtree(he_run / 'dmc')
  # Blocks of 1 and 6 steps at each time step: stopped after the second's first step.
  stopped = dmc.dmc(str(he_run), stop=StopAt(2), **settings)
  assert stopped == {'stopped_by': 'SIGTERM'}
  assert not (he_run / 'dmc.json').exists()
  resumed = dmc.dmc(str(he_run), **settings)
  for a, b in zip(whole['per_tau'], resumed['per_tau']):
    np.testing.assert_allclose(a['energy'], b['energy'], rtol=1e-6)
    np.testing.assert_allclose(a['tau_eff'], b['tau_eff'], rtol=1e-6)
    np.testing.assert_allclose(a['acceptance'], b['acceptance'], rtol=1e-6)
  assert resumed['moves'] == moves


def test_the_steps_grouped_into_blocks_give_the_same_run(he_run, monkeypatch):
  """A run whose steps go one per call of the compiled program and one whose steps go in
  blocks (stage.BLOCK_SECONDS) give the same energies to the last bit."""
  settings = dict(tau=(0.02,), steps=6, equilibration=2, quiet=True)
  monkeypatch.setattr(stage, 'BLOCK_SECONDS', 0.0)
  single = dmc.dmc(str(he_run), **settings)
  shutil.rmtree(he_run / 'dmc')
  monkeypatch.setattr(stage, 'BLOCK_SECONDS', 1e9)
  blocks = dmc.dmc(str(he_run), **settings)
  assert single['per_tau'][0]['energy'] == blocks['per_tau'][0]['energy']
  assert single['per_tau'][0]['acceptance'] == blocks['per_tau'][0]['acceptance']


def test_blocks_end_where_a_checkpoint_is_due(he_run, whole_blocks):
  """With dmc.save_every, a block of steps ends at each step a checkpoint is due, so the
  checkpoints are those of the steps asked for (the last two kept, then the time step's
  end), however long the blocks would otherwise be."""
  cfg = json.loads((he_run / 'config.json').read_text())
  cfg['dmc']['save_every'] = 3
  (he_run / 'config.json').write_text(json.dumps(cfg))
  dmc.dmc(str(he_run), tau=(0.02,), steps=6, equilibration=1, quiet=True)
  kept = sorted(int(p.name) for p in (he_run / 'dmc' / 'checkpoints').iterdir()
                if p.name.isdigit())
  assert kept == [6, 7], kept


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
                      ('--moves=both', 'config.dmc.moves'),
                      ('--seed=18446744073709551616', '--seed='),
                      ('--no_such_flag', "flag 'no_such_flag'")):
    proc = command(f'--run={he_run}', flag)
    assert proc.returncode == 2 and words in proc.stderr, (flag, proc.stderr)
    assert 'Traceback' not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  for setting, words in (({'parameters': 'best'}, 'config.dmc.parameters'),
                         ({'moves': 'one'}, 'config.dmc.moves'),
                         ({'ecp_moves': 'none'}, 'config.dmc.ecp_moves'),
                         ({'steps': 0}, 'config.dmc.steps'),
                         ({'steps': 10**11}, 'GiB for their record, more than the')):
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


def test_periodic_run_is_taken(tmp_path):
  """The shipped periodic configs pass the DMC stage's checks of the settings (no refusal
  of a cell): what stops a run without checkpoints is the missing checkpoint."""
  from ferminet_fast.errors import InputError
  from ferminet_fast.runtime import cli
  for name in ('heg', 'lih_crystal'):
    run = tmp_path / name
    run.mkdir()
    cfg = cli.load_config_file(os.path.join(REPO, 'configs', f'{name}.py'))
    rundir.write_json(str(run / 'config.json'), cfg.to_dict())
    with pytest.raises(InputError, match='holds no checkpoint'):
      dmc.dmc(str(run), quiet=True)


# The electron gas of two electrons (one of each spin) at r_s = 1 in a simple cubic cell:
# at Gamma (a real trial function: fixed-node DMC) and at a twist (complex: fixed-phase).
HEG_TWISTS = {'gamma': (0.0, 0.0, 0.0), 'twist': (0.25, 0.0, 0.0)}
HEG_DMC = ('--tau=0.05', '--steps=100', '--equilibration=20', '--batch_size=64')


def heg(path, twist):
  """The tiny electron gas at `twist`, as `small` trains it (no pretraining: the plane-wave
  envelope starts as the Hartree-Fock determinant)."""
  return small('', path, **{'system.rs': 1.0, 'system.cell': 'sc', 'system.electrons': (1, 1),
                            'system.twist': twist, 'network.envelope': 'planewave',
                            'pretrain.iterations': 0})


@pytest.fixture(scope='module')
def heg_runs(tmp_path_factory):
  """The tiny electron gas trained briefly at each of HEG_TWISTS, once for the module."""
  root = tmp_path_factory.mktemp('heg')
  for name, twist in HEG_TWISTS.items():
    train.train(heg(root / name, twist), quiet=True)
  return root


@pytest.fixture(scope='module')
def heg_dmc(heg_runs, tmp_path_factory):
  """Twist-averaged DMC of copies of `heg_runs`, the Gamma run evaluated first (its VMC
  energy then in its dmc.json): stopped in the first twist's DMC (in this process, as a
  SIGTERM would stop it), then resumed and finished through the command line. (the runs,
  the average's file, the command's process)."""
  root = tmp_path_factory.mktemp('heg_dmc')
  runs = [root / name for name in HEG_TWISTS]
  for run in runs:
    shutil.copytree(heg_runs / run.name, run)
  from ferminet_fast import evaluate
  evaluate.evaluate(str(runs[0]), steps=30, burn_in=2, quiet=True)
  out = root / 'average.json'
  settings = dict(tau=(0.05,), steps=100, equilibration=20, batch_size=64)
  # Stopped after two blocks of steps, at most 1 + stage.BLOCK < 120: in the first twist.
  stopped = dmc.twist_average([str(r) for r in runs], str(out), quiet=True,
                              stop=StopAt(1), **settings)
  assert stopped == {'stopped_by': 'SIGTERM'} and not out.exists()
  assert not any((run / 'dmc.json').exists() for run in runs)
  proc = command(f'--out={out}', f'--twist_average={runs[0]},{runs[1]}', *HEG_DMC)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return runs, out, proc


def test_electron_gas_dmc_is_at_or_below_vmc_and_its_twist_average_the_mean(heg_dmc):
  """At Gamma the DMC energy is at or below the VMC energy of the same parameters (within
  their errors); at the twist it is a real number and fixed-phase (no sign check); the
  average is the weighted mean (equal weights, as VMC's) of the runs' DMC energies, each
  twist's beside it; the stopped twist resumed."""
  runs, out, proc = heg_dmc
  gamma, twist = (json.loads((run / 'dmc.json').read_text()) for run in runs)
  vmc = gamma['vmc']
  assert gamma['energy'] <= vmc['energy'] + 3 * np.hypot(gamma['error'], vmc['error']), gamma
  assert not gamma['fixed_phase'] and gamma['sign_check']['walkers'] == 64
  assert twist['fixed_phase'] and twist['sign_check'] is None
  assert twist['twist'] == [0.25, 0.0, 0.0]
  assert type(twist['energy']) is float and math.isfinite(twist['energy'])
  assert 'Resuming DMC' in proc.stdout and 'fixed-phase DMC at twist' in proc.stdout
  average = json.loads(out.read_text())
  assert average['source'] == 'dmc.json' and average['n_twists'] == 2
  weights = [t['weight'] for t in average['twists']]
  assert sum(weights) == pytest.approx(1.0)
  assert [t['energy'] for t in average['twists']] == [gamma['energy'], twist['energy']]
  assert average['energy'] == pytest.approx(weights[0] * gamma['energy']
                                            + weights[1] * twist['energy'])
  assert [t['twist'] for t in average['twists']] == [[0.0, 0.0, 0.0], [0.25, 0.0, 0.0]]


def _heg_walk(twist) -> tuple:
  """(system, network, Hamiltonian (the JAX Laplacian), parameters, 8 walkers uniform in
  the cell) of the tiny electron gas at `twist`, untrained."""
  import jax
  from ferminet_fast import plan
  from ferminet_fast.physics import hamiltonian, laplacians, systems
  cfg = heg('', twist)
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = system.boundary.uniform_positions(jax.random.PRNGKey(1), (8, 2), network.dtype)
  return (system, network, hamiltonian.of(system, laplacians.JACFWD), params,
          x.reshape(8, 6))


def test_electron_gas_walk_has_the_vmc_local_energy():
  """Each walker's DMC local energy is VMC's for the same configuration (the Ewald energy;
  at the twist the real part of VMC's complex one); at Gamma the fixed-phase evaluation
  of the real trial function (its phase given as a complex one's) is the fixed-node one:
  the same sign, log|psi|, local energy and drift, hence the same steps."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast.diffusion import walk
  from ferminet_fast.vmc import loss
  for twist in (HEG_TWISTS['twist'], HEG_TWISTS['gamma']):  # Gamma's network used below.
    _, network, ham, params, x = _heg_walk(twist)
    w = jax.jit(walk.make_evaluate(network, ham))(params, x)
    vmc = jax.jit(jax.vmap(loss.make_local_energy(network, ham), (None, 0)))(params, x)
    np.testing.assert_allclose(w.local_energy, jnp.real(vmc), rtol=1e-4, atol=1e-4)
  phase = lambda p, y, atoms=None: jnp.stack([network.log_psi(p, y),  # noqa: E731
                                               jnp.angle(network.apply(p, y)[0])])
  fixed_phase = jax.jit(walk.make_evaluate(network._replace(log_psi_phase=phase), ham))
  for a, b in zip(w, fixed_phase(params, x)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_electron_gas_moves_stay_in_the_cell():
  """After steps of electron and of all-electron moves (tau = 0.5, where most electrons
  leave the cell before they are wrapped) of the fixed-phase walk at the twist, every
  walker lies in the cell."""
  import jax
  from ferminet_fast.diffusion import walk
  system, network, ham, params, x = _heg_walk(HEG_TWISTS['twist'])
  evaluate = walk.make_evaluate(network, ham)
  start = walk.init_state(jax.jit(evaluate), params, x, jax.random.PRNGKey(0))
  for moves in walk.MOVES.values():
    move = moves(evaluate, walk.make_psi(network), 0.5, None, system.boundary.wrap)
    step, s = jax.jit(walk.make_step(evaluate, 0.5, 2, 2, move)), start
    for _ in range(3):
      s, stats = step(params, s)
    frac = np.asarray(s.walkers.x).reshape(-1, 3) @ np.linalg.inv(system.boundary.lattice.vectors)
    assert np.all((frac >= 0) & (frac < 1)), moves.name
    assert float(stats.acceptance) > 0 and not np.allclose(s.walkers.x, x)


def test_a_twist_average_of_bad_runs_is_one_clear_error(heg_runs, tmp_path):
  """--twist_average refuses, by name and before any DMC, one run, a twist twice, a
  molecule and an output file inside a run; the command says so in one line with status 2,
  as it does for both --run and --twist_average."""
  from ferminet_fast.errors import InputError
  gamma, twist = (str(heg_runs / name) for name in HEG_TWISTS)
  molecule = tmp_path / 'he'
  molecule.mkdir()
  rundir.write_json(str(molecule / 'config.json'), small('He', molecule).to_dict())
  out = str(tmp_path / 'average.json')
  for runs, words in (([gamma], 'at least two'), ([gamma, gamma], 'appears twice'),
                      ([str(molecule), gamma], 'not a periodic system')):
    with pytest.raises(InputError, match=words):
      dmc.twist_average(runs, out, quiet=True)
  with pytest.raises(InputError, match='inside one of the runs'):
    dmc.twist_average([gamma, twist], os.path.join(gamma, 'average.json'), quiet=True)
  for where, words in ((str(tmp_path), 'is a directory'),
                       (str(tmp_path / 'no' / 'average.json'), 'no folder')):
    with pytest.raises(InputError, match=words):
      dmc.twist_average([gamma, twist], where, quiet=True)
  assert not any(os.path.exists(os.path.join(r, 'dmc')) for r in (gamma, twist))
  proc = command(f'--run={gamma}', f'--twist_average={gamma},{twist}')
  assert proc.returncode == 2 and 'either --run' in proc.stderr, proc.stderr[-3000:]
  assert 'Traceback' not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
