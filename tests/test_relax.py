"""Geometry optimisation (config.system.relax): the optimiser on a noisy surface whose
minimum is known, the run through train() with each optimizer, relax.json, resume,
evaluation at the relaxed geometry, the refusals, and H2 relaxed from a stretched bond."""

import json

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, plan, train
from ferminet_fast.physics import relaxation
from ferminet_fast.stages import relax, trained
from ferminet_fast.vmc import stats

DEFAULTS = relaxation.Settings(start=0, every=20, hessian=relaxation.NO_HESSIAN, rate=0.3,
                               step_size=0.5, momentum=0.5, max_displacement=0.05, average=0.5,
                               tolerance=0.005, min_averaged=50, max_moves=0)


def test_rigid_motions_are_projected_out():
  """A net force and a torque vanish from the projected forces; a stretch stays whole."""
  rng = np.random.default_rng(0)
  positions = rng.normal(size=(4, 3))
  basis = relaxation.rigid_basis(positions)
  assert basis.shape == (12, 6)
  rigid = (np.tile([1.0, -2.0, 0.5], 4) + np.cross([0.3, 0.1, -1.0],
                                                   positions - positions.mean(0)).ravel())
  np.testing.assert_allclose(relaxation.project(rigid.reshape(4, 3), positions), 0, atol=1e-12)
  line = np.array([[0, 0, -0.7], [0, 0, 0.7]])
  assert relaxation.rigid_basis(line).shape == (6, 5)  # A linear molecule: 5 rigid motions.
  stretch = np.array([[0, 0, -1.0], [0, 0, 1.0]])
  np.testing.assert_allclose(relaxation.project(stretch, line), stretch, atol=1e-12)


def test_weighted_projection_takes_the_net_force_from_the_noisiest_nucleus():
  """Water's geometry, its oxygen's force samples ten times noisier than its hydrogens'
  (as measured: ACCURACY.md, the forces at several node cutoffs). Projecting out the net
  force and torque with each nucleus weighted by its variance (estimated from the samples)
  gives a mean force whose error, over 50 runs of 400 samples, is the generalised least
  squares' tr(W S W^T), 0.22 of the orthogonal projection's tr(P S P^T) (S the noise, W and
  P the two projections); both remove any rigid motion exactly, and equal variances give
  the orthogonal projection."""
  rng = np.random.default_rng(2)
  positions = np.array([[0, 0, 0], [1.43, 0, 1.11], [-1.43, 0, 1.11]])
  sigma = np.array([0.2, 0.02, 0.02])
  basis, noise = relaxation.rigid_basis(positions), np.diag(np.repeat(sigma**2, 3))
  p = np.eye(9) - basis @ basis.T
  w = np.eye(9) - noise @ basis @ np.linalg.solve(basis.T @ noise @ basis, basis.T)
  expected = np.sqrt(np.trace(w @ noise @ w.T) / np.trace(p @ noise @ p.T))
  squares = np.zeros(2)
  for _ in range(50):
    exact = relaxation.project(rng.normal(scale=0.05, size=(3, 3)), positions)
    samples = exact + rng.normal(size=(400, 3, 3)) * sigma[:, None]
    variances = np.mean(np.var(samples, axis=0), axis=-1)
    plain = relaxation.project(samples, positions).mean(axis=0)
    weighted = relaxation.project(samples, positions, variances).mean(axis=0)
    squares += [np.sum((plain - exact) ** 2), np.sum((weighted - exact) ** 2)]
    np.testing.assert_allclose(weighted.ravel() @ basis, 0, atol=1e-12)
  ratio = np.sqrt(squares[1] / squares[0])
  assert expected < 0.3 and abs(ratio / expected - 1) < 0.2, (ratio, expected)
  np.testing.assert_allclose(relaxation.project(samples[:3], positions, np.ones(3)),
                             relaxation.project(samples[:3], positions), atol=1e-12)


def test_the_move_follows_the_force_and_is_capped():
  positions, velocity = np.zeros((2, 3)), np.zeros((2, 3))
  forces = np.array([[0, 0, -0.01], [0, 0, 0.01]])
  new, v = relaxation.move(positions, velocity, forces, DEFAULTS)
  np.testing.assert_allclose(new - positions, DEFAULTS.step_size * forces)
  new, v = relaxation.move(positions, velocity, 100 * forces, DEFAULTS)
  assert np.max(np.linalg.norm(v, axis=-1)) == pytest.approx(DEFAULTS.max_displacement)
  # Against the last move, the momentum restarts from zero.
  _, v = relaxation.move(positions, np.array([[0, 0, 1.0], [0, 0, -1.0]]), forces, DEFAULTS)
  np.testing.assert_allclose(v, DEFAULTS.step_size * forces)


def bond_hessian(k: float) -> np.ndarray:
  """(6, 6) Ha/bohr^2: the Hessian of E = k (R - R0)^2 / 2 at its minimum, bond along z."""
  zz = np.diag([0.0, 0.0, 1.0])
  return k * np.block([[zz, -zz], [-zz, zz]])


def noisy_diatomic(rng, k: float, sigma: float, moves: int, s=DEFAULTS, stop=False,
                   hessian=None) -> list:
  """The path of a harmonic bond E = k (R - R0)^2 / 2 (R0 = 1.401 bohr) from R = 1.54 through
  the same moves as a run, each move's forces the exact ones plus Gaussian noise of `sigma`
  Ha/bohr per component, preconditioned by `hessian` (6, 6) if given; with `stop`, ended
  when the final geometry meets the criterion."""
  positions = np.array([[0, 0, -0.77], [0, 0, 0.77]])
  velocity, path = np.zeros((2, 3)), []
  for _ in range(moves):
    axis = positions[1] - positions[0]
    r = np.linalg.norm(axis)
    exact = np.array([1, -1])[:, None] * k * (r - 1.401) * axis / r  # Pulls each nucleus in.
    forces = relaxation.project(exact + rng.normal(scale=sigma, size=(2, 3)), positions)
    path.append({'positions_bohr': positions.tolist(), 'forces_ha_per_bohr': forces.tolist()})
    if stop and relax.final_geometry(path, s, hessian)['meets']:
      break
    inverse = None if hessian is None else relaxation.inverse_hessian(hessian, positions)
    positions, velocity = relaxation.move(positions, velocity, forces, s, inverse)
  return path


def test_the_optimiser_stops_a_noisy_diatomic_at_its_minimum():
  """H2's force constant (k = 0.37 Ha/bohr^2) and a noise of 0.01 Ha/bohr per component
  (about what 20 steps of a few hundred H2 walkers give): the path settles within a few
  moves, the criterion is met once 50 positions are averaged (the mean of 50 positions
  spread by about 0.01 bohr is known to a few mbohr, below the tolerance), the final bond
  lies within 3 of its errors of R0 and the centroid stays put."""
  path = noisy_diatomic(np.random.default_rng(1), 0.37, 0.01, 1000, stop=True)
  final = relax.final_geometry(path, DEFAULTS)
  assert final['meets'] and final['positions_averaged'] >= DEFAULTS.min_averaged, len(path)
  (bond,) = final['distances']
  assert bond['error_bohr'] <= DEFAULTS.tolerance
  assert abs(bond['distance_bohr'] - 1.401) < 3 * bond['error_bohr'], bond
  np.testing.assert_allclose(np.mean(final['positions_bohr'], axis=0), 0, atol=1e-9)


def test_the_preconditioned_move_is_a_fraction_of_the_newton_step():
  """With the exact Hessian of a harmonic bond, one move from rest takes `rate` of the way
  to the minimum along the bond; a rigid motion in the forces is not amplified."""
  s = DEFAULTS._replace(hessian=relaxation.HARTREE_FOCK, max_displacement=1.0)
  positions = np.array([[0, 0, -0.77], [0, 0, 0.77]])
  forces = np.array([[0, 0, 0.37 * 0.139], [0, 0, -0.37 * 0.139]])
  inverse = relaxation.inverse_hessian(bond_hessian(0.37), positions)
  new, _ = relaxation.move(positions, np.zeros((2, 3)), forces, s, inverse)
  assert np.linalg.norm(new[1] - new[0]) == pytest.approx(1.54 - s.rate * 0.139)
  np.testing.assert_allclose(inverse @ np.tile([1.0, 0, 0], 2), 0, atol=1e-12)
  # An unstable mode moves downhill by its curvature's magnitude, a flat one by at most
  # F / FLOOR.
  unstable = relaxation.inverse_hessian(-bond_hessian(1.0), positions)  # Eigenvalue -2.
  np.testing.assert_allclose(unstable @ forces.ravel(), forces.ravel() / 2, atol=1e-12)
  flat = relaxation.inverse_hessian(-0.01 * bond_hessian(1.0), positions)
  np.testing.assert_allclose(flat @ forces.ravel(), forces.ravel() / relaxation.FLOOR)


def test_the_hessian_relaxes_a_soft_mode_as_fast_as_a_stiff_one():
  """The final geometry's error bar is reblocked over the averaged positions, which is
  honest only when they span many correlation times. Without a Hessian a bond of k = 0.05
  Ha/bohr^2 (as soft as water's bend) relaxes, and decorrelates, k-fold more slowly than
  H2's k = 0.37, 7.4 times by the move's linear response; preconditioned by a Hessian, even
  one twice too stiff (Hartree-Fock's curvatures err by tens of per cent), both relax at
  the same rate. Measured by the integrated correlation time of the bond along 3000 moves
  (noise 0.01 Ha/bohr): the ratio soft / stiff is above 3 without and below 2 with it."""
  taus = {}
  for hessian in ('identity', 'hf'):
    s = DEFAULTS._replace(hessian=relaxation.HESSIANS[hessian])
    for k in (0.37, 0.05):
      h = 2.0 * bond_hessian(k) if hessian == 'hf' else None
      path = noisy_diatomic(np.random.default_rng(5), k, 0.01, 3000, s, hessian=h)
      bonds = relaxation.distances(np.array([e['positions_bohr'] for e in path[500:]]))[1]
      taus[hessian, k] = stats.reblock(bonds[:, 0]).tau
  assert taus['identity', 0.05] / taus['identity', 0.37] > 3, taus
  assert taus['hf', 0.05] / taus['hf', 0.37] < 2, taus


def test_newton_estimates_find_a_harmonic_minimum_from_a_path_still_descending():
  """Positions still far from the minimum (a bond shrinking from 1.60 to 1.45 bohr) with the
  exact forces of a harmonic bond (k = 0.37 Ha/bohr^2, R0 = 1.401): each carried a Newton
  step by the exact Hessian lands on R0, so the final geometry is R0 to rounding with no
  error; the positions' own mean lies more than 0.05 bohr off."""
  s = DEFAULTS._replace(hessian=relaxation.HARTREE_FOCK)
  path = []
  for r in np.linspace(1.60, 1.45, 60):
    forces = 0.37 * (r - 1.401) * np.array([[0, 0, 1.0], [0, 0, -1.0]])
    path.append({'positions_bohr': [[0, 0, -r / 2], [0, 0, r / 2]],
                 'forces_ha_per_bohr': forces.tolist()})
  final = relax.final_geometry(path, s, bond_hessian(0.37))
  (bond,) = final['distances']
  assert bond['distance_bohr'] == pytest.approx(1.401, abs=1e-12)
  assert bond['error_bohr'] < 1e-12
  (plain,) = relax.final_geometry(path, s)['distances']
  assert plain['distance_bohr'] - 1.401 > 0.05


def test_final_geometries_stopped_by_the_criterion_are_within_their_errors():
  """A soft harmonic bond (k = 0.05 Ha/bohr^2, as soft as water's bend) under force noise of
  0.01 Ha/bohr per component, relaxed by the Hessian-preconditioned optimiser (a Hessian 20%
  too stiff, as Hartree-Fock's can be) until the criterion (tolerance 0.012 bohr) stops it,
  in 60 independent runs of at most 300 moves. An honest error bar puts 95% of the final
  bonds within two errors of R0; the Newton estimates, whose error comes from many
  independent estimates, stay near that (at least 80%, the Hessian's error costing some),
  while the positions' own mean, stopped by the same criterion on its error from few blocks,
  falls far short (below 75%)."""
  s = DEFAULTS._replace(hessian=relaxation.HARTREE_FOCK, tolerance=0.012)
  hessian = 1.2 * bond_hessian(0.05)
  within = {}
  for name, carried in (('newton', hessian), ('positions', None)):
    z = []
    for seed in range(60):
      path = stopped_path(np.random.default_rng(seed), s, hessian, carried)
      (bond,) = relax.final_geometry(path, s, carried)['distances']
      z.append(abs(bond['distance_bohr'] - 1.401) / bond['error_bohr'])
    within[name] = np.mean(np.array(z) < 2)
  assert within['newton'] >= 0.8 and within['positions'] < 0.75, within


def stopped_path(rng, s, hessian, carried, moves=300) -> list:
  """noisy_diatomic's path for a soft bond (k = 0.05, noise 0.01) preconditioned by
  `hessian`, cut where final_geometry with `carried` first meets the criterion (not before
  2 s.min_averaged moves, when the trailing half first holds enough positions)."""
  path = noisy_diatomic(rng, 0.05, 0.01, moves, s, hessian=hessian)
  for n in range(2 * s.min_averaged, len(path) + 1):
    if relax.final_geometry(path[:n], s, carried)['meets']:
      return path[:n]
  return path


def test_a_drifting_path_does_not_meet_the_criterion():
  """Positions that still descend (a bond shrinking by 1 mbohr per move with 0.5 mbohr of
  noise) are known to well below a tolerance of 0.05 bohr but fail the two halves'
  agreement; the same positions settled pass it."""
  rng = np.random.default_rng(4)
  s = DEFAULTS._replace(tolerance=0.05)
  for slope, meets in ((1e-3, False), (0.0, True)):
    r = 1.5 - slope * np.arange(100) + rng.normal(scale=5e-4, size=100)
    path = [{'positions_bohr': [[0, 0, -x / 2], [0, 0, x / 2]]} for x in r]
    final = relax.final_geometry(path, s)
    assert final['meets'] is meets, final['distances']
  assert relaxation.drift_limit(1) == pytest.approx(1.96, abs=0.01)
  assert relaxation.drift_limit(3) == pytest.approx(2.39, abs=0.01)
  assert relaxation.averaged(5, 0.4) == 2 and relaxation.averaged(1, 0.5) == 1


def tiny_relax(path, **overrides):
  """H2 stretched to 1.54 bohr, a tiny network, a few steps, a move every 2."""
  return tiny_config('H', **{
      'system.atom': '', 'system.molecule': 'H 0 0 -0.77; H 0 0 0.77', 'system.relax': True,
      'batch_size': 16, 'optim.iterations': 6, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'relax.start': 0, 'relax.every': 2, 'log.save_path': str(path), **overrides})


FIELDS = ('symbols', 'settings', 'criterion', 'hessian', 'steps', 'path', 'moves', 'converged',
          'stopped_by', 'stopped_at_step', 'final', 'current_positions_bohr')
ENTRY = ('step', 'positions_bohr', 'velocity_bohr', 'forces_ha_per_bohr',
         'force_errors_ha_per_bohr', 'force_samples')


@pytest.mark.parametrize('optimizer', ['adam', 'kfac', 'spring'])
def test_each_optimizer_relaxes_and_writes_relax_json(tmp_path, optimizer):
  """With Adam the moves are not preconditioned (relax.hessian = 'identity': no Hessian is
  computed or saved); with the others by the UHF/sto-6g Hessian."""
  run = tmp_path / 'run'
  hessian = 'identity' if optimizer == 'adam' else 'hf'
  result = train.train(tiny_relax(run, **{'optim.optimizer': optimizer,
                                          'relax.hessian': hessian}), quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  saved = json.loads((run / 'relax.json').read_text())
  assert all(k in saved for k in FIELDS), sorted(saved)
  assert saved['symbols'] == ['H', 'H'] and saved['steps'] == 6 and saved['moves'] == 3
  if hessian == 'identity':
    assert saved['hessian'] is None
  else:
    h = np.asarray(saved['hessian']['ha_per_bohr2'])
    assert saved['hessian']['method'] == 'UHF/sto-6g' and h.shape == (6, 6)
  assert [e['step'] for e in saved['path']] == [0, 2, 4, 6]
  for entry in saved['path'][:-1]:
    assert all(k in entry for k in ENTRY), entry
    assert entry['force_samples'] == 2 and np.all(np.isfinite(entry['forces_ha_per_bohr']))
  (bond,) = saved['final']['distances']
  assert bond['atoms'] == [0, 1] and np.isfinite(bond['distance_bohr'])
  assert saved['converged'] is False and saved['stopped_by'] is None
  # The walkers moved with the nuclei: finite, and the last positions are the path's.
  assert np.all(np.isfinite(np.asarray(result.state.walkers.x)))
  np.testing.assert_allclose(saved['current_positions_bohr'], saved['path'][-1]['positions_bohr'])
  centroid = np.mean(saved['current_positions_bohr'], axis=0)
  np.testing.assert_allclose(centroid, 0, atol=1e-9)  # The net force is projected out.


def test_a_resumed_relaxation_continues_from_the_saved_geometry_and_evaluation_takes_it(
    tmp_path):
  """Stopped after 6 steps (3 moves), max_moves 4 then stops the nuclei on resume; the path up
  to step 6 is kept, the nuclei start where they were, and a trained-run load (evaluation,
  DMC) builds the system at the current geometry."""
  run = tmp_path / 'run'
  train.train(tiny_relax(run), quiet=True)
  first = json.loads((run / 'relax.json').read_text())
  # The resumed run moves by the Hessian it saved, not one computed again.
  first['hessian']['ha_per_bohr2'] = (2 * np.asarray(first['hessian']['ha_per_bohr2'])).tolist()
  (run / 'relax.json').write_text(json.dumps(first))
  train.train(tiny_relax(run, **{'optim.iterations': 14, 'relax.max_moves': 4,
                                 'relax.average': 0.4}), quiet=True)
  saved = json.loads((run / 'relax.json').read_text())
  assert saved['hessian'] == first['hessian'] and saved['hessian']['method'] == 'UHF/sto-6g'
  assert saved['path'][:3] == first['path'][:3]
  assert saved['path'][3]['positions_bohr'] == first['path'][3]['positions_bohr']
  assert saved['moves'] == 4 and saved['stopped_by'] == 'max_moves'
  assert saved['converged'] is False and saved['stopped_at_step'] == 10
  stop = saved['path'][-1]
  assert stop['stop'] == 'max_moves' and stop['step'] == 10
  # The residual forces at the final geometry come from the relax.every = 2 steps after
  # the stop; the steps after those (13, 14) ran without forces.
  assert stop['force_samples'] == 2 and np.all(np.isfinite(stop['forces_ha_per_bohr']))
  # The final geometry is the mean of the last 2 of the 5 positions before the stop, each
  # carried a Newton step along the forces measured there by the saved Hessian.
  moving = saved['path'][-3:-1]
  expected = np.mean(relaxation.newton_estimates(
      np.array([e['positions_bohr'] for e in moving]),
      np.array([e['forces_ha_per_bohr'] for e in moving]),
      np.asarray(saved['hessian']['ha_per_bohr2'])), axis=0)
  np.testing.assert_allclose(saved['final']['positions_bohr'], expected, atol=1e-12)
  np.testing.assert_allclose(saved['current_positions_bohr'], expected, atol=1e-12)
  cfg = plan.settings(tiny_relax(run, **{'optim.iterations': 14}), later_stage=True)
  loaded = trained.TrainedRun.load(str(run), cfg)
  np.testing.assert_allclose(loaded.built.system.positions, expected, atol=1e-12)
  # Trained on at the final geometry, the residual forces measured there are kept.
  train.train(tiny_relax(run, **{'optim.iterations': 16, 'relax.max_moves': 4,
                                 'relax.average': 0.4}), quiet=True)
  again = json.loads((run / 'relax.json').read_text())
  assert again['path'] == saved['path'] and again['steps'] == 16
  # Where the newest checkpoints do not restore, the nuclei are those of the one that does.
  for step in (14, 16):
    for f in (run / 'checkpoints' / str(step)).rglob('*'):
      if f.is_file() and f.stat().st_size > 0 and 'METADATA' not in f.name:
        with open(f, 'r+b') as fh:
          fh.truncate(f.stat().st_size // 3)
  with pytest.warns(UserWarning, match='cannot be restored'):
    loaded = trained.TrainedRun.load(str(run), cfg)
  assert loaded.trained_step == 6
  np.testing.assert_allclose(loaded.built.system.positions, first['path'][3]['positions_bohr'])


REFUSED = [
    ({'system.scan.atoms': (0, 1), 'system.scan.start': 1.0, 'system.scan.stop': 2.0,
      'system.scan.points': 2}, 'config.system.scan gives a set of geometries'),
    ({'system.geometries': ('H 0 0 0; H 0 0 1.4', 'H 0 0 0; H 0 0 1.5')},
     'config.system.geometries gives a set of geometries'),
    ({'system.lattice': ((0, 2.0, 2.0), (2.0, 0, 2.0), (2.0, 2.0, 0)),
      'network.envelope': 'auto'}, 'forces of a periodic system'),
    ({'system.states': 2}, 'needs one state'),
    ({'system.atom': 'He', 'system.molecule': ''}, 'has no geometry to relax'),
    ({'relax.step_size': -0.5}, 'config.relax.step_size must be > 0, got -0.5'),
    ({'relax.every': 0}, 'config.relax.every must be a positive integer, got 0'),
    ({'relax.momentum': 1.0}, 'config.relax.momentum must lie in [0, 1)'),
    ({'relax.hessian': 'bfgs'}, "config.relax.hessian = 'bfgs' is not one of"),
    ({'relax.average': 0.0}, 'config.relax.average must lie in (0, 1]'),
]


def test_each_refusal_is_one_clear_error_before_anything_is_written(tmp_path):
  for k, (overrides, message) in enumerate(REFUSED):
    run = tmp_path / f'run{k}'
    with pytest.raises(InputError) as refused:
      train.train(tiny_relax(run, **overrides), quiet=True)
    assert message in str(refused.value), (overrides, str(refused.value))
    assert '\n' not in str(refused.value).strip()
    assert not run.exists(), overrides


def test_ecp_atoms_are_refused(tmp_path):
  pytest.importorskip('pyscf')
  cfg = tiny_relax(tmp_path / 'run', **{'system.molecule': 'Li 0 0 0; H 0 0 3.0',
                                        'system.ecp': 'ccecp'})
  with pytest.raises(InputError, match='not available with effective core potentials'):
    train.train(cfg, quiet=True)
  assert not (tmp_path / 'run').exists()


def test_the_command_line_refuses_with_one_line_and_exit_status_2(tmp_path):
  from test_train import run_cli
  proc = run_cli('--config', 'configs/lih.py', '--config.system.relax=True',
                 '--config.system.states=2', f'--config.log.save_path={tmp_path / "run"}')
  assert proc.returncode == 2 and 'needs one state' in proc.stderr, proc.stderr[-2000:]
  assert 'Traceback' not in proc.stderr


def test_h2_relaxes_from_a_stretched_bond_to_its_equilibrium(tmp_path):
  """H2 from R = 1.54 bohr (10% stretched) through train(): 300 KFAC steps at that geometry,
  then a move every 10 steps preconditioned by the UHF/sto-6g Hessian. The force measured
  there pulls the nuclei together (by more than twice its error; the harmonic force k (R -
  R0) = 0.37 x 0.139 = 0.05 Ha/bohr), the criterion is met within the run (a bond known to
  0.01 bohr from at least 10 averaged positions, its two halves agreeing), and the final
  bond length is within 0.02 bohr of the exact 1.401 (Kolos & Wolniewicz) and within 3
  of its errors plus 0.01 bohr of it: the small network's own minimum lies within a few
  mbohr of the exact one (its energy is within 1 mHa of the exact -1.1745 Ha)."""
  run = tmp_path / 'run'
  cfg = tiny_relax(run, **{'batch_size': 256, 'optim.optimizer': 'kfac',
                           'optim.iterations': 600, 'mcmc.burn_in': 100, 'mcmc.steps': 10,
                           'network.ferminet.hidden_dims': ((16, 4), (16, 4)),
                           'relax.start': 300, 'relax.every': 10, 'relax.min_averaged': 10,
                           'relax.tolerance': 0.01})
  train.train(cfg, quiet=True)
  saved = json.loads((run / 'relax.json').read_text())
  assert saved['hessian']['method'] == 'UHF/sto-6g'
  first = saved['path'][0]
  f, e = np.asarray(first['forces_ha_per_bohr']), np.asarray(first['force_errors_ha_per_bohr'])
  assert f[0, 2] > 2 * e[0, 2] and f[1, 2] < -2 * e[1, 2], (f, e)
  assert saved['converged'] and saved['stopped_by'] == 'criterion', saved['final']
  (bond,) = saved['final']['distances']
  assert abs(bond['distance_bohr'] - 1.401) < min(0.02, 3 * bond['error_bohr'] + 0.01), bond


def test_a_relaxation_anneals_its_rate_towards_its_time_budget(tmp_path):
  """The step with forces, taking the nuclei and a clock: the rate falls to anneal_to times
  the schedule's by the budget's end while the nuclei move."""
  run = tmp_path / 'run'
  # The last step takes the clock where the step before it ended, up to a step short of the
  # budget's end: a budget of many steps keeps that within the check, on a loaded machine too
  # (a 2 s budget once met steps of 0.6 s under a parallel test run).
  result = train.train(tiny_relax(run, **{'optim.iterations': 100000, 'optim.seconds': 6.0,
                                          'optim.lr.anneal': 1.0, 'optim.lr.delay': 1e12}),
                       quiet=True)
  lr = np.asarray(result.history['lr'])
  assert result.budget_step == len(lr) > 4 and np.all(np.diff(lr) <= 1e-9)
  assert lr[-1] < 0.2 * lr[0]  # anneal_to = 0.1 at the end of the budget.
  assert json.loads((run / 'relax.json').read_text())['moves'] >= 1
