"""Hartree-Fock pretraining: the network's orbitals move toward the UHF orbitals; the
full-determinant target is block diagonal; without pyscf a run says so and goes on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import plan
from ferminet_fast.physics import geometries, hartree_fock, systems
from ferminet_fast.vmc import mcmc, pretrain


def test_pretraining_reduces_orbital_mismatch():
  pytest.importorskip('pyscf')
  cfg = tiny_config('Li', **{'pretrain.iterations': 40, 'pretrain.lr': 3e-3})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = mcmc.init_positions(jax.random.PRNGKey(1), system, cfg.batch_size, 1.0, jnp.float32)
  new_params, new_x, losses = pretrain.pretrain(cfg.pretrain, cfg.mcmc, system, network, params, x,
                                                jax.random.PRNGKey(2), say=lambda *a: None)
  assert losses.shape == (40,) and np.all(np.isfinite(losses))
  assert losses[-10:].mean() < 0.5 * losses[:5].mean(), (losses[:5], losses[-10:])
  assert new_x.shape == x.shape and bool(jnp.all(jnp.isfinite(new_x)))

  # The same walkers, old and new parameters: the mismatch itself went down.
  hf = hartree_fock.hartree_fock(system, cfg.pretrain.basis, cfg.pretrain.restricted)
  assert hf.energy < -7.2  # UHF/STO-6G of Li is about -7.40 Ha.
  hf_orbitals = jax.vmap(hartree_fock.make_orbitals(hf, system))(new_x)
  targets = pretrain.target_blocks(hf_orbitals, cfg.network.full_det, system.n_electrons)

  def mismatch(p):
    blocks = jax.vmap(network.orbitals, in_axes=(None, 0))(p, new_x)
    return sum(float(jnp.mean(jnp.sum((b - t[:, None]) ** 2, axis=(1, 2, 3))))
               for b, t in zip(blocks, targets))

  assert mismatch(new_params) < 0.5 * mismatch(params)


def test_full_determinant_target_is_block_diagonal():
  up, down = jnp.ones((2, 2, 2)), 2 * jnp.ones((2, 1, 1))
  t_up, t_down = pretrain.target_blocks([up, down], full_det=True, n=3)
  assert t_up.shape == (2, 2, 3) and t_down.shape == (2, 1, 3)
  np.testing.assert_array_equal(t_up[:, :, :2], up)
  np.testing.assert_array_equal(t_up[:, :, 2], 0)
  np.testing.assert_array_equal(t_down[:, :, :2], 0)
  np.testing.assert_array_equal(t_down[:, :, 2:], down)


def test_without_pyscf_the_run_says_so_and_goes_on(monkeypatch):
  monkeypatch.setattr(pretrain, 'available', lambda: False)
  cfg = tiny_config('He', **{'pretrain.iterations': 10})
  said, state = [], object()
  left, finish = pretrain.pretrain_state(cfg.pretrain, cfg.mcmc, None, None, None, state,
                                        said.append)
  assert left is state  # Left as it was.
  finish()
  assert said == ["Pretrain skipped: config.pretrain.iterations = 10 needs the optional "
                  "package pyscf (pip install 'ferminet_fast[pyscf]')"]


def _crystal(molecule, lattice, supercell, **overrides):
  return tiny_config('', **{'system.molecule': molecule, 'system.units': 'bohr',
                            'system.lattice': lattice, 'system.supercell': supercell,
                            'network.envelope': 'auto', 'pretrain.basis': 'sto-3g',
                            'pretrain.iterations': 10, **overrides})


def test_crystal_pretraining_targets_are_pyscf_pbc_orbitals():
  """A supercell of an H2 molecular crystal (2 cells, closed-shell primitive cell) takes the
  k-point route (KRHF of the primitive cell, unfolded); its target orbitals span the space of
  the supercell's own Gamma-point RHF (the determinants agree up to a constant factor: the
  same Slater determinant) and its energy per simulation cell is that RHF's. A supercell of
  an H crystal (one electron per primitive cell) takes the Gamma-point route."""
  pytest.importorskip('pyscf')
  from ferminet_fast import config
  from ferminet_fast.physics import periodic_hartree_fock as phf
  cfg = _crystal('H 0 0 0; H 0 0 1.4', ((4.5, 0, 0), (0, 4.5, 0), (0, 0, 3.5)), (1, 1, 2))
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  orbitals, method, energy = pretrain.reference_orbitals(cfg.pretrain, system)
  assert method == 'KRHF'
  gamma = phf.hartree_fock(system.lattice.vectors, system.symbols, system.positions, 'sto-3g',
                           n_up=2, n_down=2, restricted=True)
  assert energy == pytest.approx(gamma.energy, abs=1e-6)
  x = np.random.default_rng(0).uniform(0, 1, (16, 4, 3)) @ system.lattice.vectors
  x = jnp.asarray(x.reshape(16, -1))
  with jax.enable_x64(True):
    ours = [m for m in jax.vmap(orbitals)(x.astype(jnp.float64))]
    theirs = jax.vmap(phf.make_orbitals(gamma, 2, 2))(x.astype(jnp.float64))
  ratio = np.prod([np.linalg.det(a) / np.linalg.det(b) for a, b in zip(ours, theirs)], axis=0)
  np.testing.assert_allclose(ratio, ratio[0], rtol=1e-4)

  cfg = _crystal('H 0 0 0', ((3.0, 0, 0), (0, 3.0, 0), (0, 0, 3.0)), (2, 1, 1))
  system = systems.make_system(cfg.system)
  _, method, energy = pretrain.reference_orbitals(cfg.pretrain, system)
  assert method == 'UHF' and np.isfinite(energy)


def test_crystal_pretraining_refuses_what_it_cannot_do():
  """The electron gas needs no pretraining (a clear error from the settings, and from the
  pretraining itself if asked directly); a crystal with ECPs is refused by name."""
  pytest.importorskip('pyscf')
  from ferminet_fast import config
  from ferminet_fast.errors import InputError
  heg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': (7, 7),
                           'network.envelope': 'auto', 'pretrain.iterations': 10})
  with pytest.raises(InputError, match='electron gas needs none'):
    config.validate(heg)
  with pytest.raises(InputError, match='electron gas needs no Hartree-Fock pretraining'):
    pretrain.reference_orbitals(heg.pretrain, systems.make_system(heg.system))
  crystal = systems.make_system(
      _crystal('Si 0 0 0; Si 2.5 2.5 2.5', ((0, 5.1, 5.1), (5.1, 0, 5.1), (5.1, 5.1, 0)), (),
               **{'system.ecp': 'ccecp'}).system)
  with pytest.raises(InputError, match='effective core potentials is not supported'):
    pretrain.reference_orbitals(heg.pretrain, crystal)


def test_pretraining_a_periodic_network_reduces_orbital_mismatch():
  """The periodic FermiNet (plane-wave envelope) of an H2 crystal supercell fitted to the
  unfolded k-point RHF orbitals: the mismatch falls by half within 60 steps, and the walkers
  stay in the supercell."""
  pytest.importorskip('pyscf')
  cfg = _crystal('H 0 0 0; H 0 0 1.4', ((4.5, 0, 0), (0, 4.5, 0), (0, 0, 3.5)), (1, 1, 2),
                 **{'pretrain.iterations': 60, 'pretrain.lr': 3e-3,
                    'network.envelope': 'planewave'})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = mcmc.init_positions(jax.random.PRNGKey(1), system, cfg.batch_size, 1.0, jnp.float32)
  _, new_x, losses = pretrain.pretrain(cfg.pretrain, cfg.mcmc, system, network, params, x,
                                       jax.random.PRNGKey(2), say=lambda *a: None)
  assert losses.shape == (60,) and np.all(np.isfinite(losses))
  assert losses[-10:].mean() < 0.5 * losses[:5].mean(), (losses[:5], losses[-10:])
  assert new_x.shape == x.shape and bool(jnp.all(jnp.isfinite(new_x)))
  # Every move was wrapped into the supercell, as in training: the walkers end inside it.
  fractional = np.asarray(new_x).reshape(-1, 3) @ np.linalg.inv(system.lattice.vectors)
  assert np.all((fractional > -1e-5) & (fractional < 1 + 1e-5)), fractional


def test_pretraining_a_crystal_at_a_twist_fits_complex_bloch_orbitals():
  """An H2 crystal supercell at the twist (0, 0, 0.3): the targets are the complex KRHF Bloch
  orbitals unfolded to that twist, with pyscf's energy of the supercell's own RHF at k_s; the
  network's orbitals (isotropic envelope times the Bloch factor) are complex, and the squared
  modulus of their mismatch halves within 60 steps."""
  pytest.importorskip('pyscf')
  from ferminet_fast.physics import lattice as lattice_lib
  from ferminet_fast.physics import periodic_hartree_fock as phf
  cfg = _crystal('H 0 0 0; H 0 0 1.4', ((4.5, 0, 0), (0, 4.5, 0), (0, 0, 3.5)), (1, 1, 2),
                 **{'pretrain.iterations': 60, 'pretrain.lr': 3e-3,
                    'system.twist': (0.0, 0.0, 0.3), 'network.envelope': 'isotropic'})
  system = systems.make_system(cfg.system)
  assert system.complex
  orbitals, method, energy = pretrain.reference_orbitals(cfg.pretrain, system)
  kpt = lattice_lib.twist_vector(system.lattice, system.twist)
  twisted = phf.hartree_fock(system.lattice.vectors, system.symbols, system.positions,
                             'sto-3g', n_up=2, n_down=2, kpt=kpt)
  assert method == 'KRHF' and energy == pytest.approx(twisted.energy, abs=1e-6)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = mcmc.init_positions(jax.random.PRNGKey(1), system, cfg.batch_size, 1.0, jnp.float32)
  assert all(jnp.iscomplexobj(b) for b in network.orbitals(params, x[0]))
  assert all(jnp.iscomplexobj(b) for b in orbitals(x[0]))
  _, new_x, losses = pretrain.pretrain(cfg.pretrain, cfg.mcmc, system, network, params, x,
                                       jax.random.PRNGKey(2), say=lambda *a: None)
  assert losses.shape == (60,) and np.all(np.isfinite(losses))
  assert losses[-10:].mean() < 0.5 * losses[:5].mean(), (losses[:5], losses[-10:])
  assert new_x.shape == x.shape and bool(jnp.all(jnp.isfinite(new_x)))


def test_pretraining_over_a_set_of_geometries_fits_each_ones_orbitals():
  """LiH at three bond lengths, one network: the HF orbitals as data are pyscf's at each
  geometry (hartree_fock.make_orbitals there, up to each orbital's sign), and pretraining
  lowers the mismatch at every geometry, each against its own HF orbitals and nuclei, its
  walkers gathered around its own nuclei."""
  pytest.importorskip('pyscf')
  import dataclasses
  bonds = (2.0, 3.0, 4.5)
  cfg = tiny_config('Li', **{'system.atom': '', 'system.molecule': 'Li 0 0 0; H 0 0 3.0',
                             'system.units': 'bohr', 'pretrain.iterations': 60,
                             'pretrain.lr': 3e-3, 'batch_size': 96})
  system = systems.make_system(cfg.system)
  stack = np.array([[[0, 0, 0], [0, 0, b]] for b in bonds], np.float64)
  system = dataclasses.replace(system, surface=geometries.Surface(stack))
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = mcmc.init_positions(jax.random.PRNGKey(1), system, cfg.batch_size, 1.0, jnp.float32)
  hf_orbitals, (nuclei, data), _, energies = pretrain.surface_orbitals(cfg.pretrain, system)
  assert len(set(np.round(energies, 6))) == len(bonds)
  for g, r in enumerate(stack):
    alone = dataclasses.replace(system, positions=r, surface=None)
    hf = hartree_fock.hartree_fock(alone, cfg.pretrain.basis, cfg.pretrain.restricted)
    want = jax.vmap(hartree_fock.make_orbitals(hf, alone))(x[:8])
    got = jax.vmap(lambda xi: hf_orbitals(xi, jax.tree.map(lambda a: a[g], data)))(x[:8])
    for w, o in zip(want, got):  # Columns equal up to a sign each.
      sign = np.sign(np.sum(np.asarray(w) * np.asarray(o), axis=(0, 1)))
      np.testing.assert_allclose(o * sign, w, rtol=1e-4, atol=1e-5)

  new_params, new_x, losses = pretrain.pretrain(cfg.pretrain, cfg.mcmc, system, network, params,
                                                x, jax.random.PRNGKey(2), say=lambda *a: None)
  assert np.all(np.isfinite(losses)) and losses[-10:].mean() < 0.5 * losses[:5].mean()
  per = cfg.batch_size // len(bonds)
  for g in range(len(bonds)):
    xs = new_x[g * per:(g + 1) * per]
    # The chain of geometry g samples around its own nuclei: its mean z of the electrons
    # moves out with the bond (Li at the origin).
    if g:
      assert float(jnp.mean(xs[:, 2::3])) > float(jnp.mean(new_x[(g - 1) * per:g * per, 2::3]))
    one = jax.tree.map(lambda a: a[g], data)
    targets = pretrain.target_blocks(jax.vmap(lambda xi: hf_orbitals(xi, one))(xs),
                                     cfg.network.full_det, system.n_electrons)

    def mismatch(p):
      blocks = jax.vmap(network.orbitals, in_axes=(None, 0, None))(p, xs, stack[g])
      return sum(float(jnp.mean(jnp.sum((b - t[:, None]) ** 2, axis=(1, 2, 3))))
                 for b, t in zip(blocks, targets))

    assert mismatch(new_params) < 0.5 * mismatch(params), g
