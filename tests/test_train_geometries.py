"""Training over a set of geometries through the entry points users call: every network,
optimizer and precision; pretraining, checkpoints and resume, evaluation to pes.json; the
refusals; and a short H2 training whose curve matches pyscf's full CI at three bond
lengths."""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import network_optimizer_precision, tiny_config
from ferminet_fast import InputError, evaluate, train
from ferminet_fast.runtime import rundir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BONDS = (1.0, 1.5, 2.0)  # bohr: H2 either side of its equilibrium (1.401), evenly spaced.
OPTIMIZERS = ('kfac', 'adam', 'spring', 'sgd')


def h2_scan(path, **overrides):
  """H2 over BONDS (a scan of the H0-H1 distance), a tiny network, a few steps."""
  return tiny_config('H', **{
      'system.atom': '', 'system.molecule': 'H 0 0 0; H 0 0 1.4', 'system.units': 'bohr',
      'system.scan.atoms': (0, 1), 'system.scan.start': BONDS[0],
      'system.scan.stop': BONDS[-1], 'system.scan.points': len(BONDS), 'batch_size': 24,
      'optim.iterations': 3, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'network.psiformer.layers': 1, 'network.psiformer.heads': 2,
      'network.psiformer.head_dim': 4, 'log.save_path': str(path), **overrides})


# Every pair of network, optimizer and precision once: each piece's every combination with
# one geometry is tests/test_train.py's.
RUNS = network_optimizer_precision(OPTIMIZERS, pairs_only=True)


@pytest.mark.parametrize('network,optimizer,precision', RUNS)
@pytest.mark.jax_range
def test_every_network_optimizer_and_precision_trains_over_geometries(
    tmp_path, network, optimizer, precision):
  """Each combination trains over the set through train(): finite energies for every
  geometry, in stats.csv's columns and result.json, each chain with its own width."""
  cfg = h2_scan(tmp_path / 'run', **{'network.network_type': network,
                                     'optim.optimizer': optimizer, 'precision': precision})
  result = train.train(cfg, quiet=True)
  assert result.state.walkers.x.dtype == np.dtype(precision)
  assert result.state.walkers.width.shape == (len(BONDS),)
  assert len(result.geometries) == len(BONDS)
  with open(tmp_path / 'run' / 'stats.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert list(rows[0]) == list(rundir.stats_columns(len(BONDS)))
  each = np.array([[float(r[f'energy_{g}']) for g in range(len(BONDS))] for r in rows])
  assert each.shape == (3, len(BONDS)) and np.all(np.isfinite(each))
  np.testing.assert_allclose([float(r['energy']) for r in rows], each.mean(axis=1), rtol=1e-5)
  saved = json.loads((tmp_path / 'run' / 'result.json').read_text())
  assert len(saved['geometries']) == len(BONDS)


def test_pretrained_surface_resumes_and_evaluates_each_geometry(tmp_path):
  """Hartree-Fock pretraining at each geometry, a resume that continues the steps, then
  evaluation: pes.json lists each geometry's nuclei, bond length and energy; the plot."""
  pytest.importorskip('pyscf')
  run = tmp_path / 'run'
  cfg = h2_scan(run, **{'pretrain.iterations': 5, 'optim.iterations': 4})
  first = train.train(cfg, quiet=True)
  assert len(first.history['energy']) == 4
  more = train.train(h2_scan(run, **{'pretrain.iterations': 5, 'optim.iterations': 6}),
                     quiet=True)
  assert len(more.history['energy']) == 6 and len(more.history['energy_2']) == 6
  estimate = evaluate.evaluate(str(run), steps=4, burn_in=1, quiet=True,
                               reference='hf/sto-3g')
  pes = json.loads((run / 'pes.json').read_text())
  assert pes['reference'] == 'hf/sto-3g'
  from pyscf import gto, scf
  for r, bond in zip(pes['geometries'], BONDS):  # Each row's reference is at its own bond.
    mol = gto.M(atom=f'H 0 0 0; H 0 0 {bond}', unit='bohr', basis='sto-3g', verbose=0)
    assert r['reference'] == pytest.approx(scf.RHF(mol).kernel(), abs=1e-8)
  assert pes['walkers_per_geometry'] == 8 and pes['label'].startswith('R(H0-H1)')
  rows = pes['geometries']
  np.testing.assert_allclose([r['coordinate'] for r in rows], BONDS, rtol=1e-12)
  for r, bond in zip(rows, BONDS):
    (a, b) = np.asarray(r['positions_bohr'])
    assert np.linalg.norm(b - a) == pytest.approx(bond)
    assert np.isfinite(r['energy']) and r['sweeps'] == 4
  assert estimate.mean == pytest.approx(np.mean([r['energy'] for r in rows]), rel=1e-3)
  if os.path.exists(run / 'plots'):  # With matplotlib.
    assert (run / 'plots' / 'pes.png').exists()


@pytest.mark.parametrize('optimizer', OPTIMIZERS)
def test_each_optimizer_trains_on_geometries_drawn_each_step(tmp_path, optimizer):
  """optim.geometries_per_step = 2 of 3: each step's row holds the energies of two
  geometries (NaN for the third) and their mean; over the run every geometry is drawn,
  and result.json estimates each from the steps that drew it."""
  run = tmp_path / 'run'
  cfg = h2_scan(run, **{'optim.optimizer': optimizer, 'optim.geometries_per_step': 2,
                        'optim.iterations': 8, 'log.final_fraction': 1.0})
  result = train.train(cfg, quiet=True)
  with open(run / 'stats.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  each = np.array([[float(r[f'energy_{g}']) for g in range(len(BONDS))] for r in rows])
  drawn = np.isfinite(each)
  assert drawn.sum(axis=1).tolist() == [2] * 8 and drawn.any(axis=0).all()
  np.testing.assert_allclose([float(r['energy']) for r in rows],
                             np.nanmean(each, axis=1), rtol=1e-5)
  for g, estimate in enumerate(result.geometries):
    assert estimate.n == drawn[:, g].sum()
    assert estimate.mean == pytest.approx(np.mean(each[drawn[:, g], g]), rel=1e-6)


def test_drawing_more_geometries_than_the_set_holds_is_refused(tmp_path):
  with pytest.raises(InputError, match='geometries_per_step = 4 exceeds the 3 geometries'):
    train.train(h2_scan(tmp_path / 'run', **{'optim.geometries_per_step': 4}), quiet=True)
  one = h2_scan(tmp_path / 'one', **{'optim.geometries_per_step': 1})
  one.system.scan.atoms, one.system.scan.start, one.system.scan.stop = (), None, None
  one.system.scan.points = 0
  with pytest.raises(InputError, match='is for a set of geometries'):
    train.train(one, quiet=True)
  assert not os.path.exists(tmp_path / 'run') and not os.path.exists(tmp_path / 'one')


def test_a_batch_that_does_not_split_over_the_geometries_is_refused(tmp_path):
  with pytest.raises(InputError, match='batch_size = 25 does not split evenly over the 3'):
    train.train(h2_scan(tmp_path / 'run', batch_size=25), quiet=True)
  assert not os.path.exists(tmp_path / 'run')


def test_a_reference_curve_is_refused_for_one_geometry_or_a_bad_name(tmp_path):
  """evaluate --reference: a run of one geometry has no curve; a malformed name or an
  unknown basis is one clear error, before any sweep."""
  one = h2_scan(tmp_path / 'one')
  one.system.scan.atoms, one.system.scan.start, one.system.scan.stop = (), None, None
  one.system.scan.points = 0
  train.train(one, quiet=True)
  with pytest.raises(InputError, match='--reference is for a run over a set of geometries'):
    evaluate.evaluate(str(tmp_path / 'one'), steps=2, burn_in=0, quiet=True,
                      reference='hf/sto-3g')
  run = tmp_path / 'run'
  train.train(h2_scan(run), quiet=True)
  for text, said in (('mp2/sto-3g', "give 'METHOD/BASIS'"), ('hf/no-such-basis',
                                                              'pyscf has no such basis')):
    with pytest.raises(InputError, match=said):
      evaluate.evaluate(str(run), steps=2, burn_in=0, quiet=True, reference=text)
  assert not (run / 'pes.json').exists()


def test_later_stages_refuse_what_a_surface_does_not_have(tmp_path):
  """Observables and DMC take one geometry: each says so, through the command line."""
  run = tmp_path / 'run'
  train.train(h2_scan(run), quiet=True)
  for cmd, said in (
      (['ferminet_fast.evaluate', f'--run={run}', '--observables=s2', '--steps=2'],
       'evaluated for its energies only'),
      (['ferminet_fast.dmc', f'--run={run}'], 'trained over a set of geometries')):
    proc = subprocess.run([sys.executable, '-m', *cmd], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr


RS = (1.0, 1.25, 1.5)  # bohr: the electron gas's densities of a scan of its cell.


def gas_scan(path, **overrides):
  """The electron gas of two electrons over RS (a scan of its cell), a tiny network, a few
  steps."""
  return tiny_config('', **{
      'system.rs': RS[0], 'system.electrons': (1, 1), 'network.envelope': 'planewave',
      'pretrain.iterations': 0, 'system.scan.cell': True, 'system.scan.start': 1.0,
      'system.scan.stop': RS[-1] / RS[0], 'system.scan.points': len(RS), 'batch_size': 24,
      'optim.iterations': 3, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'network.psiformer.layers': 1, 'network.psiformer.heads': 2,
      'network.psiformer.head_dim': 4, 'log.save_path': str(path), **overrides})


@pytest.mark.parametrize('network,optimizer,precision', RUNS)
@pytest.mark.jax_range
def test_every_network_optimizer_and_precision_trains_over_a_scan_of_a_cell(
    tmp_path, network, optimizer, precision):
  """Each combination trains the electron gas over a scan of its cell through train():
  finite energies for every density, each chain with its own width, its walkers in its
  own cell."""
  cfg = gas_scan(tmp_path / 'run', **{'network.network_type': network,
                                      'optim.optimizer': optimizer, 'precision': precision})
  result = train.train(cfg, quiet=True)
  assert result.state.walkers.width.shape == (len(RS),)
  assert len(result.geometries) == len(RS)
  assert all(np.isfinite(e.mean) for e in result.geometries)
  x = np.asarray(result.state.walkers.x).reshape(len(RS), -1, 2, 3)
  side = (2 * 4 * np.pi / 3) ** (1 / 3) * np.asarray(RS)  # The cube of two electrons.
  assert np.all(x >= -1e-4 * side[:, None, None, None])
  assert np.all(x <= side[:, None, None, None] * (1 + 1e-4))


def test_a_scan_of_a_cell_resumes_and_evaluates_each_density(tmp_path):
  """The electron gas over five densities: a resume that continues the steps, then
  evaluation: pes.json lists each geometry's r_s, scale and volume, the correlated
  differences and the fitted equation of state, drawn in pes.png; a pyscf reference,
  observables and DMC are refused in words."""
  run, rs = tmp_path / 'run', np.linspace(RS[0], RS[-1], 5)
  five = {'system.scan.points': len(rs), 'batch_size': 40}
  train.train(gas_scan(run, **five), quiet=True)
  more = train.train(gas_scan(run, **five, **{'optim.iterations': 5}), quiet=True)
  assert len(more.history['energy_2']) == 5
  evaluate.evaluate(str(run), steps=4, burn_in=1, quiet=True)
  pes = json.loads((run / 'pes.json').read_text())
  assert pes['label'] == 'r_s / bohr'
  rows = pes['geometries']
  np.testing.assert_allclose([r['coordinate'] for r in rows], rs, rtol=1e-12)
  np.testing.assert_allclose([r['scale'] for r in rows], rs / rs[0], rtol=1e-12)
  np.testing.assert_allclose([r['volume_bohr3'] for r in rows], 2 * 4 * np.pi / 3 * rs ** 3,
                             rtol=1e-9)
  assert [(p['from'], p['to']) for p in pes['differences']] == [(g, g + 1) for g in range(4)]
  assert all(np.isfinite(p['correlated']) for p in pes['differences'])
  fit = pes['equation_of_state']
  assert fit['points'] == 5 and len(fit['coefficients']) == 4 and 'minimum' in fit
  assert (run / 'plots' / 'pes.png').exists()
  with pytest.raises(InputError, match="pyscf's references are of molecules"):
    evaluate.evaluate(str(run), steps=2, burn_in=0, quiet=True, reference='hf/sto-3g')
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}'], cwd=REPO,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 2 and 'trained over a set of geometries' in proc.stderr
  assert 'Traceback' not in proc.stderr


def test_a_scan_of_a_crystals_cell_pretrains_trains_and_evaluates(tmp_path):
  """LiH in its rock-salt primitive cell at three sizes, Hartree-Fock pretrained in each:
  each geometry trains and evaluates; pes.json's coordinate is the factor of the cell."""
  pytest.importorskip('pyscf')
  run = tmp_path / 'run'
  train.train(tiny_config('', **{
      'system.molecule': 'Li 0 0 0; H 3.8 0 0', 'system.units': 'bohr',
      'system.lattice': ((0, 3.8, 3.8), (3.8, 0, 3.8), (3.8, 3.8, 0)),
      'network.envelope': 'isotropic', 'pretrain.iterations': 5,
      'pretrain.basis': 'sto-3g', 'system.scan.cell': True,
      'system.scan.start': 0.95, 'system.scan.stop': 1.05, 'system.scan.points': 3,
      'batch_size': 24, 'optim.iterations': 3, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'log.save_path': str(run)}), quiet=True)
  evaluate.evaluate(str(run), steps=3, burn_in=1, quiet=True)
  pes = json.loads((run / 'pes.json').read_text())
  assert pes['label'] == 'cell / cell given'
  np.testing.assert_allclose([r['coordinate'] for r in pes['geometries']], (0.95, 1.0, 1.05))
  (li, h) = np.asarray(pes['geometries'][2]['positions_bohr'])
  assert np.linalg.norm(h - li) == pytest.approx(3.8 * 1.05)
  assert all(np.isfinite(r['energy']) for r in pes['geometries'])


def full_ci(bond: float) -> float:
  """The full CI energy of H2 at `bond` (bohr) in cc-pVQZ, Ha, by pyscf's CCSD, which is full
  CI for two electrons and cheaper than pyscf's FCI solver: within 1 mHa of
  the exact Born-Oppenheimer energy from 1 to 2 bohr (Kolos & Wolniewicz, J. Chem. Phys. 43,
  2429 (1965))."""
  from pyscf import cc, gto, scf
  mol = gto.M(atom=f'H 0 0 0; H 0 0 {bond}', unit='bohr', basis='cc-pvqz', verbose=0)
  return cc.CCSD(scf.RHF(mol).run()).run(conv_tol=1e-10).e_tot


SHORT = {'batch_size': 96, 'optim.optimizer': 'kfac', 'mcmc.burn_in': 100, 'mcmc.steps': 10,
         'pretrain.iterations': 0, 'network.ferminet.hidden_dims': ((16, 4), (16, 4)),
         'network.determinants': 2}


@pytest.fixture(scope='module')
def surface_run(tmp_path_factory):
  """400 KFAC steps of one network over H2 at BONDS, evaluated at each geometry."""
  pytest.importorskip('pyscf')
  run = tmp_path_factory.mktemp('surface') / 'run'
  train.train(h2_scan(run, **SHORT, **{'optim.iterations': 400}), quiet=True)
  evaluate.evaluate(str(run), steps=200, burn_in=20, quiet=True)
  return run


def test_a_short_surface_training_follows_the_full_ci_curve(surface_run):
  """Every evaluated energy within 5 mHa of full CI (above it beyond the noise only by
  that), and the curve's two differences within 5 mHa of full CI's: the network learned
  each geometry, not their mean."""
  reference = np.array([full_ci(b) for b in BONDS])
  rows = json.loads((surface_run / 'pes.json').read_text())['geometries']
  energies = np.array([r['energy'] for r in rows])
  errors = np.array([r['error'] for r in rows])
  assert np.all(np.abs(energies - reference) < 5e-3 + 3 * errors), (energies, reference)
  np.testing.assert_allclose(energies - energies[1], reference - reference[1], atol=5e-3)


def test_each_geometry_evaluated_with_more_walkers_agrees(surface_run, tmp_path):
  """Evaluated with 4 times training's walkers per geometry (each geometry's own, cycled),
  every geometry's energy agrees with its evaluation at training's walkers within 4 combined
  errors: no chain took another geometry's walkers."""
  run = tmp_path / 'run'
  shutil.copytree(surface_run, run)
  before = json.loads((run / 'pes.json').read_text())
  evaluate.evaluate(str(run), steps=200, burn_in=20, quiet=True,
                    walkers=4 * before['walkers_per_geometry'])
  after = json.loads((run / 'pes.json').read_text())
  assert after['walkers_per_geometry'] == 4 * before['walkers_per_geometry']
  for a, b in zip(before['geometries'], after['geometries']):
    assert abs(a['energy'] - b['energy']) < 4 * np.hypot(a['error'], b['error']), (a, b)


def test_a_geometry_outside_the_set_fine_tunes_from_the_surface(surface_run, tmp_path):
  """H2 at 1.25 bohr, between the trained bond lengths: 50 steps from the surface's
  parameters reach 5 mHa of full CI, which 50 steps from initialised parameters do not."""
  at = {'system.scan.points': 0, 'system.scan.atoms': (), 'system.scan.start': None,
        'system.scan.stop': None, 'system.molecule': 'H 0 0 0; H 0 0 1.25', 'optim.iterations': 50}
  reference = full_ci(1.25)
  energies = {}
  for name, source in (('fine-tuned', str(surface_run)), ('fresh', '')):
    run = tmp_path / name
    train.train(h2_scan(run, **SHORT, **at, **{'log.fine_tune_from': source}), quiet=True)
    estimate = evaluate.evaluate(str(run), steps=100, burn_in=20, quiet=True)
    energies[name] = estimate.mean - reference, estimate.error
  tuned, fresh = energies['fine-tuned'], energies['fresh']
  assert abs(tuned[0]) < 5e-3 + 3 * tuned[1], energies
  assert fresh[0] > 5e-3 + 3 * fresh[1], energies


def test_fine_tuning_refuses_parameters_of_another_molecule_or_network(surface_run, tmp_path):
  for overrides, said in (
      ({'system.molecule': 'H 0 0 0; H 0 0 1.2; H 0 0 2.4'},
       'only the positions of the nuclei may differ'),
      ({'system.molecule': 'H 0 0 0; H 0 0 1.2', 'network.determinants': 1},
       'network.determinants: 2 -> 1')):
    cfg = h2_scan(tmp_path / 'run', **{**SHORT, 'system.scan.points': 0,
                                       'system.scan.atoms': (), 'system.scan.start': None,
                                       'system.scan.stop': None,
                                       'log.fine_tune_from': str(surface_run), **overrides})
    with pytest.raises(InputError, match=said):
      train.train(cfg, quiet=True)
    assert not os.path.exists(tmp_path / 'run')


@pytest.mark.parametrize('per_step', [0, 2])
def test_a_surface_anneals_its_rate_towards_its_time_budget(tmp_path, per_step):
  """Over a set of geometries, all of them or a subset each step, with KFAC (its norm
  bound lifted and a small rate, so the rate is the schedule's): the clocked step's rate falls to
  anneal_to times the schedule's by the budget's end."""
  cfg = h2_scan(tmp_path / 'run', **{'optim.iterations': 100000, 'optim.seconds': 2.0,
                                     'optim.lr.anneal': 1.0, 'optim.lr.delay': 1e12,
                                     'optim.lr.rate': 1e-3, 'optim.optimizer': 'kfac',
                                     'optim.kfac.norm_constraint': 1e12,
                                     'optim.geometries_per_step': per_step})
  result = train.train(cfg, quiet=True)
  lr = np.asarray(result.history['lr'])
  assert result.budget_step == len(lr) > 4 and np.all(np.diff(lr) <= 1e-9)
  assert lr[-1] < 0.2 * lr[0]
