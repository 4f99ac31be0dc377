"""Training end to end: a short He run converges; the CLI runs and rejects bad input cleanly."""

import json
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from conftest import (combinations, each_optimizer_and_precision,
                      network_optimizer_precision, tiny_config)
from ferminet_fast import InputError, train
from ferminet_fast.stages import preflight
from ferminet_fast.environment import packages
from ferminet_fast.optimizers import kfac
from ferminet_fast.runtime import cli, rundir
from test_train_geometries import h2_scan

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_short_helium_training_converges(tmp_path):
  cfg = tiny_config('He', **{'batch_size': 256, 'optim.iterations': 800, 'optim.lr.rate': 0.02,
                             'mcmc.burn_in': 100, 'log.save_path': str(tmp_path / 'he')})
  result = train.train(cfg, quiet=True)
  energy = result.history['energy']
  assert np.all(np.isfinite(energy))
  assert energy[-200:].mean() < energy[:20].mean() - 0.02  # It learned.
  # Tiny network, few steps: a few mHa from exact, and never below it beyond the noise.
  assert abs(result.error_mha) < 5.0 + 3e3 * result.estimate.error, result.estimate
  assert result.error_mha > -3e3 * result.estimate.error
  assert 0.35 < result.history['pmove'][-100:].mean() < 0.65
  with open(tmp_path / 'he' / 'stats.csv') as f:
    header, *rows = f.read().splitlines()
  assert header.split(',') == list(rundir.STATS_COLUMNS)
  assert [int(r.split(',')[0]) for r in rows] == list(range(800))


def test_python_api_rejects_bad_config(tmp_path):
  cfg = tiny_config('He', **{'log.save_path': str(tmp_path / 'x')})
  cfg.optim.laplacian = 'magic'
  with pytest.raises(InputError, match='optim.laplacian'):
    train.train(cfg, quiet=True)
  assert not os.path.exists(tmp_path / 'x')


def run_cli(*args, cwd=REPO, command='train'):
  """`python -m ferminet_fast.<command> ARGS` in a fresh process."""
  return subprocess.run([sys.executable, '-m', f'ferminet_fast.{command}', *args], cwd=cwd,
                        capture_output=True, text=True, timeout=300)


@pytest.mark.jax_range
def test_cli_quick_config_end_to_end(tmp_path):
  out = tmp_path / 'quick'
  proc = run_cli('--config', 'configs/h2_quick.py', '--config.optim.iterations=30',
                 '--config.mcmc.burn_in=20', f'--config.log.save_path={out}',
                 '--config.log.print_every=10', '--config.log.timers=true',
                 '--config.debug.deterministic=true')  # Its XLA flag is set in time.
  assert proc.returncode == 0, proc.stderr
  last = proc.stdout.strip().splitlines()[-1]
  assert last.startswith('Energy ') and 'mHa' in last and 'exact -1.174475' in last
  for name in rundir.RUN_FILES:
    assert (out / name).exists(), name
  timings = json.loads((out / 'timings.json').read_text())
  for key in ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms',
              'compile_s'):
    assert timings[key] > 0, key
  assert json.loads((out / 'config.json').read_text())['batch_size'] == 128
  rows = (out / 'stats.csv').read_text().splitlines()
  assert len(rows) == 31


BAD_INPUTS = [
    (['--config.optim.foo=1'], "unknown config key 'optim.foo'"),
    (['--config', 'configs/does_not_exist.py'], 'no such file'),
    (['--config.system.atom=Xx'], "unknown element symbol 'Xx'"),
    (['--config.system.electrons=(2,1)'], 'holds 3 electrons'),
    (['--config.system.spin=1'], 'spin 1 is impossible'),
    (['--config.batch_size=0'], 'batch_size must be a positive integer'),
    (['--config.mcmc.steps=-1'], 'mcmc.steps must be a positive integer'),
    (['--config.optim.iterations=-3'], 'optim.iterations must be >= 0'),
    (['--config.optim.optimizer=adamw'], "optim.optimizer = 'adamw' is not one of"),
    (['--config.batch_size=many'], 'batch_size'),
    (['--config.batch_size=None'], 'config.batch_size cannot be None'),
    (['--no_such_flag'], 'unknown flag --no_such_flag (options are --config FILE'),
    (['--dry-run=maybe'], "--dry-run takes no value, or true or false, not 'maybe'"),
    (['--config.debug.seed=18446744073709551616'], 'debug.seed must lie in [-9223372036854775808'),
    (['--config.mcmc.move_width=inf'], 'mcmc.move_width must be a finite number'),
    (['--config.optim.seconds=inf'], 'optim.seconds must be a finite number'),
    (['--config.pretrain.iterations=5', '--config.pretrain.basis=no-such-basis'],
     "pretrain.basis = 'no-such-basis'"),
]


# Refused before absl parses the command line (an unknown key), and by train() once the config
# is built (an impossible spin): the two places a refusal comes from, each through a fresh
# process, its exit status and its one line. Every bad input is checked in process below.
REFUSED_IN_A_PROCESS = [BAD_INPUTS[0], BAD_INPUTS[4]]


@pytest.mark.parametrize('args,message', REFUSED_IN_A_PROCESS)
def test_cli_bad_input_is_one_clear_error(tmp_path, args, message):
  proc = run_cli(*args, f'--config.log.save_path={tmp_path / "run"}')
  assert proc.returncode == 2, proc.stderr
  assert message in proc.stderr, proc.stderr
  assert 'Traceback' not in proc.stderr + proc.stdout
  assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('command,words', [('train', '--config.KEY=VALUE'),
                                           ('evaluate', '--walkers'), ('dmc', '--tau'),
                                           ('plot', 'RUN_DIR')])
def test_every_entry_point_answers_help_with_its_usage(tmp_path, command, words):
  """--help and -h print the command's options on stdout and exit 0, writing nothing."""
  for flag in ('--help', '-h'):
    proc = run_cli(flag, command=command, cwd=tmp_path)
    assert proc.returncode == 0 and words in proc.stdout, (flag, proc.stdout, proc.stderr)
    assert 'Traceback' not in proc.stderr and not os.listdir(tmp_path), flag


def test_every_bad_input_is_refused_with_its_message(tmp_path):
  """Each of BAD_INPUTS by the command line's own steps in this process (cli.resolve, as
  run_training parses it, then train()): one InputError of one line naming the problem, and
  nothing written. (The exit status and stderr of a refusal: the test above.)"""
  for k, (args, message) in enumerate(BAD_INPUTS):
    run = tmp_path / f'run{k}'
    with pytest.raises(InputError) as refused:
      cfg = cli.resolve(['train', *args, f'--config.log.save_path={run}'])
      train.train(cfg, quiet=True)
    assert message in str(refused.value), (args, str(refused.value))
    assert '\n' not in str(refused.value).strip(), args
    assert not run.exists(), args


def test_cli_never_overwrites_an_earlier_run(tmp_path):
  run = tmp_path / 'old'
  run.mkdir()
  (run / 'stats.csv').write_text('earlier results\n')
  (run / 'config.json').write_text('{}\n')
  proc = run_cli(f'--config.log.save_path={run}')
  assert proc.returncode == 2
  assert "holds another run's files" in proc.stderr and 'Traceback' not in proc.stderr
  assert (run / 'stats.csv').read_text() == 'earlier results\n'
  assert sorted(os.listdir(run)) == ['config.json', 'stats.csv']


@pytest.mark.jax_range
def test_cli_config_file_with_unknown_key(tmp_path):
  bad = tmp_path / 'bad.py'
  bad.write_text('from ferminet_fast import config\n\n'
                 'def get_config():\n  c = config.default()\n  c.optim.learning_rate = 1.0\n'
                 '  return c\n')
  proc = run_cli('--config', str(bad), f'--config.log.save_path={tmp_path / "run"}')
  assert proc.returncode == 2
  assert 'learning_rate' in proc.stderr and 'Traceback' not in proc.stderr


@pytest.mark.jax_range
def test_cli_dry_run_prints_the_resolved_config():
  proc = run_cli('--config', 'configs/li.py', '--config.optim.iterations=7', '--dry-run')
  assert proc.returncode == 0, proc.stderr
  assert 'iterations: 7' in proc.stdout and 'atom: Li' in proc.stdout
  # What the settings and the machine decide is shown decided; what the built network
  # decides is named as such.
  assert re.search(r'laplacian: (folx|jacfwd)\n', proc.stdout), proc.stdout
  assert 'envelope: isotropic' in proc.stdout and "initialize: 'no'" in proc.stdout
  assert "optim.energy_chunk_size = 'auto'" in proc.stdout.splitlines()[-1]
  # The tests set the CPU device count in XLA_FLAGS, which 'auto' keeps; without it 'auto'
  # becomes a count.
  assert "cpu_devices = 'auto' keeps JAX's own count" in proc.stdout
  env = {k: v for k, v in os.environ.items() if k not in ('XLA_FLAGS', 'JAX_NUM_CPU_DEVICES')}
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.train', '--config',
                         'configs/li.py', '--dry-run'], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300)
  assert re.search(r'cpu_devices: \d+\n', proc.stdout), proc.stdout + proc.stderr


def dry_run(*args) -> str:
  """What `python -m ferminet_fast.train ARGS --dry-run` prints, by the same steps in this
  process: the command line resolved as run_training resolves it (cli.resolve), then
  preflight.dry_run. (The entry point's own --dry-run: the test above.)"""
  return preflight.dry_run(cli.resolve(['train', *args, '--dry-run']))


def test_cli_keys_whose_default_is_none_take_none_again(tmp_path):
  """A config file sets the exact energy and spin; None on the command line unsets them."""
  cfg = tmp_path / 'li.py'
  cfg.write_text('from ferminet_fast import config\n\n'
                 'def get_config():\n  c = config.default()\n  c.system.atom = "Li"\n'
                 '  c.system.exact_energy = -7.0\n  c.system.spin = 1\n  return c\n')
  out = dry_run('--config', str(cfg))
  assert 'exact_energy: -7.0' in out and 'spin: 1' in out, out
  out = dry_run('--config', str(cfg), '--config.system.exact_energy=None',
                '--config.system.spin=None')
  assert 'exact_energy: null' in out and 'spin: null' in out, out


def test_cli_molecule_replaces_the_config_files_atom_and_back(monkeypatch):
  monkeypatch.chdir(REPO)
  out = dry_run('--config', 'configs/li.py', '--config.system.molecule=H 0 0 0; H 0 0 1.4')
  assert "atom: ''" in out and 'molecule: H 0 0 0; H 0 0 1.4' in out, out
  out = dry_run('--config', 'configs/lih.py', '--config.system.atom=Be')
  assert 'atom: Be' in out and "molecule: ''" in out, out
  # The config file's exact energy was LiH's: with another system given it no longer applies
  # (Be's comes from the table of atoms), unless the command line gives one.
  assert 'exact_energy: null' in out and '-8.07' not in out
  out = dry_run('--config', 'configs/lih.py', '--config.optim.iterations=5')
  assert 'exact_energy: -8.070548' in out  # Not the system: the file's value stays.
  out = dry_run('--config', 'configs/h2.py', '--config.system.molecule=H 0 0 0; H 0 0 6',
                '--config.system.exact_energy=-1.0')
  assert 'exact_energy: -1.0' in out, out


OPTIMIZERS = ('adam', 'kfac', 'spring', 'sgd')
# LapNet's dense layers are Psiformer's (the same Dense and attention projections): each
# optimizer and each precision once.
MOLECULE_RUNS = network_optimizer_precision(
    OPTIMIZERS, more=each_optimizer_and_precision('lapnet', OPTIMIZERS))


@pytest.mark.parametrize('network,optimizer,precision', MOLECULE_RUNS)
@pytest.mark.jax_range
def test_every_network_optimizer_and_precision_trains(tmp_path, network, optimizer, precision):
  """Each combination a user may pick runs through train() and gives finite energies."""
  cfg = tiny_config('Li', **{
      'network.network_type': network, 'optim.optimizer': optimizer, 'precision': precision,
      'batch_size': 16, 'optim.iterations': 4, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.psiformer.layers': 1,
      'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4,
      'network.lapnet.layers': 1, 'network.lapnet.heads': 2, 'network.lapnet.head_dim': 4,
      'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  assert len(result.history['energy']) == 4
  assert np.all(np.isfinite(result.history['energy']))
  assert result.state.walkers.x.dtype == np.dtype(precision)


def test_auto_laplacian_and_the_other_pieces_run_through_train(tmp_path):
  """laplacian='auto' times the candidates before the step is built and trains with the
  fastest; the non-default envelope, Jastrow, clipping, spin penalty and node cutoff run
  through the same path."""
  cfg = tiny_config('Li', **{
      'optim.laplacian': 'auto', 'network.envelope': 'full', 'network.jastrow': 'none',
      'optim.clip_method': 'mean_absdev', 'optim.spin_penalty': 0.5, 'optim.node_cutoff': 0.05,
      'batch_size': 16, 'optim.iterations': 3,
      'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
      'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  times = result.timings['laplacian_auto_ms']
  assert result.timings['laplacian'] == min(times, key=times.get)
  assert np.all(np.isfinite(result.history['energy']))


@pytest.mark.parametrize('optimizer', OPTIMIZERS + ('heg',))
def test_the_node_cutoff_trains_with_each_optimizer(tmp_path, optimizer):
  """optim.node_cutoff (the gradient's weights regularised near the nodes) with the median
  window through train() with each optimizer, and for the electron gas at a twist (the
  complex wavefunction, whose phase weights it regularises too): finite energies."""
  settings = {'optim.node_cutoff': 0.05, 'optim.clip_method': 'median_mad'}
  if optimizer == 'heg':
    cfg = _heg_config(tmp_path, **settings, **{'system.twist': TWIST})
  else:
    cfg = tiny_config('Li', **settings, **{
        'optim.optimizer': optimizer, 'batch_size': 16, 'optim.iterations': 3,
        'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
        'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))


@pytest.mark.parametrize('optimizer', OPTIMIZERS + ('heg', 'psiformer', 'surface', 'states'))
def test_the_fisher_step_bound_trains_with_each_optimizer(tmp_path, optimizer):
  """optim.max_fisher_step through train() with each optimizer, a Psiformer, the electron
  gas at a twist (a complex wavefunction: the bound is on log|psi|), a surface of three
  H2 geometries (each walker's change of log|psi| at its own nuclei) and two states of He
  (NES-VMC: the change of the log of the states' determinant): finite energies, and every
  recorded fisher_step at the bound or below, to leading order."""
  bound = 1e-4
  settings = {'optim.max_fisher_step': bound}
  if optimizer == 'heg':
    cfg = _heg_config(tmp_path, **settings, **{'system.twist': TWIST})
  elif optimizer == 'surface':
    cfg = h2_scan(tmp_path / 'run', **settings)
  elif optimizer == 'states':
    cfg = tiny_config('He', **settings, **{
        'system.states': 2, 'optim.optimizer': 'kfac', 'batch_size': 16,
        'optim.iterations': 3, 'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
        'log.save_path': str(tmp_path / 'run')})
  else:
    cfg = tiny_config('Li', **settings, **{
        'optim.optimizer': 'kfac' if optimizer == 'psiformer' else optimizer,
        'network.network_type': 'psiformer' if optimizer == 'psiformer' else 'ferminet',
        'batch_size': 16, 'optim.iterations': 3, 'mcmc.burn_in': 2,
        'network.ferminet.hidden_dims': ((8, 4),), 'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  assert np.all(np.asarray(result.history['fisher_step']) <= 1.2 * bound)


@pytest.mark.parametrize('case', ['ferminet', 'psiformer', 'surface'])
def test_kfacs_dense_rest_block_trains(tmp_path, case):
  """optim.kfac.dense_rest through train(): a FermiNet (envelopes, Jastrow), a Psiformer
  (its layer norms too) and a surface of three H2 geometries (the block pooled over their
  walkers, as the dense layers' factors are), in float32, train to finite energies with
  every update applied, KFAC's state holding the block; the setting fixes the state's
  shapes, so the run does not resume without it."""
  settings = {'optim.kfac.dense_rest': True, 'optim.optimizer': 'kfac'}
  if case == 'surface':
    cfg = h2_scan(tmp_path / 'run', **settings)
  else:
    cfg = tiny_config('Li', **settings, **{
        'network.network_type': case, 'network.psiformer.layer_norm': True,
        'batch_size': 16, 'optim.iterations': 3, 'mcmc.burn_in': 2,
        'network.ferminet.hidden_dims': ((8, 4),), 'log.save_path': str(tmp_path / 'run')})
  assert cfg.precision == 'float32'
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  assert not np.any(result.history['rejected'])
  states = [s for s in jax.tree.leaves(result.state.opt_state,
                                       is_leaf=lambda s: isinstance(s, kfac.KfacState))
            if isinstance(s, kfac.KfacState)]
  assert len(states) == 1
  assert kfac.REST in states[0].inverses and kfac.REST in states[0].diagonal
  cfg.optim.kfac.dense_rest = False
  cfg.optim.iterations += 1
  with pytest.raises(InputError, match='optim.kfac.dense_rest: True -> False'):
    train.train(cfg, quiet=True)


@pytest.mark.parametrize('case,rows', [('psiformer', 'split'), ('states', 'reduce'),
                                       ('heg', 'split')])
def test_kfacs_other_row_factorings_train(tmp_path, case, rows):
  """optim.kfac.rows 'reduce' and 'split' through train(): a Psiformer in float64, a
  FermiNet in float32 with two NES-VMC states (each walker's two configurations) and the
  electron gas at a twist (complex) train to finite energies with every update applied;
  KFAC's averaged repeats of reduce's block are the states per walker, not the rows per
  configuration that expand's are."""
  settings = {'optim.kfac.rows': rows, 'optim.optimizer': 'kfac'}
  states = 1
  if case == 'heg':
    cfg = _heg_config(tmp_path, **settings, **{'system.twist': TWIST})
  else:
    states = 2 if case == 'states' else 1
    cfg = tiny_config('He' if states == 2 else 'Li', **settings, **{
        'network.network_type': 'psiformer' if case == 'psiformer' else 'ferminet',
        'precision': 'float64' if case == 'psiformer' else 'float32',
        'system.states': states, 'batch_size': 16, 'optim.iterations': 3,
        'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
        'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  assert not np.any(result.history['rejected'])
  (state,) = [s for s in jax.tree.leaves(result.state.opt_state,
                                         is_leaf=lambda s: isinstance(s, kfac.KfacState))
              if isinstance(s, kfac.KfacState)]
  for name, factor in state.factors.items():
    assert len(factor) == (6 if rows == 'split' else 3), name
    assert float(factor[-1] / state.weight) == pytest.approx(states, rel=1e-5), name


@pytest.mark.skipif(not packages.installed('folx'), reason='needs the folx extra')
def test_the_sparse_forward_laplacian_trains_as_the_dense_one(tmp_path):
  """optim.laplacian = 'folx_sparse' (what 'best' takes for large molecules on a CPU) through
  train with KFAC: the same energies, step by step, as the dense folx from the same seed;
  the two differ only in how folx stores the Jacobian."""
  energies = {}
  for method in ('folx', 'folx_sparse'):
    cfg = tiny_config('Li', **{'optim.laplacian': method, 'optim.optimizer': 'kfac',
                               'batch_size': 16, 'optim.iterations': 4, 'mcmc.burn_in': 2,
                               'log.save_path': str(tmp_path / method)})
    result = train.train(cfg, quiet=True)
    assert result.timings['laplacian'] == method
    energies[method] = result.history['energy']
  assert np.all(np.isfinite(energies['folx']))
  np.testing.assert_allclose(energies['folx_sparse'], energies['folx'], rtol=1e-4)


@pytest.mark.parametrize('args', [
    ['--config.precision=float64'],
    ['--config', 'configs/he.py', '--config.network.network_type=psiformer'],
])
def test_cli_runs_what_used_to_crash(tmp_path, args):
  proc = run_cli(*args, '--config.optim.iterations=5', '--config.mcmc.burn_in=2',
                 '--config.batch_size=16', '--config.log.timers=false',
                 f'--config.log.save_path={tmp_path / "run"}')
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip().splitlines()[-1].startswith('Energy ')


def _heg_overrides(tmp_path, **more):
  """The 14-electron gas of configs/heg.py with a tiny network and few steps."""
  return {'batch_size': 16, 'optim.iterations': 3, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
          'network.ferminet.hidden_dims': ((8, 4),), 'network.psiformer.layers': 1,
          'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4,
          'log.save_path': str(tmp_path / 'run'), **more}


def _heg_config(tmp_path, **more):
  """configs/heg.py with `_heg_overrides`."""
  cfg = cli.load_config_file(os.path.join(REPO, 'configs', 'heg.py'))
  cli.set_values(cfg, _heg_overrides(tmp_path, **more))
  return cfg


GAMMA, TWIST = (0.0, 0.0, 0.0), (0.1, 0.27, -0.31)
# At a twist (the complex wavefunction) every network x optimizer x precision; at the Gamma
# point, whose real network, optimizers and precisions the molecular matrix above also runs,
# every pair of values once (both cut where conftest's combinations are asked to).
HEG_PAIRS = [('ferminet', 'adam', 'float32'), ('ferminet', 'kfac', 'float64'),
             ('psiformer', 'adam', 'float64'), ('psiformer', 'kfac', 'float32')]
HEG_RUNS = combinations(
    [(n, o, p, TWIST) for n in ('ferminet', 'psiformer') for o in ('adam', 'kfac')
     for p in ('float32', 'float64')] + [r + (GAMMA,) for r in HEG_PAIRS],
    [r + (t,) for t in (TWIST, GAMMA) for r in HEG_PAIRS])


@pytest.mark.parametrize('network,optimizer,precision,twist', HEG_RUNS)
@pytest.mark.jax_range
def test_the_electron_gas_trains_with_each_network_optimizer_and_precision(
    tmp_path, network, optimizer, precision, twist):
  """configs/heg.py through train(), at the Gamma point and at a twist (a complex
  wavefunction): finite energies, walkers kept inside the cell."""
  cfg = _heg_config(tmp_path, **{'network.network_type': network, 'optim.optimizer': optimizer,
                                 'precision': precision, 'system.twist': twist})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  x = np.asarray(result.state.walkers.x).reshape(16, 14, 3)
  length = (14 * 4 * np.pi / 3) ** (1 / 3)
  assert x.dtype == np.dtype(precision) and np.all((x >= 0) & (x < length * (1 + 1e-6)))


@pytest.mark.slow
def test_cli_electron_gas_at_a_twist_trains_evaluates_and_resumes(tmp_path):
  """python -m ferminet_fast.train --config configs/heg.py at a twist (the complex
  wavefunction), then python -m ferminet_fast.evaluate (eval.json with a finite energy at
  that twist), then the same training command again with more steps, which resumes from the
  checkpoint. (Runs at several twists are averaged through the command line in
  tests/test_crystal_train.py.)"""
  run = tmp_path / 't0'
  args = ['--config', 'configs/heg.py', *[f'--config.{k}={v}' for k, v in _heg_overrides(
      tmp_path, **{'log.save_path': run}).items() if k != 'network.ferminet.hidden_dims'],
          '--config.network.ferminet.hidden_dims=((8,4),)',
          '--config.system.twist=(0.5,0.5,0.5)']
  proc = run_cli(*args)
  assert proc.returncode == 0, proc.stderr
  assert 'electron gas' in proc.stdout and 'complex wavefunction' in proc.stdout
  proc = run_cli(f'--run={run}', '--steps=4', '--burn_in=1', command='evaluate')
  assert proc.returncode == 0, proc.stderr
  evaluated = json.loads((run / 'eval.json').read_text())
  assert np.isfinite(evaluated['energy'])
  proc = run_cli(*[a.replace('iterations=3', 'iterations=5') for a in args])
  assert proc.returncode == 0, proc.stderr
  assert len((run / 'stats.csv').read_text().splitlines()) == 6


def test_a_crystal_trains_from_its_primitive_cell(tmp_path):
  """LiH rock salt (primitive fcc cell, 2 nuclei, 4 electrons) through train(): the Ewald
  energy with nuclei, walkers started around the nuclei and kept in the cell."""
  cfg = tiny_config('', **{
      'system.units': 'angstrom', 'system.molecule': 'Li 0 0 0; H 2.0 0 0',
      'system.lattice': ((0, 2.0, 2.0), (2.0, 0, 2.0), (2.0, 2.0, 0)),
      'network.envelope': 'auto', 'batch_size': 16, 'optim.iterations': 3, 'mcmc.burn_in': 2,
      'mcmc.steps': 2, 'network.ferminet.hidden_dims': ((8, 4),),
      'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  assert result.state.walkers.x.shape == (16, 12)


def test_a_run_stops_quietly_at_its_time_budget(tmp_path):
  path = tmp_path / 'budget'
  cfg = tiny_config('He', **{'optim.iterations': 100000, 'optim.seconds': 0.5, 'batch_size': 16,
                             'mcmc.burn_in': 2, 'network.ferminet.hidden_dims': ((8, 4),),
                             'log.save_path': str(path)})
  result = train.train(cfg, quiet=True)
  steps = len(result.history['energy'])
  assert 0 < steps < 100000 and result.stopped_by is None  # A normal end: exit status 0.
  assert result.budget_step == steps
  with open(path / 'result.json') as f:
    written = json.load(f)
  assert written['stopped_at_time_budget'] == steps and written['iterations'] == steps
  assert written['complete']
  saved = max(int(d) for d in os.listdir(path / 'checkpoints') if d.isdigit())
  assert saved == steps


def test_bad_annealing_and_budget_values_are_one_clear_error(tmp_path):
  for key, value in (('optim.lr.anneal', 1.5), ('optim.lr.anneal_to', -0.1),
                     ('optim.seconds', -1.0)):
    cfg = tiny_config('He', **{key: value, 'log.save_path': str(tmp_path / 'x')})
    with pytest.raises(InputError, match=key.replace('.', r'\.')):
      train.train(cfg, quiet=True)
