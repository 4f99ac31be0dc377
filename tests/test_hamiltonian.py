"""Local energy: exact hydrogen, Laplacian methods against each other and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import electron_gas_hartree_fock_terms, tiny_config, tiny_network
from ferminet_fast import config, plan
from ferminet_fast.physics import coulomb, hamiltonian, laplacians, systems

METHODS = sorted(laplacians.METHODS)  # folx comes with the test extra.
DENSE_METHODS = [m for m in METHODS if not laplacians.METHODS[m].sparse]


@pytest.mark.parametrize('method', METHODS)
@pytest.mark.jax_range
def test_hydrogen_1s_local_energy_is_exact(method):
  """psi = exp(-r) is the hydrogen ground state: the Hamiltonian's local energy is -0.5 Ha at
  every point, with each Laplacian operator."""
  cfg = config.default()
  cfg.system.atom = 'H'
  ham = hamiltonian.of(systems.make_system(cfg.system), laplacians.METHODS[method])
  assert ham.laplacian is laplacians.METHODS[method] and ham.ecp is None
  assert ham.coulomb is coulomb.molecular_coulomb
  np.testing.assert_array_equal(ham.charges, [1.0])
  log_psi = lambda params, x: -jnp.sum(jnp.linalg.norm(x.reshape(-1, 3), axis=-1))
  e_l = jax.jit(jax.vmap(ham.local_energy(log_psi), in_axes=(None, 0)))
  x = jax.random.normal(jax.random.PRNGKey(0), (200, 3)) * 2.0
  np.testing.assert_allclose(e_l(None, x), -0.5, atol=2e-5)


@pytest.mark.parametrize('method', METHODS)
@pytest.mark.jax_range
def test_helium_product_of_1s_orbitals(method):
  """psi = exp(-Z r1 - Z r2): E_L = -Z^2 + (Z - 2)(1/r1 + 1/r2) + 1/r12, analytically."""
  cfg = config.default()
  system = systems.make_system(cfg.system)  # He
  z = 1.6875
  log_psi = lambda params, x: -z * jnp.sum(jnp.linalg.norm(x.reshape(-1, 3), axis=-1))
  ham = hamiltonian.of(system, laplacians.METHODS[method])
  e_l = jax.jit(jax.vmap(ham.local_energy(log_psi), in_axes=(None, 0)))
  x = jax.random.normal(jax.random.PRNGKey(1), (100, 6))
  r1, r2 = np.linalg.norm(x[:, :3], axis=1), np.linalg.norm(x[:, 3:], axis=1)
  r12 = np.linalg.norm(x[:, :3] - x[:, 3:], axis=1)
  expected = -z**2 + (z - 2) * (1 / r1 + 1 / r2) + 1 / r12
  np.testing.assert_allclose(e_l(None, x), expected, rtol=1e-4, atol=1e-4)


def test_the_plans_hamiltonian_is_the_local_energy_the_step_takes():
  """The plan holds one Hamiltonian (the Laplacian it resolved, the system's nuclei and
  Coulomb energy), the step's parts take it, and its local energy of the network at a
  configuration is the one in the step's energy (float64: rounding apart)."""
  cfg = tiny_config('Li')
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    resolved = plan.Plan(cfg, system, network,
                         plan.pieces_of(cfg, system, network, laplacians.JACFWD, 0))
    ham = resolved.hamiltonian
    assert ham.laplacian is laplacians.JACFWD and ham.ecp is None
    assert ham.coulomb is coulomb.molecular_coulomb
    np.testing.assert_array_equal(ham.charges, system.charges)
    parts = resolved.parts()
    assert parts.hamiltonian is ham
    x = jax.random.normal(jax.random.PRNGKey(2), (4, network.n_coords), jnp.float64)
    local = jax.jit(ham.local_energy(network.log_psi, network.apply))
    _, aux = jax.jit(parts.energy)(params, x)
    np.testing.assert_allclose([local(params, xi) for xi in x], aux.local_energy, rtol=1e-10)


def _real_network(atom, **overrides):
  system, network, params = tiny_network(atom, jnp.float64, seed=3, **overrides)
  # Perturb the envelope and Jastrow away from their symmetric initial values.
  params = jax.tree.map(lambda p: p * (1 + 0.1 * jnp.sin(jnp.arange(p.size).reshape(p.shape))),
                        params)
  x = 0.8 * jax.random.normal(jax.random.PRNGKey(4), (3 * system.n_electrons,), jnp.float64)
  return network, params, x


# folx_sparse compiles for ~15 s per network here, so it is checked on FermiNet and on
# LapNet, whose attention is built for it (per-pair scores, a per-electron stream), only.
@pytest.mark.parametrize('atom,overrides,methods', [
    ('Li', {}, METHODS),
    ('Be', {'network.full_det': False, 'network.envelope': 'full'}, DENSE_METHODS),
    ('He', {'network.network_type': 'psiformer', 'network.psiformer.layers': 1,
            'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4}, DENSE_METHODS),
    ('Li', {'network.network_type': 'lapnet', 'network.lapnet.heads': 2,
            'network.lapnet.head_dim': 4, 'network.lapnet.sparse_layers': 1}, METHODS),
])
def test_laplacian_methods_agree_with_finite_differences(atom, overrides, methods):
  with jax.enable_x64(True):
    network, params, x = _real_network(atom, **overrides)
    f = lambda y: network.log_psi(params, y)
    results = {m: jax.jit(laplacians.METHODS[m](f))(x) for m in methods}
    h = 1e-4
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    batch = jax.jit(jax.vmap(f))  # One compiled program, not operation by operation.
    plus, minus, centre = batch(x + h * eye), batch(x - h * eye), batch(x + 0 * eye)[0]
    fd_lap = jnp.sum(plus - 2 * centre + minus) / h**2
    fd_grad = (plus - minus) / (2 * h)
    for m, (lap, grad) in results.items():
      np.testing.assert_allclose(lap, fd_lap, rtol=1e-5, err_msg=m)
      np.testing.assert_allclose(grad, fd_grad, rtol=1e-6, atol=1e-8, err_msg=m)
    laps = [float(r[0]) for r in results.values()]
    np.testing.assert_allclose(laps, laps[0], rtol=1e-10)


def _electron_gas_network(electrons: tuple, twist: tuple) -> tuple:
  """A small FermiNet of the electron gas at r_s = 1 and `twist`, in float64 (call under
  jax.enable_x64), its parameters and one configuration in the cell."""
  from ferminet_fast import plan
  cfg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': electrons,
                           'system.twist': twist, 'network.envelope': 'auto',
                           'network.ferminet.hidden_dims': ((8, 4), (8, 4))})
  config.validate(cfg)
  network = plan.network_of(cfg.network, systems.make_system(cfg.system), jnp.float64)
  x = jax.random.uniform(jax.random.PRNGKey(1), (3 * sum(electrons),), jnp.float64, 0, 2)
  return network, network.init(jax.random.PRNGKey(0)), x


@pytest.mark.parametrize('electrons', [(2, 1), (4, 3)])  # Closed-form and LU determinants.
def test_complex_local_kinetic_energy_is_that_of_psi_by_finite_differences(electrons):
  """A complex wavefunction (the electron gas at a twist): the kinetic local energy that
  each Laplacian method gives from log|psi| and the phase, -1/2 (lap log psi + (grad log
  psi)^2), equals -1/2 (lap psi) / psi of psi = exp(log|psi| + i theta) itself by central
  finite differences, real and imaginary parts."""
  with jax.enable_x64(True):
    network, params, x = _electron_gas_network(electrons, (0.1, 0.2, 0.3))
    f = lambda y: network.log_psi_phase(params, y)
    kinetic = {m: complex(hamiltonian.complex_kinetic(*jax.jit(laplacians.METHODS[m](f))(x)))
               for m in DENSE_METHODS}

    centre = float(jax.jit(f)(x)[0])

    def psi(y):
      log_abs, theta = network.log_psi_phase(params, y)
      return jnp.exp(log_abs - centre + 1j * theta)

    h = 1e-4
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    batch = jax.jit(jax.vmap(psi))  # One compiled program for every shift.
    at = batch(x + 0 * eye)[0]
    lap = jnp.sum(batch(x + h * eye) - 2 * at + batch(x - h * eye)) / h**2
    expected = complex(-0.5 * lap / at)
    for m, value in kinetic.items():
      assert value == pytest.approx(expected, rel=1e-5), m
    assert abs(expected.imag) > 1e-3  # The imaginary part is tested, not zero.


@pytest.mark.skipif('folx' not in METHODS, reason='needs folx')
@pytest.mark.jax_range
def test_folx_carries_the_periodic_features_through_their_barrier_as_the_identity(capfd):
  """The periodic features keep each particle's sines and cosines behind an optimization
  barrier; folx carries them through it by a rule of ours (no warning that the operation is
  not in its registry), and its Laplacian and gradient of the gas's network equal
  jacfwd's."""
  with jax.enable_x64(True):
    network, params, x = _electron_gas_network((4, 3), (0.0, 0.0, 0.0))
    f = lambda y: network.log_psi(params, y)
    lap, grad = jax.jit(laplacians.METHODS['folx'](f))(x)
    reference_lap, reference_grad = jax.jit(laplacians.METHODS['jacfwd'](f))(x)
  # folx logs through a handler of its own on standard error, not through pytest's.
  assert 'not in registry' not in capfd.readouterr().err
  np.testing.assert_allclose(lap, reference_lap, rtol=1e-9)
  np.testing.assert_allclose(grad, reference_grad, rtol=1e-9, atol=1e-12)


@pytest.mark.jax_range
def test_potential_energy_of_a_known_configuration():
  system = systems.make_system(tiny_config('Li').system)
  x = jnp.array([1.0, 0, 0, 0, 2.0, 0, 0, 0, -4.0])
  # V_en = -3 (1 + 1/2 + 1/4); V_ee = 1/sqrt(5) + 1/sqrt(17) + 1/sqrt(20).
  expected = -3 * 1.75 + 1 / np.sqrt(5) + 1 / np.sqrt(17) + 1 / np.sqrt(20)
  v = coulomb.potential_energy(x, jnp.asarray(system.positions), jnp.asarray(system.charges),
                                   system.nuclear_repulsion)
  np.testing.assert_allclose(v, expected, rtol=1e-6)


@pytest.mark.jax_range
def test_nuclear_repulsion_of_lih():
  cfg = tiny_config()
  cfg.system.atom = ''
  cfg.system.molecule = 'Li 0 0 0; H 0 0 3.015'
  np.testing.assert_allclose(systems.make_system(cfg.system).nuclear_repulsion, 3 / 3.015)


def test_electron_gas_plane_wave_determinant_gives_the_hartree_fock_energy():
  """The determinant of the 7 real plane waves of the filled shells (1, cos and sin of
  k = 2 pi / L along each axis) per spin, for 7 + 7 electrons at r_s = 1, sampled by our
  MCMC (wrapped into the cell) with our Ewald local energy: its kinetic local energy is
  the constant sum of k^2 / 2, and its mean energy the Hartree-Fock energy of a short
  independent sum, within 3 reblocked error bars. In float64, where the kinetic energy's
  constancy is checked to rounding."""
  with jax.enable_x64(True):
    _sample_the_electron_gas_hartree_fock_determinant()


@pytest.mark.jax_range
def test_electron_gas_at_a_twist_gives_the_hartree_fock_energy():
  """The same at a general twist, where the determinant is of complex plane waves exp(i k .
  r), k = (2 pi / L)(n + t), the 5 lowest per spin (5 + 5 electrons): its complex local
  energy's kinetic part is the constant sum of k^2 / 2 with no imaginary part, and the mean
  energy the Hartree-Fock energy of the independent sum."""
  with jax.enable_x64(True):
    _sample_the_twisted_electron_gas_hartree_fock_determinant((0.1, 0.27, -0.31), 5)


def _sample_the_twisted_electron_gas_hartree_fock_determinant(twist, n_up):
  cfg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': (n_up, n_up),
                           'system.twist': twist, 'network.envelope': 'planewave'})
  system = systems.make_system(cfg.system)
  kinetic, exchange, madelung, k = electron_gas_hartree_fock_terms(system.lattice.vectors[0, 0],
                                                            n_up, twist)

  def log_psi_phase(params, x):
    r = x.reshape(2 * n_up, 3)
    signs, logs = zip(*[jnp.linalg.slogdet(jnp.exp(1j * r[s] @ k.T))
                        for s in (slice(0, n_up), slice(n_up, 2 * n_up))])
    return jnp.stack([sum(logs), jnp.angle(signs[0] * signs[1])])

  _sample_hartree_fock(system, lambda params, x: log_psi_phase(params, x)[0], kinetic,
                       kinetic + exchange + madelung, log_psi_phase)


def _sample_the_electron_gas_hartree_fock_determinant():
  cfg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': (7, 7),
                           'network.envelope': 'planewave'})
  system = systems.make_system(cfg.system)
  length = system.lattice.vectors[0, 0]
  g = 2 * np.pi / length

  def orbitals(r):  # (7, 3) -> (7, 7): 1, cos(g x), sin(g x), cos(g y), ...
    return jnp.concatenate([jnp.ones((r.shape[0], 1)), jnp.cos(g * r), jnp.sin(g * r)], -1)

  def log_psi(params, x):
    r = x.reshape(14, 3)
    return sum(jnp.linalg.slogdet(orbitals(r[s]))[1] for s in (slice(0, 7), slice(7, 14)))

  kinetic, exchange, madelung, _ = electron_gas_hartree_fock_terms(length, 7)
  _sample_hartree_fock(system, log_psi, kinetic, kinetic + exchange + madelung)


def _sample_hartree_fock(system, log_psi, kinetic, expected, log_psi_phase=None):
  """Samples |psi|^2 of the determinant log_psi (params unused) with our MCMC; asserts the
  kinetic local energy is `kinetic` (Ha) at every walker (its imaginary part zero for a
  complex psi given by log_psi_phase) and the mean energy `expected` within 3 reblocked
  error bars."""
  from ferminet_fast.vmc import mcmc, stats
  batch_log_psi = jax.vmap(log_psi, in_axes=(None, 0))
  sweep = jax.jit(mcmc.make_sweep(batch_log_psi, 20, system.boundary.wrap))
  laplacian = plan.best_laplacian(system)
  ham = hamiltonian.of(system, laplacian, jnp.float64)
  e_l = ham.local_energy(log_psi, log_psi_phase=log_psi_phase)
  potential = ham.coulomb
  energies = jax.jit(jax.vmap(lambda x: (e_l(None, x), potential(x, jnp.zeros((0, 3)),
                                                                 jnp.zeros((0,))))))
  x = mcmc.init_positions(jax.random.PRNGKey(0), system, 256, 1.0, jnp.float64)
  walkers = mcmc.Walkers(x, batch_log_psi(None, x), jnp.asarray(0.5))
  key = jax.random.PRNGKey(1)
  series = []
  for i in range(60):
    walkers, _ = sweep(None, walkers, jax.random.fold_in(key, i))
    if i >= 10:
      total, v = energies(walkers.x)
      np.testing.assert_allclose(np.asarray(jnp.real(total) - v), kinetic, rtol=1e-9)
      np.testing.assert_allclose(np.asarray(jnp.imag(total)), 0.0, atol=1e-9 * kinetic)
      series.append(float(jnp.mean(jnp.real(total))))
  estimate = stats.reblock(np.array(series))
  assert abs(estimate.mean - expected) < 3 * estimate.error, (estimate, expected)
  assert estimate.error < 0.02 * abs(expected)


@pytest.mark.jax_range
def test_local_energy_over_a_batch_of_geometries_is_that_of_each_system():
  """One network's local energy vmapped over LiH geometries (three bond lengths) equals the
  local energy of the network built for each (the same parameters), and is unchanged when
  the nuclei and electrons are translated together."""
  def built(bond):
    cfg = tiny_config('Li', **{'system.atom': '', 'system.units': 'bohr',
                               'system.molecule': f'Li 0 0 0; H 0 0 {bond}',
                               'network.ferminet.hidden_dims': ((8, 4),)})
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system, jnp.float64)
    ham = hamiltonian.of(system, laplacians.JACFWD, jnp.float64)
    return system, network, ham.local_energy(network.log_psi)

  with jax.enable_x64(True):
    bonds = (2.5, 3.015, 4.0)
    systems_ = [built(b) for b in bonds]
    _, network, local = systems_[1]
    params = network.init(jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 12), jnp.float64) + jnp.asarray(
        [0, 0, 0.0] * 3 + [0, 0, 3.0])
    stack = systems.Geometry(jnp.stack([jnp.asarray(s.positions) for s, _, _ in systems_]))
    per_geometry = jax.jit(jax.vmap(jax.vmap(local, in_axes=(None, 0, None)),
                                    in_axes=(None, None, 0)))(params, x, stack)
    for i, (_, _, local_i) in enumerate(systems_):
      expected = jax.jit(jax.vmap(local_i, in_axes=(None, 0)))(params, x)
      np.testing.assert_allclose(per_geometry[i], expected, rtol=1e-10)
    shift = jnp.asarray([0.3, -0.8, 1.1])
    moved = jax.jit(jax.vmap(local, in_axes=(None, 0, None)))(
        params, x + jnp.tile(shift, 4), systems.Geometry(stack.positions[1] + shift))
    np.testing.assert_allclose(moved, per_geometry[1], rtol=1e-9)


def test_periodic_local_energy_moves_with_its_nuclei():
  """H2 in a cubic cell at a twist (a complex wavefunction, the Ewald sum): the local energy
  given the system's own geometry equals the one with constant positions, and translating
  the nuclei and electrons together leaves it unchanged (both the periodic features and the
  Ewald sum see only differences)."""
  cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                            'system.molecule': 'H 0 0 0; H 1.4 0 0',
                            'system.lattice': ((6.0, 0, 0), (0, 6.0, 0), (0, 0, 6.0)),
                            'system.twist': (0.25, 0.0, 0.0), 'network.envelope': 'isotropic',
                            'network.ferminet.hidden_dims': ((8, 4),)})
  with jax.enable_x64(True):
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system, jnp.float64)
    assert network.complex
    params = network.init(jax.random.PRNGKey(0))
    ham = hamiltonian.of(system, laplacians.JACFWD, jnp.float64)
    local = jax.jit(jax.vmap(ham.local_energy(network.log_psi, log_psi_phase=network.log_psi_phase),
                             in_axes=(None, 0, None)))
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 6), jnp.float64) + jnp.asarray(
        [0, 0, 0, 1.4, 0, 0.0])
    fixed = local(params, x, None)
    np.testing.assert_allclose(local(params, x, system.geometry), fixed, rtol=1e-10)
    shift = jnp.asarray([0.4, -0.9, 1.3])
    moved = local(params, x + jnp.tile(shift, 2),
                  systems.Geometry(jnp.asarray(system.positions) + shift))
    np.testing.assert_allclose(moved, fixed, rtol=1e-8)


@pytest.mark.parametrize('settings', [
    {'system.molecule': 'H 0 0 0; H 1.4 0.3 0', 'system.units': 'bohr',
     'system.lattice': ((6.0, 0, 0), (0, 6.0, 0), (0, 0, 6.0)), 'system.twist': (0.25, 0, 0),
     'network.envelope': 'isotropic'},
    {'system.rs': 1.0, 'system.electrons': (7, 7), 'network.envelope': 'planewave'},
], ids=['crystal_at_a_twist', 'electron_gas'])
def test_the_local_energy_in_a_scaled_cell_is_that_of_the_cell_built_at_its_size(settings):
  """One network's local energy in its cell scaled by s (a scan of the cell: the network
  given the scaled nuclei and s) equals the local energy of the same parameters in a
  network built for the system whose cell (and nuclei, or r_s) is s times as large: the
  periodic features, plane-wave envelopes, Bloch factors, wrapping and Ewald sum of the
  scaled cell, against those made from its own lattice."""
  s = 1.3

  def built(factor):
    cfg = tiny_config('', **settings, **{'network.ferminet.hidden_dims': ((8, 4),)})
    if 'system.rs' in settings:
      cfg.system.rs = settings['system.rs'] * factor
    else:
      cfg.system.lattice = tuple(tuple(factor * c for c in row) for row in settings[
          'system.lattice'])
      cfg.system.molecule = '; '.join(
          f'H {" ".join(str(factor * float(c)) for c in atom.split()[1:])}'
          for atom in settings['system.molecule'].split(';'))
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system, jnp.float64)
    ham = hamiltonian.of(system, laplacians.JACFWD, jnp.float64)
    return system, network, jax.jit(jax.vmap(ham.local_energy(
        network.log_psi, log_psi_phase=network.log_psi_phase), in_axes=(None, 0, None)))

  with jax.enable_x64(True):
    system, network, local = built(1.0)
    big, _, local_big = built(s)
    params = network.init(jax.random.PRNGKey(0))
    n = 3 * system.n_electrons
    x = s * system.boundary.wrap(jax.random.uniform(jax.random.PRNGKey(1), (4, n),
                                                    jnp.float64) * 4.0)
    scaled = local(params, x, systems.Geometry(jnp.asarray(big.positions), jnp.asarray(s)))
    np.testing.assert_allclose(scaled, local_big(params, x, None), rtol=1e-9)
    # The scaled cell's wrapping is the big cell's.
    far = x + 2.7 * jnp.tile(jnp.asarray(big.lattice.vectors[1]), system.n_electrons)
    np.testing.assert_allclose(system.boundary.wrap(far, s), big.boundary.wrap(far), atol=1e-9)
