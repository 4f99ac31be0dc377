"""Observables against exact answers: <S^2> of two-electron wavefunctions of known spin
(and of a product of two 1s orbitals, whose spin contamination is 1 - <a|b>^2), and the
dipole of a displaced 1s electron, with exact (not Markov chain) samples of |psi|^2; then
evaluation of a trained helium run reports them with error bars."""

import importlib.util
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, evaluate, plot, train
from ferminet_fast.physics import observables, systems


def two_electron_system():
  return systems.make_system(tiny_config('He').system)  # (1, 1) electrons at the origin.


def sample_1s(rng, zeta, n, centre=(0.0, 0.0, 0.0)):
  """n exact samples of |exp(-zeta |r - centre|)|^2: radius ~ Gamma(3, 1 / (2 zeta))."""
  r = rng.gamma(3.0, 1.0 / (2.0 * zeta), n)
  u = rng.standard_normal((n, 3))
  return r[:, None] * u / np.linalg.norm(u, axis=1, keepdims=True) + np.asarray(centre)


def orbital_pair(za, zb, combine):
  """(sign, log|psi|) of phi_a(r1) phi_b(r2) `combine` phi_b(r1) phi_a(r2), 1s orbitals."""
  def apply(params, x):
    r1, r2 = jnp.linalg.norm(x[:3]), jnp.linalg.norm(x[3:])
    direct = jnp.exp(-za * r1 - zb * r2)
    psi = direct if combine is None else direct + combine * jnp.exp(-zb * r1 - za * r2)
    return jnp.sign(psi), jnp.log(jnp.abs(psi))
  return apply


@pytest.mark.parametrize('combine,s2', [(1.0, 0.0), (-1.0, 2.0)])
def test_spin_eigenstates_give_s_s_plus_one_at_every_configuration(combine, s2):
  """Spatially symmetric: a singlet (0); antisymmetric: the M = 0 triplet (2). Exact at
  every configuration, not only on average."""
  f = jax.vmap(observables.spin_squared(orbital_pair(1.0, 2.0, combine), two_electron_system()),
               in_axes=(None, 0))
  x = np.random.default_rng(0).normal(size=(50, 6))
  np.testing.assert_allclose(f(None, x)[:, 0], s2, atol=1e-5)


def test_product_state_has_the_known_spin_contamination():
  """phi_a(r1) phi_b(r2) (one up, one down) is not a spin eigenstate: <S^2> = 1 - <a|b>^2,
  and for 1s orbitals <a|b> = (2 sqrt(za zb) / (za + zb))^3."""
  za, zb, n = 1.0, 2.0, 200_000
  rng = np.random.default_rng(1)
  x = np.concatenate([sample_1s(rng, za, n), sample_1s(rng, zb, n)], axis=1)
  f = jax.jit(jax.vmap(observables.spin_squared(orbital_pair(za, zb, None),
                                                two_electron_system()), in_axes=(None, 0)))
  with jax.enable_x64(True):
    values = np.asarray(f(None, x.astype(np.float64)))[:, 0]
  exact = 1.0 - (2.0 * np.sqrt(za * zb) / (za + zb)) ** 6
  error = values.std() / np.sqrt(n)
  assert abs(values.mean() - exact) < 5 * error, (values.mean(), exact, error)


def test_dipole_of_a_displaced_electron():
  """A hydrogen nucleus at the origin and its electron in a 1s orbital centred at c: the
  dipole is -c (e bohr); the estimator needs no wavefunction values."""
  system = systems.make_system(tiny_config('H').system)
  centre = np.array([0.3, -0.2, 0.5])
  n = 100_000
  x = sample_1s(np.random.default_rng(2), 1.0, n, centre)
  d = np.asarray(jax.vmap(observables.dipole(None, system), in_axes=(None, 0))(None, x))
  error = d.std(axis=0) / np.sqrt(n)
  assert np.all(np.abs(d.mean(axis=0) + centre) < 5 * error), (d.mean(axis=0), error)


def test_radial_density_of_a_hydrogenic_1s_electron():
  """Exact samples of a 1s electron of a Z = 2 ion: the shell-averaged density equals the
  exact one, rho(r) = Z^3 / pi exp(-2 Z r) integrated over each shell (the electrons in a
  shell follow the Gamma(3, 1 / (2Z)) law of the radius), shell by shell within 5 standard
  errors; and a molecule has no radial profile."""
  import scipy.stats
  z, n = 2.0, 400_000
  system = systems.make_system(tiny_config('He').system)
  x = np.concatenate([sample_1s(np.random.default_rng(3), z, n),
                      np.full((n, 3), 50.0)], axis=1)  # The second electron far outside.
  f = jax.jit(jax.vmap(observables.radial_density(None, system), in_axes=(None, 0)))
  rho = np.concatenate([np.asarray(f(None, c)) for c in np.split(x, 8)])
  edges = observables.RADIAL_EDGES
  volumes = 4 / 3 * np.pi * np.diff(edges**3)
  exact = np.diff(scipy.stats.gamma.cdf(edges, 3, scale=1 / (2 * z))) / volumes
  mean, error = rho.mean(axis=0), rho.std(axis=0) / np.sqrt(n)
  populated = exact * volumes * n > 100  # Shells with enough samples for a normal error.
  assert populated.sum() > 40  # The test covers most of the profile, not a few shells.
  assert np.all(np.abs(mean - exact)[populated] < 5 * error[populated] + 1e-12)
  assert abs(np.sum(mean * volumes) - 1.0) < 1e-5  # One electron inside (float32 rounding).
  molecule = tiny_config('He').system
  molecule.atom, molecule.molecule = '', 'H 0 0 0; H 0 0 1.4'
  with pytest.raises(InputError, match='radial profiles are for atoms'):
    observables.radial_density(None, systems.make_system(molecule))


def test_evaluation_reports_observables_of_a_trained_helium(tmp_path):
  """The trained He wavefunction is close to the singlet ground state, so its <S^2> is
  bounded by its energy: the only states with S^2 != 0 in its (1, 1) sector are triplets
  (S^2 = 2), each at least E(2 3S) - E0 = 0.7285 Ha above the ground state, so
  <S^2> <= 2 (E - E0) / 0.7285 (the variational principle)."""
  path = tmp_path / 'run'
  train.train(tiny_config('He', **{'optim.iterations': 150, 'batch_size': 128,
                                   'log.save_path': str(path)}), quiet=True)
  with pytest.raises(InputError, match="unknown observable 'forces'"):
    evaluate.evaluate(str(path), steps=4, burn_in=1, quiet=True, observables=['forces'])
  est = evaluate.evaluate(str(path), steps=100, burn_in=10, quiet=True,
                          observables=['s2', 'dipole', 'density'])
  result = json.loads((path / 'eval.json').read_text())['observables']
  s2, s2_err = result['s2']['value'][0], result['s2']['error'][0]
  bound = 2 * (est.mean + 3 * est.error - (-2.903724)) / (-2.175229 + 2.903724)
  assert -5 * s2_err < s2 < bound + 5 * s2_err, (s2, s2_err, bound)
  assert result['dipole']['labels'] == ['x', 'y', 'z'] and result['dipole']['unit'] == 'e bohr'
  assert all(np.isfinite(result['dipole']['value'])) and all(e > 0 for e in result['dipole']['error'])
  volumes = 4 / 3 * np.pi * np.diff(observables.RADIAL_EDGES**3)
  profile = np.loadtxt(path / 'density.csv', delimiter=',', skiprows=1)
  np.testing.assert_allclose(profile[:, 2], result['density']['value'])
  assert abs(np.sum(profile[:, 2] * volumes) - 2.0) < 1e-3  # Both electrons, within 12 bohr.
  if importlib.util.find_spec('matplotlib'):
    assert str(path / 'plots' / 'density.png') in plot.plot_run(str(path))

  # The same from the command line; an unknown name is one line and exit status 2.
  cli = [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={path}', '--steps=4',
         '--burn_in=1']
  ok = subprocess.run(cli + ['--observables=s2,dipole'], capture_output=True, text=True)
  assert ok.returncode == 0, ok.stderr
  assert '  s2: S^2 ' in ok.stdout and '  dipole: x ' in ok.stdout
  bad = subprocess.run(cli + ['--observables=s2,forces'], capture_output=True, text=True)
  assert bad.returncode == 2 and "unknown observable 'forces'" in bad.stderr
  assert 'Traceback' not in bad.stderr
