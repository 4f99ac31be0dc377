"""Correlated-sampling energy differences of adjacent geometries (stages/differences.py):
the weights against a direct computation, exact limits (the same geometry twice, a rigid
translation, the closed-form LCAO energy of H2+), and a short H2 surface training whose
correlated differences agree with the independent ones and are more precise."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import evaluate, plan, train
from ferminet_fast.physics import hamiltonian, laplacians, observables, systems
from ferminet_fast.stages import differences
from test_observables import h2_plus, lcao_energy, sample_h2_plus

H3 = 'H 0 0 0; H 0 0 1.4; H 0 1.2 0.7'  # bohr: three nuclei, so that the warp mixes them.


def parts_of(molecule: str):
  """The float64 Parts of a tiny FermiNet for `molecule` (bohr) and its parameters."""
  cfg = tiny_config('H', **{'system.atom': '', 'system.molecule': molecule,
                            'system.units': 'bohr', 'precision': 'float64', 'batch_size': 16})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system, jnp.float64)
  parts = plan.make_parts(cfg, system, network, laplacians.JACFWD, chunk_size=0)
  return parts, parts.network.init(jax.random.PRNGKey(0)), np.asarray(system.positions)


@pytest.mark.jax_range
def test_weights_equal_the_determinant_of_the_whole_warp():
  """exp(log w) of warped_log_weight is exp(2 (log psi(x', R') - log psi(x, R))) times the
  determinant of jax.jacfwd of the whole warp over x (3N x 3N), the warp written out
  from its definition (omega_I = |r - R_I|^-4 normalised), for H3 with every nucleus moved."""
  with jax.enable_x64(True):
    parts, params, atoms = parts_of(H3)
    moved_atoms = atoms + np.array([[0.1, -0.05, -0.15], [0.0, 0.2, 0.1], [-0.12, 0.03, 0.0]])
    log_psi = parts.network.log_psi

    def whole_warp(x):
      r = x.reshape(-1, 3)
      inv4 = jnp.sum((r[:, None] - atoms[None]) ** 2, axis=-1) ** -2  # (N, M)
      omega = inv4 / jnp.sum(inv4, axis=1, keepdims=True)
      return (r + omega @ (moved_atoms - atoms)).reshape(-1)

    @jax.jit
    def both(x):
      moved, log_w = observables.warped_log_weight(log_psi, params, x, jnp.asarray(atoms),
                                                   jnp.asarray(moved_atoms))
      direct = (jnp.exp(2 * (log_psi(params, whole_warp(x), moved_atoms)
                             - log_psi(params, x, atoms)))
                * jnp.linalg.det(jax.jacfwd(whole_warp)(x)))
      return moved, whole_warp(x), jnp.exp(log_w), direct

    xs = jax.random.normal(jax.random.PRNGKey(3), (5, 9), jnp.float64) + atoms.reshape(-1)
    moved, want, w, direct = jax.vmap(both)(xs)
    np.testing.assert_allclose(moved, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(w, direct, rtol=1e-10)
    assert np.all(np.abs(np.log(direct)) > 1e-3)  # The warp and the nuclei moved something.


def test_weighted_mean_normalises_in_log_space_and_leaves_out_non_finite_walkers():
  """Huge log-weights do not overflow; a walker with a NaN weight or local energy is left
  out and counted; the effective sample size fraction is (sum w)^2 / (n sum w^2), 1 for
  equal weights."""
  log_w = np.array([1000.0, 1000.5, 999.0, np.nan, 1001.0])
  e_l = np.array([-1.0, -1.2, -0.9, -1.1, np.inf])
  mean, ess, left_out = differences.weighted_mean(jnp.asarray(log_w), jnp.asarray(e_l))
  w = np.exp(log_w[:3] - 1000.0)
  assert float(mean) == pytest.approx(np.sum(w * e_l[:3]) / np.sum(w), rel=1e-6)
  assert float(ess) == pytest.approx(np.sum(w) ** 2 / (5 * np.sum(w ** 2)), rel=1e-6)
  assert float(left_out) == pytest.approx(2 / 5)
  mean, ess, left_out = differences.weighted_mean(jnp.zeros(4),
                                                  jnp.asarray([1.0, 2.0, 3.0, 4.0]))
  assert float(mean) == pytest.approx(2.5) and float(ess) == pytest.approx(1.0)
  assert float(left_out) == 0.0


@pytest.mark.parametrize('change', [-0.2, 0.5, -0.5])
def test_the_warp_folds_where_a_bond_shortens_by_more_than_a_quarter(change):
  """Two nuclei D = 1.4 bohr apart, the second moved along the bond by `change`: at their
  midpoint the warp's derivative along the bond is 1 + 4 change / D (from omega_2 =
  u^4 / (u^4 + (1 - u)^4), u = z / D, whose slope at u = 1/2 is 4) and 1 across it, so an
  electron there has log det = log(1 + 4 change / D); beyond a shortening of D / 4 that is
  not positive, the warp folds, and its log-Jacobian is NaN."""
  with jax.enable_x64(True):
    atoms = jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.4]])
    moved = atoms.at[1, 2].add(change)
    x = jnp.array([0.0, 0.0, 0.7, 1e-3, 0.0, 0.0])  # One at the midpoint, one at a nucleus.
    _, log_det = observables.space_warp(x, atoms, moved)
    slope = 1 + 4 * change / 1.4
    if slope > 0:
      assert float(log_det) == pytest.approx(np.log(slope), abs=1e-6)
    else:
      assert np.isnan(float(log_det))


def test_walkers_where_the_warp_folds_are_counted_and_warned_of():
  """make_pairs over H2 at D = 1.4, 0.9 and 1.4 bohr: the first pair shortens the bond by
  more than D / 4, so walkers near the bond's midpoint have no weight and are counted as
  left out; the second pair stretches it (no fold, none left out); the report warns of the
  first pair only."""
  with jax.enable_x64(True):
    parts, params, atoms = parts_of('H 0 0 0; H 0 0 1.4')
    short = atoms.copy()
    short[1, 2] = 0.9
    stack = systems.Geometry(jnp.asarray(np.stack([atoms, short, atoms])))
    xs = (0.3 * jax.random.normal(jax.random.PRNGKey(2), (3, 16, 6), jnp.float64)
          + jnp.asarray([0.0, 0.0, 0.7, 0.0, 0.0, 0.7]))  # Both electrons near a midpoint.
    energies, _ = jax.jit(jax.vmap(parts.energy, in_axes=(None, 0, 0)))(params, xs, stack)
    out = np.asarray(jax.jit(differences.make_pairs(parts))(params, xs, stack, energies))
    assert out[2, 0] > 0.0 and out[2, 1] == 0.0
    lines = []
    rows = [{'energy': float(e), 'error': 0.01} for e in energies]
    pairs = differences.report(np.repeat(out[None], 4, axis=0), rows, lines.append)
    assert pairs[0]['left_out_fraction'] == pytest.approx(out[2, 0])
    assert pairs[1]['left_out_fraction'] == 0.0
    warnings = [line for line in lines if 'warning' in line]
    assert len(warnings) == 1 and 'left out' in warnings[0]


def test_same_geometry_and_rigid_translation_give_exactly_zero():
  """make_pairs over H2 at R, R again, and R translated: from R to R the warp is the
  identity and from R to R + d a rigid shift (Jacobian 1) under which a network that reads
  only r - R and r - r' is unchanged, so every weight is 1 and each sweep's correlated
  difference is 0 to rounding (float64), whatever the walkers."""
  with jax.enable_x64(True):
    parts, params, atoms = parts_of('H 0 0 0; H 0 0 1.4')
    stack = systems.Geometry(jnp.asarray(np.stack([atoms, atoms,
                                                   atoms + [0.3, -0.2, 0.5]])))
    xs = (jax.random.normal(jax.random.PRNGKey(1), (3, 16, 6), jnp.float64)
          + jnp.asarray(stack.positions).reshape(3, 1, 6))
    energies, aux = jax.jit(jax.vmap(parts.energy, in_axes=(None, 0, 0)))(params, xs, stack)
    assert float(jnp.std(aux.local_energy[0])) > 1e-2  # Not an eigenstate: E_L varies.
    out = np.asarray(jax.jit(differences.make_pairs(parts))(params, xs, stack, energies))
    np.testing.assert_allclose(out[0], 0.0, atol=1e-11)
    np.testing.assert_allclose(out[1], 1.0, rtol=1e-12)
    np.testing.assert_array_equal(out[2], 0.0)


@pytest.mark.jax_range
def test_lcao_h2_plus_difference_is_the_closed_form_one():
  """Exact samples of H2+'s LCAO wavefunction at R = 2 bohr, warped to R = 2.3: the
  correlated energy difference matches the closed form E(2.3) - E(2.0) within 4 standard
  errors of 40 batches, with a fraction of the error of two independent estimates."""
  system, log_psi_at = h2_plus()
  with jax.enable_x64(True):
    local = jax.vmap(hamiltonian.of(system, laplacians.JACFWD).local_energy_at(log_psi_at),
                     in_axes=(None, 0, None))
    atoms = jnp.asarray(system.positions)
    moved_atoms = atoms * 1.15  # Separation 2.3 bohr, the centre kept.

    @jax.jit
    def batch(x):
      e_moved, ess, left_out = differences.correlated_energy(log_psi_at, local, None, x,
                                                             atoms, moved_atoms)
      e_l = local(None, x, atoms)
      return e_moved - jnp.mean(e_l), ess, jnp.std(e_l), left_out

    x = sample_h2_plus(np.random.default_rng(7), 40_000)
    d, ess, spread, left_out = (np.asarray(v)
                                for v in zip(*[batch(b) for b in np.split(x, 40)]))
  exact = float(lcao_energy(2.3) - lcao_energy(2.0))
  error = d.std(ddof=1) / np.sqrt(len(d))
  assert abs(d.mean() - exact) < 4 * error, (d.mean(), exact, error)
  # The separate energies' difference would have sqrt(2) sigma(E_L) / sqrt(n).
  assert error < 0.3 * np.sqrt(2) * spread.mean() / np.sqrt(len(x))
  assert np.all((ess > 0.5) & (ess <= 1.0)) and np.all(left_out == 0)


def h2_scan(path, bonds, **overrides):
  """H2 over `bonds` (bohr, evenly spaced; a scan of the H0-H1 distance), KFAC."""
  return tiny_config('H', **{
      'system.atom': '', 'system.molecule': 'H 0 0 0; H 0 0 1.4', 'system.units': 'bohr',
      'system.scan.atoms': (0, 1), 'system.scan.start': bonds[0],
      'system.scan.stop': bonds[-1], 'system.scan.points': len(bonds),
      'optim.optimizer': 'kfac', 'pretrain.iterations': 0, 'log.save_path': str(path),
      **overrides})


@pytest.mark.slow
def test_same_geometry_twice_evaluates_to_a_zero_difference(tmp_path):
  """Through train() and evaluate(): a set with H2's geometry twice gives pes.json a
  difference of 0 (to float64 rounding) with weights all 1, next to an independent one
  that is only statistically 0."""
  run = tmp_path / 'run'
  train.train(tiny_config('H', **{
      'system.atom': '', 'system.units': 'bohr', 'precision': 'float64',
      'system.geometries': ('H 0 0 0; H 0 0 1.4', 'H 0 0 0; H 0 0 1.4'), 'batch_size': 16,
      'optim.iterations': 3, 'mcmc.burn_in': 2, 'mcmc.steps': 2,
      'network.ferminet.hidden_dims': ((8, 4),), 'network.determinants': 1,
      'log.save_path': str(run)}), quiet=True)
  evaluate.evaluate(str(run), steps=6, burn_in=1, quiet=True)
  (pair,) = json.loads((run / 'pes.json').read_text())['differences']
  assert (pair['from'], pair['to']) == (0, 1)
  assert abs(pair['correlated']) < 1e-10 and pair['correlated_error'] < 1e-10
  assert pair['effective_sample_fraction'] == pytest.approx(1.0, abs=1e-12)
  assert pair['independent'] != 0 and pair['independent_error'] > 0


@pytest.mark.slow
def test_correlated_differences_agree_with_independent_ones_and_are_more_precise(tmp_path):
  """300 KFAC steps over H2 at 1.3, 1.4 and 1.5 bohr, then 200 evaluation sweeps: for each
  adjacent pair the correlated difference lies within 3 combined standard errors of the
  difference of the separate energies, with a smaller error, and the weights keep most of
  the sample (effective fraction > 0.9 for 0.1 bohr)."""
  run = tmp_path / 'run'
  bonds = (1.3, 1.4, 1.5)
  train.train(h2_scan(run, bonds, **{'batch_size': 96, 'optim.iterations': 300,
                                     'mcmc.burn_in': 50, 'mcmc.steps': 10}), quiet=True)
  assert_correlated_differences_agree(run, 0.9)


def assert_correlated_differences_agree(run, fraction: float) -> None:
  """200 evaluation sweeps of the trained three-geometry run in `run`: for each adjacent
  pair the correlated difference lies within 3 combined standard errors of the difference
  of the separate energies, with a smaller error, and the weights keep more than
  `fraction` of the sample."""
  evaluate.evaluate(str(run), steps=200, burn_in=10, quiet=True)
  pairs = json.loads((run / 'pes.json').read_text())['differences']
  assert [(p['from'], p['to']) for p in pairs] == [(0, 1), (1, 2)]
  for p in pairs:
    combined = np.hypot(p['correlated_error'], p['independent_error'])
    assert abs(p['correlated'] - p['independent']) < 3 * combined, p
    assert 0 < p['correlated_error'] < p['independent_error'], p
    assert fraction < p['effective_sample_fraction'] <= 1.0, p


def gas_parts(scales):
  """The float64 Parts of a tiny FermiNet for the electron gas of two electrons over a scan
  of its cell at `scales` (r_s = 1 times each), and its parameters."""
  cfg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': (1, 1),
                           'network.envelope': 'planewave', 'pretrain.iterations': 0,
                           'precision': 'float64', 'system.scan.cell': True,
                           'system.scan.start': scales[0], 'system.scan.stop': scales[-1],
                           'system.scan.points': len(scales), 'batch_size': 16 * len(scales)})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system, jnp.float64)
  parts = plan.make_parts(cfg, system, network, laplacians.JACFWD, chunk_size=0)
  return system, parts, parts.network.init(jax.random.PRNGKey(0))


def test_a_cell_mapped_onto_itself_gives_the_plain_mean_with_weights_one():
  """The map between two scales of a cell, for the same scale twice, is the identity: every
  weight is 1 and the estimate is the plain mean of the local energies; for another scale
  the walkers are mapped by the ratio (each into the other cell) and the estimate is a
  weighted mean of that cell's local energies."""
  with jax.enable_x64(True):
    system, parts, params = gas_parts((1.0, 1.2))
    stack = jax.tree.map(jnp.asarray, system.geometries)
    first = jax.tree.map(lambda a: a[0], stack)
    second = jax.tree.map(lambda a: a[1], stack)
    x = system.boundary.wrap(jax.random.uniform(jax.random.PRNGKey(1), (16, 6),
                                                jnp.float64) * 4.0)
    e_same, ess, left_out = differences.scaled_correlated_energy(parts, params, x, first, first)
    e_l = parts.energy(params, x, first)[1].local_energy
    assert e_same == pytest.approx(float(jnp.mean(e_l)), rel=1e-12)
    assert ess == pytest.approx(1.0, abs=1e-12) and left_out == 0
    e_other, ess, left_out = differences.scaled_correlated_energy(parts, params, x, first,
                                                                  second)
    e_l = parts.energy(params, 1.2 * x, second)[1].local_energy
    assert float(jnp.min(e_l)) - 1e-9 <= e_other <= float(jnp.max(e_l)) + 1e-9
    assert 0 < ess <= 1 and e_other != pytest.approx(e_same)


@pytest.mark.slow
def test_correlated_differences_of_a_scanned_cell_agree_and_are_more_precise(tmp_path):
  """300 KFAC steps over the electron gas of two electrons at r_s = 1, 1.05 and 1.1 bohr,
  then 200 evaluation sweeps: for each adjacent pair the correlated difference lies within 3
  combined standard errors of the difference of the separate energies, with a smaller
  error, and the weights keep most of the sample."""
  run = tmp_path / 'run'
  train.train(tiny_config('', **{
      'system.rs': 1.0, 'system.electrons': (1, 1), 'network.envelope': 'planewave',
      'pretrain.iterations': 0, 'system.scan.cell': True, 'system.scan.start': 1.0,
      'system.scan.stop': 1.1, 'system.scan.points': 3, 'optim.optimizer': 'kfac',
      'batch_size': 96, 'optim.iterations': 300, 'mcmc.burn_in': 50, 'mcmc.steps': 10,
      'log.save_path': str(run)}), quiet=True)
  assert_correlated_differences_agree(run, 0.8)
