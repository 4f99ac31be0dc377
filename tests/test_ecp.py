"""Effective core potentials: the angular quadrature against the addition theorem, the
ECP energy of a Hartree-Fock determinant against pyscf's HF energy with the same ECP and
basis, the system's valence electrons and charges, bad settings, and training through
the entry point."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config, plan, train
from ferminet_fast.physics import ecp, hamiltonian, hartree_fock, laplacians, observables, systems
from ferminet_fast.vmc import mcmc, stats
from ferminet_fast.wavefunction import networks

pytest.importorskip('pyscf')


def ecp_system(atom, setting='ccecp', **overrides):
  cfg = tiny_config(atom, **{'system.ecp': setting, **overrides})
  return systems.make_system(cfg.system)


@pytest.mark.parametrize('l,l2', [(l, l2) for l in range(4) for l2 in range(4)])
@pytest.mark.jax_range
def test_quadrature_projects_onto_each_angular_momentum(l, l2):
  """(2l + 1) <P_l(u . q) f(q)> over the rotated icosahedron is the projection of f onto
  degree l at u. For f = P_l2(a . q), a harmonic of degree l2, the addition theorem gives
  delta_{l l2} P_l(u . a): exactly so when l + l2 <= 5 (the rule's degree), for any
  rotation; not beyond (l = l2 = 3, degree 6)."""
  rng = np.random.default_rng(l * 4 + l2)
  u, a = (v / np.linalg.norm(v) for v in rng.normal(size=(2, 3)))
  errors = []
  with jax.enable_x64(True):
    for seed in range(5):
      rotation = ecp.rotations(jax.random.PRNGKey(seed), 1, jnp.float64)[0]
      q = np.asarray(ecp.ICOSAHEDRON @ np.asarray(rotation).T)  # (12, 3)
      p = np.asarray(ecp.legendre(max(l, l2), jnp.asarray(np.concatenate([q @ u, q @ a]))))
      projection = (2 * l + 1) * np.mean(p[l, :12] * p[l2, 12:])
      exact = float(l == l2) * np.asarray(ecp.legendre(l, jnp.asarray(u @ a)))[l]
      errors.append(abs(projection - exact))
  if l + l2 <= ecp.EXACT_DEGREE:
    assert max(errors) < 1e-12, errors
  else:
    assert max(errors) > 1e-6, errors


@pytest.mark.jax_range
def test_rotations_are_rotations():
  with jax.enable_x64(True):
    r = np.asarray(ecp.rotations(jax.random.PRNGKey(0), 10, jnp.float64))
  np.testing.assert_allclose(r @ np.swapaxes(r, 1, 2), np.broadcast_to(np.eye(3), r.shape),
                             atol=1e-12)
  np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-12)


@pytest.mark.jax_range
def test_valence_electrons_and_effective_charges():
  """S with ccECP keeps 6 of its 16 electrons (a triplet, as the atom), charge 6; the same
  from a {symbol: name} mapping and its command-line form; H is left all-electron by one
  name for all heavy atoms."""
  s = ecp_system('S')
  assert s.electrons == (4, 2) and list(s.charges) == [6.0] and s.exact_energy is None
  assert 'ECP S ccecp (10 core electrons)' in systems.describe(s)
  for setting in ({'S': 'ccecp'}, 'S:ccecp'):
    assert ecp_system('S', setting).electrons == (4, 2)
  h2s = ecp_system('', **{'system.molecule': 'S 0 0 0; H 0 0 2.5; H 2.5 0 0'})
  assert list(h2s.charges) == [6.0, 1.0, 1.0] and h2s.n_electrons == 8
  assert h2s.ecp[1] is None and h2s.ecp[0].n_core == 10
  assert not ecp_system('S', '').has_ecp and ecp_system('S', '').n_electrons == 16
  saved = tiny_config('S', **{'system.ecp': {'S': 'ccecp'}}).to_dict()  # As in config.json.
  assert systems.make_system(config.from_json(saved).system).electrons == (4, 2)


@pytest.mark.parametrize('setting,message', [
    ('no_such_ecp', "pyscf knows no ECP named 'no_such_ecp'"),
    ('Xx:ccecp', "unknown element symbol 'Xx'"),
    ({'O': 'ccecp'}, 'names O, which is not in the system'),
    ('S:ccecp:x', "'SYMBOL:NAME,SYMBOL:NAME'"),
    ('S:', "'SYMBOL:NAME,SYMBOL:NAME'"),
    ('S:ccecp,S:crenbl', 'names S more than once'),
])
@pytest.mark.jax_range
def test_bad_ecp_settings_are_one_clear_error(setting, message):
  with pytest.raises(InputError, match=message):
    ecp_system('S', setting)


def hf_wavefunction(system, basis='ccecp-cc-pvdz'):
  """(HF energy, apply, log_psi) of the UHF determinant of `system` with its ECP (at most
  3 electrons per spin, whose determinants have closed forms: no LAPACK call, which on
  jaxlib 0.10 deadlocked here when two batched ones ran at once)."""
  hf = hartree_fock.hartree_fock(system, basis, False, basis)
  orbitals = hartree_fock.make_orbitals(hf, system)
  assert max(system.electrons) <= 3

  def apply(params, x):
    signs, logs = zip(*[networks.slogdet(o) for o in orbitals(x)])
    return jnp.prod(jnp.stack(signs)), jnp.sum(jnp.stack(logs))

  return hf.energy, apply, lambda params, x: apply(params, x)[1]


@pytest.mark.parametrize('atom', ['Be', 'Si'])
def test_energy_of_the_hf_determinant_is_pyscfs_hf_energy(atom):
  """A UHF determinant from pyscf with the ccECP and its basis, sampled by our MCMC: the
  mean of our local energy (kinetic, Coulomb with Z_eff, the ECP's local and non-local
  terms) equals pyscf's HF energy within 5 standard errors. Be has one non-local channel
  (s), Si two (s, p)."""
  with jax.enable_x64(True):
    system = ecp_system(atom)
    e_hf, apply, log_psi = hf_wavefunction(system)
    batch_log_psi = jax.vmap(log_psi, in_axes=(None, 0))
    sweep = jax.jit(mcmc.make_sweep(batch_log_psi, 10))
    local_energy = jax.jit(jax.vmap(
        hamiltonian.of(system, laplacians.JACFWD).local_energy(log_psi, apply),
        in_axes=(None, 0)))
    key = jax.random.PRNGKey(0)
    x = mcmc.init_positions(key, system, 512, 1.0, jnp.float64)
    walkers = mcmc.Walkers(x, batch_log_psi(None, x), jnp.asarray(0.3))
    means = []
    for i in range(260):
      walkers, _ = sweep(None, walkers, jax.random.fold_in(key, i))
      if i >= 60:
        means.append(float(jnp.mean(local_energy(None, walkers.x))))
  est = stats.reblock(np.asarray(means))
  assert abs(est.mean - e_hf) < 5 * est.error, (est.mean, est.error, e_hf)
  # Precise enough to see any term missing: the smallest, Be's local part, is -20 mHa here
  # (its non-local part +260 mHa).
  assert est.error < 4e-3


def test_ecp_needs_the_signed_wavefunction_and_has_no_forces():
  ham = hamiltonian.of(ecp_system('Be'), laplacians.JACFWD)
  with pytest.raises(ValueError, match='needs `apply`'):
    ham.local_energy(lambda p, x: 0.0)
  with pytest.raises(InputError, match='not available with effective core potentials'):
    observables.force_terms(None, ham)


@pytest.mark.parametrize('optimizer', ['adam', 'kfac'])
def test_training_with_an_ecp(optimizer, tmp_path):
  """A few steps of Be with ccECP through train(), with HF pretraining in the ECP's basis:
  two valence electrons, finite energies."""
  cfg = tiny_config('Be', **{'system.ecp': 'ccecp', 'optim.optimizer': optimizer,
                             'optim.iterations': 10, 'pretrain.iterations': 5,
                             'log.save_path': str(tmp_path / 'run')})
  result = train.train(cfg, quiet=True)
  energies = result.history['energy']
  assert len(energies) == 10 and np.all(np.isfinite(energies))
  assert result.state.walkers.x.shape[1] == 6


def test_ecp_energy_moves_with_its_nucleus():
  """Si's ccECP energy (local and non-local parts) with a wavefunction that moves with its
  nucleus, psi = exp(-sum_i |r_i - R|): translating the nucleus and all electrons together
  leaves it unchanged, and moving the nucleus alone changes it. That psi is an s state about
  R, so the quadrature's projections are exact in any frame: the random frames that the
  translated electrons draw do not matter."""
  system = ecp_system('Si')

  def apply(params, x, atoms=None):
    centre = jnp.asarray(system.positions if atoms is None else atoms, x.dtype)[0]
    return jnp.ones((), x.dtype), -jnp.sum(jnp.linalg.norm(x.reshape(-1, 3) - centre, axis=-1))

  with jax.enable_x64(True):
    energy = jax.jit(ecp.make_ecp_energy(apply, system.positions, system.ecp))
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 3 * system.n_electrons), jnp.float64)
    shift = jnp.asarray([0.7, -1.3, 2.1])
    atoms = jnp.asarray(system.positions) + shift
    for xi in x:
      e = float(energy(None, xi))
      np.testing.assert_allclose(energy(None, xi + jnp.tile(shift, system.n_electrons), atoms),
                                 e, rtol=1e-10)
      np.testing.assert_allclose(energy(None, xi, jnp.asarray(system.positions)), e, rtol=1e-12)
      assert abs(float(energy(None, xi, atoms)) - e) > 1e-3


def test_local_energy_at_the_systems_own_geometry_is_the_fixed_one_with_an_ecp():
  """The local energy of a network of Si with its ECP, given the system's own geometry as
  data, equals the one whose positions are constants."""
  cfg = tiny_config('Si', **{'system.ecp': 'ccecp', 'network.ferminet.hidden_dims': ((8, 4),)})
  with jax.enable_x64(True):
    system = systems.make_system(cfg.system)
    network = plan.network_of(cfg.network, system, jnp.float64)
    params = network.init(jax.random.PRNGKey(0))
    local = hamiltonian.of(system, laplacians.JACFWD, jnp.float64).local_energy(
        network.log_psi, network.apply)
    batch = jax.jit(jax.vmap(local, in_axes=(None, 0, None)))
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 3 * system.n_electrons), jnp.float64)
    np.testing.assert_allclose(batch(params, x, system.geometry), batch(params, x, None),
                               rtol=1e-10)
