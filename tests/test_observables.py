"""Observables against exact answers: <S^2> of two-electron wavefunctions of known spin
(and of a product of two 1s orbitals, whose spin contamination is 1 - <a|b>^2), the
dipole of a displaced 1s electron, and the forces of the LCAO H2+ wavefunction against
the derivative of its closed-form energy, with exact (not Markov chain) samples of
|psi|^2; the force estimator's algebra against automatic differentiation; then
evaluation of a trained helium run reports them with error bars."""

import importlib.util
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_network
from ferminet_fast import InputError, evaluate, plot, train
from ferminet_fast.physics import coulomb, hamiltonian, laplacians, observables, systems

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
@pytest.mark.jax_range
def test_spin_eigenstates_give_s_s_plus_one_at_every_configuration(combine, s2):
  """Spatially symmetric: a singlet (0); antisymmetric: the M = 0 triplet (2). Exact at
  every configuration, not only on average."""
  f = jax.vmap(observables.spin_squared(orbital_pair(1.0, 2.0, combine), two_electron_system()),
               in_axes=(None, 0))
  x = np.random.default_rng(0).normal(size=(50, 6))
  np.testing.assert_allclose(f(None, x)[:, 0], s2, atol=1e-5)


@pytest.mark.jax_range
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


@pytest.mark.jax_range
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


@pytest.mark.jax_range
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


@pytest.mark.parametrize('network_type', ['ferminet', 'psiformer'])
def test_zero_variance_force_is_hellmann_feynman_plus_a_zero_mean_term(network_type):
  """At every configuration, the first term of 'forces' equals -dV/dR_I (Hellmann-Feynman)
  plus (H - E_L)(Q psi) / psi = -1/2 lap Q - grad Q . grad log|psi|, Q = -Z_I sum_i
  (r_i - R_I) / |r_i - R_I|, each by automatic differentiation (float64, LiH, random
  network); its second is d log|psi| / dR, whose sum over nuclei is -sum_i grad_i log|psi|
  because the network sees only electron-nucleus and electron-electron differences."""
  with jax.enable_x64(True):
    # Per-spin determinants (2 x 2, closed forms): no batched LAPACK calls run at once.
    system, network, params = tiny_network(
        'Li', jnp.float64, **{'system.atom': '', 'system.molecule': 'Li 0 0 0; H 0 0 3.015',
                              'network.network_type': network_type, 'network.full_det': False})
    atoms, charges = jnp.asarray(system.positions), jnp.asarray(system.charges)
    m = len(charges)
    ham = hamiltonian.of(system, laplacians.JACFWD)
    terms = jax.jit(observables.force_terms(network.log_psi, ham))
    x = jnp.asarray(np.random.default_rng(4).normal(size=(5, 12)) * 1.5 + [0, 0, 1.0] * 4)

    def potential(x, nuclei):
      return coulomb.potential_energy(x, nuclei, charges,
                                          coulomb.nuclear_repulsion(nuclei, charges))

    def q(x, i):  # (3,)
      u = x.reshape(-1, 3) - atoms[i]
      return -charges[i] * jnp.sum(u / jnp.linalg.norm(u, axis=-1, keepdims=True), axis=0)

    @jax.jit
    def independent(xi):
      """The same quantities by automatic differentiation, nothing shared with `terms`."""
      g = jax.grad(network.log_psi, argnums=1)(params, xi)
      expected = -jax.grad(potential, argnums=1)(xi, atoms)  # (M, 3)
      rows = []
      for i in range(m):
        hessians = jax.hessian(lambda y: q(y, i))(xi)  # (3, 3N, 3N)
        jac = jax.jacfwd(lambda y: q(y, i))(xi)  # (3, 3N)
        rows.append(expected[i] - 0.5 * jnp.trace(hessians, axis1=1, axis2=2) - jac @ g)
      d = jax.grad(network.log_psi, argnums=2)(params, xi, atoms)
      e_l = ham.local_energy(network.log_psi)(params, xi)
      return jnp.stack(rows), d, g, e_l

    for xi in x:
      t = np.asarray(terms(params, xi))
      f_zv, d_auto, g, e_l = independent(xi)
      np.testing.assert_allclose(t[:3 * m].reshape(m, 3), f_zv, rtol=1e-8, atol=1e-8)
      d = t[3 * m:6 * m].reshape(m, 3)
      np.testing.assert_allclose(d, d_auto, rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(d.sum(axis=0), -g.reshape(-1, 3).sum(axis=0), atol=1e-10)
      np.testing.assert_allclose(t[-1], e_l, rtol=1e-10)
      np.testing.assert_allclose(t[6 * m:9 * m], e_l * t[3 * m:6 * m], rtol=1e-10)


def h2_plus(c: float = 1.0):
  """H2+ at R = 2 bohr along z (one electron) and the log|psi| of its LCAO state 1s_A + c
  1s_B (unit exponent), whose orbitals move with the nuclei: the ground state's form for c =
  1; for c < 0 a nodal surface, off the midplane unless c = -1."""
  system = systems.System(symbols=('H', 'H'), positions=np.array([[0, 0, -1.0], [0, 0, 1.0]]),
                          charges=np.array([1.0, 1.0]), n_up=1, n_down=0, name='H2+')

  def log_psi_at(params, x, atoms):
    r = jnp.linalg.norm(x[None] - atoms, axis=-1)
    return jnp.log(jnp.abs(jnp.exp(-r[0]) + c * jnp.exp(-r[1])))

  return system, log_psi_at


def lcao_energy(r, c: float = 1.0):
  """Closed-form energy of the H2+ LCAO 1s_A + c 1s_B at separation r (bohr), Ha: (H_aa (1 +
  c^2) + 2 c H_ab) / (1 + c^2 + 2 c S), H_aa = -1/2 + 1/r - J, H_ab = (-1/2 + 1/r) S - K, J =
  1/r - (1 + 1/r) e^{-2r}, K = (1 + r) e^{-r}, S = (1 + r + r^2 / 3) e^{-r}."""
  s = (1 + r + r**2 / 3) * jnp.exp(-r)
  j = 1 / r - (1 + 1 / r) * jnp.exp(-2 * r)
  k = (1 + r) * jnp.exp(-r)
  h_aa, h_ab = -0.5 + 1 / r - j, (-0.5 + 1 / r) * s - k
  return (h_aa * (1 + c**2) + 2 * c * h_ab) / (1 + c**2 + 2 * c * s)


def sample_h2_plus(rng, n, c: float = 1.0):
  """n exact samples of (a + c b)^2, a, b the 1s orbitals at z = -1 and 1: drawn from the
  mixture (a^2 + c^2 b^2) / (1 + c^2) and accepted with probability (a + c b)^2 / (2 (a^2 +
  c^2 b^2)) <= 1."""
  out = []
  while sum(len(o) for o in out) < n:
    centres = np.where(rng.random(n)[:, None] < 1 / (1 + c**2), [0, 0, -1.0], [0, 0, 1.0])
    x = sample_1s(rng, 1.0, n) + centres
    a = np.exp(-np.linalg.norm(x - [0, 0, -1.0], axis=1))
    b = np.exp(-np.linalg.norm(x - [0, 0, 1.0], axis=1))
    out.append(x[rng.random(n) < (a + c * b) ** 2 / (2 * (a**2 + c**2 * b**2))])
  return np.concatenate(out)[:n]


@pytest.mark.parametrize('name', ['forces', 'forces_warp'])
@pytest.mark.jax_range
def test_forces_of_lcao_h2_plus_are_the_derivative_of_its_energy(name):
  """The LCAO wavefunction is not an eigenstate and moves with its nuclei, so the
  Hellmann-Feynman force alone is wrong; both estimators must give -dE/dR of the closed
  form on each nucleus (equal and opposite, along the bond), within 5 standard errors of
  40 batches of exact samples."""
  system, log_psi_at = h2_plus()
  make, reduce = ((observables.force_terms, observables.reduce_forces) if name == 'forces' else
                  (observables.warped_energy_terms, observables.reduce_warped_forces))
  with jax.enable_x64(True):
    f = jax.jit(jax.vmap(make(log_psi_at, hamiltonian.of(system, laplacians.JACFWD)),
                         in_axes=(None, 0)))
    x = sample_h2_plus(np.random.default_rng(5), 200_000)
    values = [np.asarray(f(None, b)) for b in np.split(x, 40)]
    batches = np.stack([np.asarray(reduce(jnp.asarray(v))) for v in values])
    exact = -float(jax.grad(lcao_energy)(2.0))  # Force on the nucleus at +z, along +z.
  mean, error = batches.mean(axis=0), batches.std(axis=0, ddof=1) / np.sqrt(len(batches))
  expected = np.array([0, 0, -exact, 0, 0, exact])
  assert np.all(np.abs(mean - expected) < 5 * error), (mean, error, expected)
  assert error[5] < 0.1 * abs(exact)  # Precise enough to tell the force from zero.
  if name == 'forces':  # Without the Pulay term (Hellmann-Feynman + zero variance) it fails.
    zero_variance = np.concatenate(values)[:, 5]
    assert abs(zero_variance.mean() - exact) > 5 * zero_variance.std() / np.sqrt(len(x))


def test_node_regularisation_biases_a_node_only_at_third_order():
  """Near a node (distance s, psi^2 ~ s^2) the Pulay product grows as a / s^2 + b / s + c;
  multiplied by the regularisation its integral across the node changes by O(eps^3): the a
  term cancels (f - 1 integrates to zero), the b term by parity. Checked by quadrature at two
  cutoffs (the change scales as eps^3), beside a factor without that cancellation."""
  s = np.linspace(-0.5, 0.5, 2_000_001)[1:-1]
  s, ds = s[s != 0], s[1] - s[0]
  changes = []
  for eps in (0.1, 0.05):
    f = np.asarray(jax.vmap(lambda si, eps=eps: observables.node_regularisation(
        jnp.array([1.0 / si, 0.0, 0.0]), eps))(jnp.asarray(s)))
    integrand = s**2 * (2.0 / s**2 + 1.5 / s + 1.0) * (f - 1.0)
    changes.append(np.sum(integrand) * ds)
  assert abs(changes[0]) < 1e-3 and abs(changes[0] / changes[1] - 8.0) < 0.5, changes
  cut = np.where(np.abs(s) < 0.1, 0.0, 1.0)  # Dropping the region instead: first order.
  assert abs(np.sum(s**2 * (2.0 / s**2) * (cut - 1.0)) * ds) > 100 * abs(changes[0])
  assert float(observables.node_regularisation(jnp.array([1e6, 0.0]), 0.0)) == 1.0


@pytest.mark.jax_range
def test_regularised_forces_of_an_lcao_with_a_node_are_its_energy_derivative():
  """H2+ as 1s_A - 1/2 1s_B: a nodal surface off the midplane, where E_L and d log|psi| /
  dR both diverge, so the Pulay term is heavy-tailed. Regularised at 0.3 bohr (a cutoff that
  a fair share of the samples fall within), the forces are -dE/dR of the closed form within 5
  standard errors of 40 batches of exact samples, with a smaller error than unregularised."""
  c = -0.5
  system, log_psi_at = h2_plus(c)
  ham = hamiltonian.of(system, laplacians.JACFWD)
  with jax.enable_x64(True):
    x = sample_h2_plus(np.random.default_rng(5), 200_000, c)
    exact = -float(jax.grad(lcao_energy)(2.0, c))  # Force on the nucleus at +z, along +z.
    batches = {}
    for eps in (0.0, 0.3):
      f = jax.jit(jax.vmap(observables.force_terms(log_psi_at, ham, eps), in_axes=(None, 0)))
      batches[eps] = np.stack([np.asarray(observables.reduce_forces(f(None, b)))
                               for b in np.split(x, 40)])
  mean = batches[0.3].mean(axis=0)
  error = {eps: b.std(axis=0, ddof=1) / np.sqrt(len(b)) for eps, b in batches.items()}
  expected = np.array([0, 0, -exact, 0, 0, exact])
  assert np.all(np.abs(mean - expected) < 5 * error[0.3]), (mean, error, expected)
  assert error[0.3][5] < error[0.0][5]


def test_density_grid_of_lcao_h2_plus(tmp_path):
  """Exact samples of the LCAO H2+ density on the molecule's grid (density.cube): the
  electron in the box (all but the tail beyond its 4 bohr margin), mirror-symmetric about the
  bond's midplane, and in the 8 voxels around the bond midpoint the exact density (a +
  b)^2 / (2 pi (1 + S)) at their centres, within 5 Poisson standard errors; the cube file
  holds the same numbers."""
  system, _ = h2_plus()
  # No network needed.
  est = observables.OBSERVABLES['density'].make(None, system, None, 0.0)
  assert est.accumulate
  n = 400_000
  x = sample_h2_plus(np.random.default_rng(6), n).astype(np.float32)
  rho = np.asarray(est.reduce(jax.vmap(est.per_config, in_axes=(None, 0))(None, x)))
  grid = observables.density_grid(system)
  h = grid.spacing
  # The box holds a sphere of 4 bohr about each nucleus; beyond one lies 41 e^-8 = 1.4% of a
  # 1s electron's density, so more than that is inside.
  assert 1 - 41 * np.exp(-8.0) < rho.sum() * h**3 <= 1.0
  cube = rho.reshape(grid.shape)
  mid = [int(round((0 - (o - 0.5 * h)) / h)) for o in grid.origin]  # Voxel index of 0.
  centres = np.asarray(grid.origin)[None] + h * np.array(
      [(i, j, k) for i in (mid[0] - 1, mid[0]) for j in (mid[1] - 1, mid[1])
       for k in (mid[2] - 1, mid[2])])
  a = np.exp(-np.linalg.norm(centres - [0, 0, -1.0], axis=1))
  b = np.exp(-np.linalg.norm(centres - [0, 0, 1.0], axis=1))
  overlap = (1 + 2 + 4 / 3) * np.exp(-2.0)  # (1 + R + R^2/3) e^-R at R = 2.
  expected = n * h**3 * np.sum((a + b) ** 2 / (2 * np.pi * (1 + overlap)))
  counted = n * h**3 * cube[mid[0] - 1:mid[0] + 1, mid[1] - 1:mid[1] + 1,
                            mid[2] - 1:mid[2] + 1].sum()
  assert abs(counted - expected) < 5 * np.sqrt(expected), (counted, expected)
  lower, upper = cube[:, :, :mid[2]].sum() * n * h**3, cube[:, :, mid[2]:].sum() * n * h**3
  assert abs(lower - upper) < 5 * np.sqrt(lower + upper)
  line = est.report(str(tmp_path), rho, None)
  assert 'density.cube' in line and line.startswith(f'{rho.astype(float).sum() * h**3:.4f} electrons')
  text = (tmp_path / 'density.cube').read_text().split('\n')
  assert int(text[2].split()[0]) == 2 and [int(t.split()[0]) for t in text[3:6]] == list(grid.shape)
  np.testing.assert_allclose(np.array(' '.join(text[8:]).split(), float), rho, rtol=1e-4,
                             atol=1e-9)


@pytest.mark.slow
def test_evaluation_reports_observables_of_a_trained_helium(tmp_path):
  """The trained He wavefunction is close to the singlet ground state, so its <S^2> is
  bounded by its energy: the only states with S^2 != 0 in its (1, 1) sector are triplets
  (S^2 = 2), each at least E(2 3S) - E0 = 0.7285 Ha above the ground state, so
  <S^2> <= 2 (E - E0) / 0.7285 (the variational principle)."""
  path = tmp_path / 'run'
  train.train(tiny_config('He', **{'optim.iterations': 150, 'batch_size': 128,
                                   'log.save_path': str(path)}), quiet=True)
  with pytest.raises(InputError, match="unknown observable 'polarisability'"):
    evaluate.evaluate(str(path), steps=4, burn_in=1, quiet=True, observables=['polarisability'])
  est = evaluate.evaluate(str(path), steps=100, burn_in=10, quiet=True,
                          observables=['s2', 'dipole', 'density', 'forces'])
  result = json.loads((path / 'eval.json').read_text())['observables']
  s2, s2_err = result['s2']['value'][0], result['s2']['error'][0]
  bound = 2 * (est.mean + 3 * est.error - (-2.903724)) / (-2.175229 + 2.903724)
  assert -5 * s2_err < s2 < bound + 5 * s2_err, (s2, s2_err, bound)
  assert result['dipole']['labels'] == ['x', 'y', 'z'] and result['dipole']['unit'] == 'e bohr'
  assert all(np.isfinite(result['dipole']['value'])) and all(e > 0 for e in result['dipole']['error'])
  # The energy of a lone atom does not depend on where its nucleus is: no force.
  forces = result['forces']
  assert forces['labels'] == ['He0 x', 'He0 y', 'He0 z'] and forces['unit'] == 'Ha/bohr'
  assert all(0 < e and abs(v) < 5 * e for v, e in zip(forces['value'], forces['error'])), forces
  volumes = 4 / 3 * np.pi * np.diff(observables.RADIAL_EDGES**3)
  profile = np.loadtxt(path / 'density.csv', delimiter=',', skiprows=1)
  np.testing.assert_allclose(profile[:, 2], result['density']['value'])
  assert abs(np.sum(profile[:, 2] * volumes) - 2.0) < 1e-3  # Both electrons, within 12 bohr.
  if importlib.util.find_spec('matplotlib'):
    assert str(path / 'plots' / 'density.png') in plot.plot_run(str(path))

  # From the command line an unknown name is one line and exit status 2 (the command's
  # estimates of each observable: tests/test_evaluate_cli.py).
  cli = [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={path}', '--steps=4',
         '--burn_in=1']
  bad = subprocess.run(cli + ['--observables=s2,spin'], capture_output=True, text=True)
  assert bad.returncode == 2 and "unknown observable 'spin'" in bad.stderr
  assert 'Traceback' not in bad.stderr


@pytest.mark.jax_range
def test_density_summary_of_a_hydrogenic_profile_has_kato_cusp_and_its_electrons(tmp_path):
  """scripts/observables.py reads density.csv: for the exact shell averages of a 1s
  density of charge Z (two electrons), the electrons inside the profile and the slope of
  ln rho at the nucleus, -2Z by Kato's cusp condition."""
  from scripts import observables as table
  z, edges = 3.0, observables.RADIAL_EDGES  # The grid of density.csv.
  lo, hi = edges[:-1], edges[1:]
  # 2 electrons in a 1s orbital: rho = 2 z^3 / pi exp(-2 z r); shell averages exactly, from
  # the electrons inside radius r, N(r) = 2 (1 - exp(-2zr) (1 + 2zr + 2 z^2 r^2)).
  inside = lambda r: 2.0 * (1.0 - np.exp(-2 * z * r) * (1 + 2 * z * r + 2 * (z * r) ** 2))
  rho = (inside(hi) - inside(lo)) / (4 * np.pi / 3 * (hi ** 3 - lo ** 3))
  np.savetxt(tmp_path / 'density.csv', np.stack([lo, hi, rho, 1e-3 * rho], axis=1),
             delimiter=',', header='r_lo_bohr,r_hi_bohr,rho_per_bohr3,error', comments='')
  summary = table.density_summary(str(tmp_path / 'density.csv'), charge=3)
  assert summary['electrons'] == pytest.approx(inside(edges[-1]), rel=1e-9)
  for cusp in summary['cusp']:
    assert cusp['expected'] == -6.0
    assert cusp['slope'] == pytest.approx(-6.0, abs=0.1)
