"""Hartree-Fock orbitals of crystals on the device: the periodic Gaussian basis functions (image
sums) equal pyscf.pbc's own values at random points; the occupied orbitals are orthonormal over
the cell by a quadrature of our own; a molecule in a large box has the isolated molecule's HF
energy up to the known finite-size term; the k-point orbitals unfolded to the supercell span
the supercell's Gamma-point HF orbitals; at a twist, the complex Bloch orbitals and their
sampled energy are pyscf's at that k-point."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import electron_gas_hartree_fock_terms
from ferminet_fast.errors import InputError
from ferminet_fast.physics import hartree_fock as molecular
from ferminet_fast.physics import periodic_hartree_fock as phf
from ferminet_fast.physics import ewald, hamiltonian, laplacians
from ferminet_fast.physics import lattice as lattice_lib
from ferminet_fast.vmc import mcmc, stats

pytest.importorskip('pyscf')

A_LIH = 4.084 / 0.52917721092  # Rock-salt LiH cubic lattice constant, 4.084 angstrom, in bohr.
LIH = (0.5 * A_LIH * np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0.]]), ['Li', 'H'],
       [[0, 0, 0], [0.5 * A_LIH, 0, 0]])  # The primitive (fcc) cell.
HEXAGONAL = (np.array([[4.6, 0, 0], [-2.3, 3.98, 0], [0.3, 0.2, 6.3]]), ['N', 'H'],
             [[0.4, -0.2, 1.0], [3.9, 3.0, 5.5]])  # Skewed, one nucleus outside the cell.
H2 = dict(symbols=['H', 'H'], positions=[[0, 0, 0], [0, 0, 1.4]])  # Bond 1.4 bohr.


@pytest.fixture(scope='module')
def h3_uhf():
  """UHF/STO-3G of three H atoms (2 up, 1 down) in a 6 bohr cubic cell."""
  return phf.hartree_fock(6.0 * np.eye(3), ['H', 'H', 'H'], [[0, 0, 0], [1.4, 0, 0], [3, 3, 3]],
                          'sto-3g', n_up=2, n_down=1, restricted=False)


@pytest.mark.parametrize('system,basis', [(LIH, 'sto-3g'), (HEXAGONAL, 'cc-pvdz')])
@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_basis_functions_equal_pyscf(system, basis, dtype):
  """s, p (LiH, all-electron) and d shells (N, cc-pVDZ) on an fcc and a skewed cell, at points
  spread over several cells. pyscf's image sum is taken far (rcut 60 bohr, integral precision
  1e-12); ours is cut at 1e-12 in float64 (agreement to 1e-10 relative asked, 3e-14 seen)
  and 1e-7 in float32, whose rounding over hundreds of images leaves ~2e-6."""
  cell = phf.make_cell(*system, basis, precision=1e-12)
  shells = molecular.shells_of(cell)
  lattice = np.asarray(cell.lattice_vectors())
  tol, rtol = (1e-12, 1e-10) if dtype == 'float64' else (1e-7, 1e-5)
  hf = phf.PeriodicHartreeFock(shells, phf.image_sets(shells, lattice, tol), lattice, (), 0.0,
                               cell)
  r = np.random.default_rng(0).uniform(-1.5, 2.5, size=(300, 3)) @ lattice
  want = cell.pbc_eval_gto('GTOval_sph', r, rcut=np.full(cell.nbas, 60.0))
  with jax.enable_x64(dtype == 'float64'):
    got = np.asarray(phf.atomic_orbitals(hf, jnp.asarray(r, dtype)))
  assert got.dtype == dtype and got.shape == want.shape == (300, cell.nao)
  np.testing.assert_allclose(got, want, rtol=0, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_basis_functions_at_a_twist_equal_pyscf(dtype):
  """At a twist k the basis functions are the Bloch sums sum_T exp(i k . T) phi(r - T),
  complex: on the skewed cell with d shells, at points spread over several cells (where the
  phase of the home cell's translation matters), pyscf's values at that k-point."""
  cell = phf.make_cell(*HEXAGONAL, 'cc-pvdz', precision=1e-12)
  shells = molecular.shells_of(cell)
  lattice = np.asarray(cell.lattice_vectors())
  kpt = np.array([0.13, -0.31, 0.27]) @ cell.reciprocal_vectors()
  tol, rtol = (1e-12, 1e-10) if dtype == 'float64' else (1e-7, 1e-5)
  hf = phf.PeriodicHartreeFock(shells, phf.image_sets(shells, lattice, tol), lattice, (), 0.0,
                               cell, kpt)
  r = np.random.default_rng(3).uniform(-1.5, 2.5, size=(300, 3)) @ lattice
  want = cell.pbc_eval_gto('GTOval_sph', r, kpt=kpt, rcut=np.full(cell.nbas, 60.0))
  assert np.abs(want.imag).max() > 0.1 * np.abs(want).max()
  with jax.enable_x64(dtype == 'float64'):
    got = np.asarray(phf.atomic_orbitals(hf, jnp.asarray(r, dtype)))
  assert np.iscomplexobj(got) and got.shape == want.shape == (300, cell.nao)
  np.testing.assert_allclose(got, want, rtol=0, atol=rtol * np.abs(want).max())


def test_image_sets_reach_the_cut_off():
  """Every lattice vector shorter than the reach is in the set, none longer; the origin first."""
  lattice = HEXAGONAL[0]
  t = phf.lattice_images(lattice, 10.0)
  corners = np.array([(i, j, k) for i in (-.5, .5) for j in (-.5, .5) for k in (-.5, .5)])
  reach = 10.0 + np.linalg.norm(corners @ lattice, axis=1).max()
  n = np.stack(np.meshgrid(*[np.arange(-12, 13)] * 3, indexing='ij'), -1).reshape(-1, 3)
  lengths = np.linalg.norm(n @ lattice, axis=1)
  assert len(t) == np.sum(lengths < reach) and np.all(np.linalg.norm(t, axis=1) < reach)
  np.testing.assert_array_equal(t[0], 0)


@pytest.mark.parametrize('restricted', [True, False])
def test_occupied_orbitals_equal_pyscf(restricted, h3_uhf):
  """The occupied orbitals per spin on the device (float32) equal pyscf's AOs times the MO
  coefficients, for closed-shell LiH (GTH pseudopotential) and open-shell H3 (UHF)."""
  if restricted:
    hf, (n_up, n_down) = phf.hartree_fock(*LIH, 'gth-szv', pseudo='gth-pade', n_up=2,
                                          n_down=2), (2, 2)
  else:
    hf, (n_up, n_down) = h3_uhf, (2, 1)
  n = n_up + n_down
  x = np.random.default_rng(1).uniform(-1, 2, size=(8, n, 3)) @ hf.lattice
  got = jax.vmap(phf.make_orbitals(hf, n_up, n_down))(jnp.asarray(x.reshape(8, -1), jnp.float32))
  ao = hf.cell.pbc_eval_gto('GTOval_sph', x.reshape(-1, 3)).reshape(8, n, -1)
  for block, coeffs, lo, n_s in zip(got, hf.coeffs, (0, n_up), (n_up, n_down)):
    want = ao[:, lo:lo + n_s] @ coeffs
    assert block.shape == (8, n_s, n_s)
    np.testing.assert_allclose(np.asarray(block), want, atol=1e-5 * np.abs(want).max())


def test_orbitals_are_orthonormal_over_the_cell(h3_uhf):
  """<i|j> over the cell by the trapezoidal rule on a shifted 28^3 grid (spectrally accurate
  for periodic functions: for the sharpest product of STO-3G H functions, exponent 6.85 bohr^-2,
  its error is ~exp(-pi^2 / (6.85 h^2)) ~ 1e-14 at h = 6/28 bohr), not pyscf's overlap. Left:
  the image cut-off (1e-8) and pyscf's integral precision (1e-8)."""
  hf, m = h3_uhf, 28
  grid = np.stack(np.meshgrid(*[np.arange(m)] * 3, indexing='ij'), -1).reshape(-1, 3)
  r = (grid + 0.37) / m @ hf.lattice
  volume = abs(np.linalg.det(hf.lattice))
  with jax.enable_x64(True):
    ao = np.asarray(jax.jit(lambda r: phf.atomic_orbitals(hf, r))(jnp.asarray(r)))
  for c in hf.coeffs:
    mo = ao @ c
    np.testing.assert_allclose(mo.T @ mo * volume / len(r), np.eye(c.shape[1]), atol=1e-6)


def test_molecule_in_a_large_box_has_the_isolated_hf_energy():
  """H2 (STO-3G) in a cubic box of side L: pyscf.pbc's HF energy with the 'ewald' exchange
  treatment (the Coulomb energy our Ewald sum will give) is the isolated molecule's (pyscf's
  molecular code) plus the finite-size term of each occupied orbital's exchange hole with its
  images and the neutralising background, -2 pi / (3 L^3) sum_{i, spin} <(r - <r>_i)^2>_i
  (Makov and Payne, Phys. Rev. B 51, 4014 (1995)): -3.7 mHa at L = 14 bohr. What is left,
  O(L^-5) terms and the density fitting, is ~3e-5 Ha."""
  from pyscf import gto, scf
  mol = gto.M(atom=[(s, p) for s, p in zip(H2['symbols'], H2['positions'])], unit='bohr',
              basis='sto-3g', verbose=0)
  mf = scf.RHF(mol)
  e_mol = mf.kernel()
  c = mf.mo_coeff[:, mf.mo_occ > 0]
  centre = np.einsum('xij,ia,ja->ax', mol.intor('int1e_r'), c, c)
  spread = 2 * np.sum(np.einsum('ij,ia,ja->a', mol.intor('int1e_r2'), c, c) -
                      np.sum(centre ** 2, axis=1))  # Both spins.
  box = 14.0
  hf = phf.hartree_fock(box * np.eye(3), H2['symbols'], H2['positions'], 'sto-3g', n_up=1,
                        n_down=1)
  finite_size = -2 * np.pi * spread / (3 * box ** 3)
  assert finite_size < -3e-3
  assert abs(hf.energy - (e_mol + finite_size)) < 1e-4, (hf.energy, e_mol, finite_size)


@pytest.mark.parametrize('matrix', [[[-1, 1, 1], [1, -1, 1], [1, 1, -1]],  # fcc -> cubic.
                                    [[2, 1, 0], [0, 1, 2], [1, 0, 3]], [2, 3, 1]])
def test_folded_kpoints_fold_onto_the_supercell_gamma_point(matrix):
  """det S distinct k-points (modulo the primitive reciprocal lattice), each with
  exp(i k . L) = 1 for every supercell lattice vector L; det S distinct primitive cells."""
  s = np.array(matrix) if np.ndim(matrix) == 2 else np.diag(matrix)
  prim = LIH[0]
  k = phf.folded_kpoints(matrix) @ (2 * np.pi * np.linalg.inv(prim).T)
  det = round(np.linalg.det(s))
  assert len(k) == det == len(phf.cell_translations(matrix))
  np.testing.assert_allclose(np.exp(1j * k @ (s @ prim).T), 1, atol=1e-9)
  diff = (k[:, None] - k[None]) @ prim.T / (2 * np.pi)  # Fractional: integer only for i = j.
  off = ~np.eye(det, dtype=bool)
  assert np.all(np.abs(diff - np.round(diff)).max(axis=-1)[off] > 1e-6)


@pytest.mark.parametrize('matrix', [(1, 1, 3), [[1, 1, 0], [-1, 2, 0], [0, 0, 1]]])
def test_kpoint_orbitals_unfold_to_the_supercell(matrix):
  """KRHF of an H2 molecular crystal on the 3 k-points folding onto a supercell's Gamma point
  (k = 0, +-1/3 along one or two axes: complex Bloch orbitals), unfolded to the supercell (a
  mesh and a non-diagonal one): real orbitals, orthonormal, spanning the same space as the
  supercell's own Gamma-point RHF (projectors agree to pyscf's SCF gradient tolerance, ~3e-5,
  over the HOMO-LUMO gap), with the same energy per supercell (for the non-diagonal one, with
  the supercell's Madelung term in the exchange, which pyscf's own k-point energy lacks: 0.85 Ha
  off)."""
  lattice = np.diag([4.5, 4.5, 3.5])
  hk = phf.hartree_fock_kpoints(lattice, H2['symbols'], H2['positions'], 'sto-3g',
                                kmesh=matrix)
  n_occ = hk.coeffs[0].shape[1]
  assert n_occ == 3 and hk.coeffs[0].dtype == np.float64
  hg = phf.hartree_fock(*phf.supercell(lattice, H2['symbols'], H2['positions'], matrix),
                        'sto-3g', n_up=3, n_down=3)
  np.testing.assert_allclose(hk.lattice, hg.lattice)
  overlap = hg.cell.pbc_intor('int1e_ovlp')
  c = hk.coeffs[0]
  np.testing.assert_allclose(c.T @ overlap @ c, np.eye(n_occ), atol=1e-10)
  np.testing.assert_allclose(c @ c.T, hg.coeffs[0] @ hg.coeffs[0].T, atol=1e-4)
  assert hk.energy == pytest.approx(hg.energy, abs=1e-6)


def test_sampled_kinetic_energy_is_pyscfs(h3_uhf):
  """The HF determinant of H3 (UHF, nodes in the up determinant) sampled by our MCMC: the mean
  local kinetic energy -(lap log|psi| + |grad log|psi||^2) / 2, from derivatives of the image
  sums, equals pyscf's kinetic energy sum_spin tr(C^T T C) within 5 standard errors."""
  hf = h3_uhf
  want = sum(np.trace(c.T @ hf.cell.pbc_intor('int1e_kin') @ c) for c in hf.coeffs)
  with jax.enable_x64(True):
    slater = phf.make_slater(hf, 2, 1)
    log_psi = lambda x: slater(x)[1]
    batch_log_psi = jax.vmap(lambda params, x: log_psi(x), in_axes=(None, 0))
    lap = laplacians.JACFWD(log_psi)

    def kinetic(x):
      l, g = lap(x)
      return -0.5 * (l + jnp.sum(g * g))

    sweep = jax.jit(mcmc.make_sweep(batch_log_psi, 5))
    kinetic = jax.jit(jax.vmap(kinetic))
    key = jax.random.PRNGKey(0)
    x = jax.random.uniform(key, (256, 3, 3), jnp.float64) @ jnp.asarray(hf.lattice)
    walkers = mcmc.Walkers(x.reshape(256, -1), batch_log_psi(None, x.reshape(256, -1)),
                           jnp.asarray(0.5))
    means = []
    for i in range(70):
      walkers, _ = sweep(None, walkers, jax.random.fold_in(key, i))
      if i >= 10:
        means.append(float(jnp.mean(kinetic(walkers.x))))
  est = stats.reblock(np.asarray(means))
  assert abs(est.mean - want) < 5 * est.error, (est.mean, est.error, want)
  # Precise enough to see the image sums cut to the home cell (functions off by ~30%).
  assert est.error < 0.04 * want


def sampled_hf_energy(hf, n_up, n_down, batch, steps, sweeps, burn_in=10):
  """The HF determinant sampled by our MCMC (float64), its local energy E_L = -(lap log|psi| +
  |grad log|psi||^2) / 2 + the Ewald Coulomb energy (e-e, e-n, n-n with the Madelung
  self-terms) per sweep, averaged over walkers: the reblocked stats.Estimate, Ha per cell. At
  a twist (complex orbitals) log psi = log|psi| + i theta and the real part of E_L is taken,
  -(lap log|psi| + |grad log|psi||^2 - |grad theta|^2) / 2 + the Coulomb energy."""
  n = n_up + n_down
  with jax.enable_x64(True):
    slater = phf.make_slater(hf, n_up, n_down)
    log_psi = lambda x: slater(x)[1]
    batch_log_psi = jax.vmap(lambda params, x: log_psi(x), in_axes=(None, 0))
    atoms = jnp.asarray(hf.cell.atom_coords())
    charges = jnp.asarray(hf.cell.atom_charges(), jnp.float64)
    coulomb = ewald.make_ewald(lattice_lib.make_lattice(hf.lattice, dims=hf.dims), n,
                               len(atoms), 'float64')

    def log_psi_phase(x):
      sign, log_abs = slater(x)
      return jnp.stack([log_abs, jnp.angle(sign)])

    lap = laplacians.JACFWD(log_psi_phase if hf.twisted else log_psi)

    def local_energy(x):
      l, g = lap(x)
      if hf.twisted:
        return jnp.real(hamiltonian.complex_kinetic(l, g)) + coulomb(x, atoms, charges)
      return -0.5 * (l + jnp.sum(g * g)) + coulomb(x, atoms, charges)

    sweep = jax.jit(mcmc.make_sweep(batch_log_psi, steps))
    local_energy = jax.jit(jax.vmap(local_energy))
    key = jax.random.PRNGKey(0)
    x = jax.random.uniform(key, (batch, n, 3), jnp.float64) @ jnp.asarray(hf.lattice)
    if hf.dims < 3:  # A slab's or chain's electrons start near its nuclei, not in the vacuum.
      spread = jax.random.normal(jax.random.fold_in(key, 10**6), (batch, n, 3 - hf.dims),
                                 jnp.float64)
      x = x.at[..., hf.dims:].set(np.mean(hf.cell.atom_coords()[:, hf.dims:], axis=0) + spread)
    x = x.reshape(batch, -1)
    walkers = mcmc.Walkers(x, batch_log_psi(None, x), jnp.asarray(0.3))
    means = []
    for i in range(burn_in + sweeps):
      walkers, pmove = sweep(None, walkers, jax.random.fold_in(key, i))
      if i < burn_in:
        walkers = walkers._replace(width=mcmc.adapt_width(walkers.width, pmove, 0.5, 1.0))
      else:
        means.append(float(jnp.mean(local_energy(walkers.x))))
  return stats.reblock(np.asarray(means))


def test_sampled_energy_of_h2_crystal_is_pyscfs():
  """The crystal at the HF level: an H2 molecular crystal (STO-3G, bond 1.4 bohr) in a 4 bohr
  cubic cell, close enough for the molecules to overlap. pyscf.pbc's RHF energy per cell
  (exchange divergence 'ewald') is the expectation of the Coulomb energy summed by Ewald with
  the Madelung self-term of each charge; our MCMC sample of its determinant, with our
  Laplacian and our Ewald sum (physics/ewald.py), gives it within 4 reblocked standard errors
  (agreement to 1.2 errors of 4.7 mHa seen). The check resolves the convention: leaving out
  the electrons' Madelung self-energy (that of one charge with its own images and background,
  -0.35 Ha each here) would shift our energy by many error bars."""
  hf = phf.hartree_fock(4.0 * np.eye(3), H2['symbols'], H2['positions'], 'sto-3g', n_up=1,
                        n_down=1)
  est = sampled_hf_energy(hf, 1, 1, batch=256, steps=5, sweeps=60)
  assert abs(est.mean - hf.energy) < 4 * est.error, (est.mean, est.error, hf.energy)
  assert est.error < 0.01
  with jax.enable_x64(True):
    self_energy = ewald.madelung(lattice_lib.make_lattice(hf.lattice), np.zeros((1, 3)), [1.0])
  assert 2 * abs(self_energy) > 20 * est.error, self_energy


def test_sampled_energy_of_a_twisted_h2_crystal_is_pyscfs():
  """The same crystal at a twist k_s = (0.25, 0.1, 0) of its reciprocal vectors: pyscf.pbc's
  ROHF at that k-point (complex Bloch orbitals, phi(r + L) = exp(i k_s . L) phi(r)) against
  our MCMC sample of its determinant with the complex kinetic energy, within 4 reblocked
  standard errors. The twist raises the energy by more than twice that window (0.14 Ha here,
  mostly the Bloch phase's kinetic energy |k_s|^2 / 2 per electron), so orbitals that lost
  their phases would fail."""
  lattice = 4.0 * np.eye(3)
  kpt = np.array([0.25, 0.1, 0.0]) @ (2 * np.pi * np.linalg.inv(lattice).T)
  hf = phf.hartree_fock(lattice, H2['symbols'], H2['positions'], 'sto-3g', n_up=1, n_down=1,
                        kpt=kpt)
  assert hf.twisted and np.iscomplexobj(hf.coeffs[0])
  gamma = phf.hartree_fock(lattice, H2['symbols'], H2['positions'], 'sto-3g', n_up=1,
                           n_down=1)
  est = sampled_hf_energy(hf, 1, 1, batch=256, steps=5, sweeps=60)
  assert abs(est.mean - hf.energy) < 4 * est.error, (est.mean, est.error, hf.energy)
  assert est.error < 0.01
  assert hf.energy - gamma.energy > 2 * 4 * est.error, (hf.energy, gamma.energy)


def test_sampled_energy_of_an_h2_layer_is_pyscfs():
  """A slab at the HF level: a square layer of H2 molecules (STO-3G, 3.6 bohr apart in the
  plane), periodic along x and y only, open along z (lattice dims = 2). pyscf.pbc's ROHF
  of the cell with dimension 2 against our MCMC sample of its determinant, with our slab
  Ewald sum (physics/ewald.py) and basis functions summed over in-plane images only, within
  4 reblocked standard errors; and the basis functions equal pyscf's at points above and
  below the layer. The cell's 30 bohr along z is vacuum for pyscf's sake; ours is open."""
  lattice = np.diag([3.6, 3.6, 30.0])
  hf = phf.hartree_fock(lattice, H2['symbols'], H2['positions'], 'sto-3g', n_up=1, n_down=1,
                        dims=2)
  assert hf.dims == 2 and hf.cell.dimension == 2
  assert all(np.all(t[:, 2] == 0) for t in hf.images)
  # pyscf sums a slab's basis functions over images along z too (30 bohr away here, where
  # they vanish); ours over the plane only.
  points = np.random.default_rng(2).uniform(-3.0, 4.4, (20, 3))
  with jax.enable_x64(True):
    ours = phf.atomic_orbitals(hf, jnp.asarray(points))
  np.testing.assert_allclose(ours, hf.cell.pbc_eval_gto('GTOval', points), atol=1e-8)
  est = sampled_hf_energy(hf, 1, 1, batch=1024, steps=5, sweeps=60, burn_in=20)
  assert abs(est.mean - hf.energy) < 4 * est.error, (est.mean, est.error, hf.energy)
  assert est.error < 0.01


def test_sampled_energy_of_an_h2_chain_is_pyscfs():
  """A chain at the HF level: H2 molecules (STO-3G, bonds across the chain) 3.6 bohr apart
  along x, periodic along x only (lattice dims = 1). pyscf.pbc's ROHF of the cell with
  dimension 1 (open directions as infinite vacuum) against our MCMC sample of its
  determinant, with our one-dimensional Ewald sum (physics/ewald.py) and basis functions
  summed over images along the chain only, within 4 reblocked standard errors; pyscf's
  energy does not depend on the cell's extent across the chain (20 or 30 bohr)."""
  hf = phf.hartree_fock(np.diag([3.6, 20.0, 20.0]), H2['symbols'], H2['positions'], 'sto-3g',
                        n_up=1, n_down=1, dims=1)
  wider = phf.hartree_fock(np.diag([3.6, 30.0, 30.0]), H2['symbols'], H2['positions'],
                           'sto-3g', n_up=1, n_down=1, dims=1)
  assert hf.dims == 1 and hf.cell.dimension == 1
  assert all(np.all(t[:, 1:] == 0) for t in hf.images)
  assert wider.energy == pytest.approx(hf.energy, abs=1e-6)
  est = sampled_hf_energy(hf, 1, 1, batch=1024, steps=5, sweeps=60, burn_in=20)
  assert abs(est.mean - hf.energy) < 4 * est.error, (est.mean, est.error, hf.energy)
  assert est.error < 0.01


def test_twisted_kpoint_orbitals_unfold_to_the_supercell_at_its_twist():
  """KRHF of the H2 crystal on the 3 k-points folding onto a (1, 1, 3) supercell's twist
  k_s = (0.2, 0.1, 0.3) (of the supercell's reciprocal vectors), unfolded: complex orbitals,
  orthonormal in the supercell's overlap at k_s, spanning the same space as the supercell's
  own RHF at k_s (density matrices agree to pyscf's SCF tolerance), with the same energy per
  supercell; and Bloch functions: moving an electron by a supercell lattice vector L
  multiplies the determinant by exp(i k_s . L)."""
  lattice, matrix = np.diag([4.5, 4.5, 3.5]), (1, 1, 3)
  big = phf.supercell(lattice, H2['symbols'], H2['positions'], matrix)
  kpt = np.array([0.2, 0.1, 0.3]) @ (2 * np.pi * np.linalg.inv(big[0]).T)
  hk = phf.hartree_fock_kpoints(lattice, H2['symbols'], H2['positions'], 'sto-3g',
                                kmesh=matrix, kpt=kpt)
  hg = phf.hartree_fock(*big, 'sto-3g', n_up=3, n_down=3, kpt=kpt)
  c, cg = hk.coeffs[0], hg.coeffs[0]
  assert c.shape == (cg.shape[0], 3) and np.iscomplexobj(c) and hk.twisted
  overlap = hg.cell.pbc_intor('int1e_ovlp', kpts=kpt)
  np.testing.assert_allclose(c.conj().T @ overlap @ c, np.eye(3), atol=1e-10)
  np.testing.assert_allclose(c @ c.conj().T, cg @ cg.conj().T, atol=1e-4)
  assert hk.energy == pytest.approx(hg.energy, abs=1e-6)
  slater = phf.make_slater(hk, 3, 3)
  x = np.random.default_rng(4).uniform(0, 1, size=(6, 3)) @ hk.lattice
  with jax.enable_x64(True):
    sign, log_abs = slater(jnp.asarray(x.reshape(-1)))
    for vector in hk.lattice:
      moved = x.copy()
      moved[4] += vector
      moved_sign, moved_log = slater(jnp.asarray(moved.reshape(-1)))
      assert float(moved_log) == pytest.approx(float(log_abs), abs=1e-9)
      assert complex(moved_sign) == pytest.approx(complex(sign) * np.exp(1j * kpt @ vector),
                                                  abs=1e-9)


def test_slater_determinant(h3_uhf):
  """log|psi| of the HF determinant is pyscf's orbitals' determinant, unchanged when an
  electron moves by a lattice vector, and changes sign when two up electrons swap."""
  slater = jax.jit(phf.make_slater(h3_uhf, 2, 1))
  x = np.random.default_rng(2).uniform(0, 1, size=(3, 3)) @ h3_uhf.lattice
  with jax.enable_x64(True):
    sign, log_abs = slater(jnp.asarray(x.reshape(-1)))
    ao = h3_uhf.cell.pbc_eval_gto('GTOval_sph', x)
    want = [np.linalg.slogdet(ao[:2] @ h3_uhf.coeffs[0]), np.linalg.slogdet(ao[2:] @
                                                                            h3_uhf.coeffs[1])]
    assert float(log_abs) == pytest.approx(want[0][1] + want[1][1], abs=1e-9)
    assert float(sign) == want[0][0] * want[1][0]
    moved = x + np.array([[0, 0, 0], [0, 0, 0], [1, -2, 0]]) @ h3_uhf.lattice
    sign2, log2 = slater(jnp.asarray(moved.reshape(-1)))
    assert float(sign2) == float(sign) and float(log2) == pytest.approx(float(log_abs),
                                                                         abs=1e-9)
    sign3, log3 = slater(jnp.asarray(x[[1, 0, 2]].reshape(-1)))
    assert float(sign3) == -float(sign) and float(log3) == pytest.approx(float(log_abs),
                                                                          abs=1e-9)


@pytest.mark.parametrize('lattice,symbols,message', [
    (np.eye(2), ['H'], 'three finite vectors'),
    ([[1, 0, 0], [0, 1, 0], [1, 1, 0]], ['H'], 'linearly dependent'),
    (np.eye(3) * 5, ['H', 'H'], '2 atom symbols for 1 positions'),
])
def test_bad_cells_are_one_clear_error(lattice, symbols, message):
  with pytest.raises(InputError, match=message):
    phf.make_cell(lattice, symbols, [[0, 0, 0]], 'sto-3g')


def test_unknown_basis_is_one_clear_error():
  with pytest.raises(InputError, match='pyscf cannot build the cell'):
    phf.make_cell(5 * np.eye(3), ['H', 'H'], H2['positions'], 'no-such-basis')


@pytest.mark.parametrize('twist', [(0.0, 0.0, 0.0), (0.1, 0.2, 0.3)])
def test_electron_gas_energy_is_the_plane_wave_determinants(twist):
  """The gas's Hartree-Fock energy (7 + 7 electrons at r_s = 1, simple cubic) equals the
  direct sums of kinetic, exchange and the cube's published Madelung constant (conftest):
  8.49148 Ha per cell (0.60653 per electron) at the Gamma point. There it also equals the
  published data of this cell (cc4s test resources for Shepherd et al., J. Chem. Phys. 140,
  124102 (2014), doi:10.1063/1.4867783; github.com/cc4s/test-resources,
  ueg/rs1.0_7occ_26virt): volume
  58.6430628670 bohr^3, Madelung constant v_M = 0.7302966760 Ha (each electron's self-energy
  in its background is -v_M / 2) and Hartree-Fock energy 8.4914806035 Ha."""
  cell = lattice_lib.electron_gas(1.0, 'sc', 14)
  with jax.enable_x64(True):
    energy = phf.electron_gas_energy(cell, 7, 7, twist)
    self_energy = ewald.madelung(cell, np.zeros((1, 3)), np.ones(1))
  kinetic, exchange, madelung, _ = electron_gas_hartree_fock_terms(cell.vectors[0, 0], 7, twist)
  assert energy == pytest.approx(kinetic + exchange + madelung, abs=1e-5)
  if not any(twist):
    assert cell.volume == pytest.approx(58.6430628670, abs=1e-9)
    assert self_energy == pytest.approx(-0.7302966760 / 2, abs=1e-9)
    assert energy == pytest.approx(8.4914806035, abs=1e-8)


def test_every_run_gets_the_same_kpoint_orbitals():
  """The LiH crystal's KRHF (configs/lih_crystal.py's cell) has degenerate occupied bands:
  with pyscf's threaded density fit and Fock builds each run picked another basis of them
  (entries differing by up to 1.7 on a 2-core machine), so another run from the same seed."""
  supercell = ((-1, 1, 1), (1, -1, 1), (1, 1, -1))
  first, again = (phf.hartree_fock_kpoints(LIH[0], LIH[1], LIH[2], 'sto-3g', kmesh=supercell)
                  for _ in range(2))
  assert again.energy == first.energy
  np.testing.assert_array_equal(again.coeffs[0], first.coeffs[0])


@pytest.mark.parametrize('kpt', [None, (0.25, 0.1, 0.0)], ids=['gamma', 'twist'])
def test_orbitals_over_a_scan_of_the_cell_are_each_cells_own(kpt):
  """The HF of an H2 crystal in two sizes of its cubic cell (4 and 5 bohr, the nuclei
  scaled with it), evaluated as one function of data (orbitals_over_cells: the smallest
  cell's image translations in units of each cell's vectors) equals each cell's own orbitals
  (make_orbitals, its own image set), up to each orbital's sign, at the Gamma point and at a
  twist."""
  hfs = []
  for side in (4.0, 5.0):
    k = None if kpt is None else np.asarray(kpt) @ (2 * np.pi * np.eye(3) / side)
    hfs.append(phf.hartree_fock(side * np.eye(3), H2['symbols'],
                                np.asarray(H2['positions']) * side / 4.0, 'sto-3g', n_up=1,
                                n_down=1, kpt=k))
  orbitals, data = phf.orbitals_over_cells(hfs, 1, 1)
  with jax.enable_x64(True):
    x = jax.random.uniform(jax.random.PRNGKey(0), (6,), jnp.float64) * 9.0 - 2.0
    for g, hf in enumerate(hfs):
      one = jax.tree.map(lambda a: jnp.asarray(a[g]), data)
      got = orbitals(x, one)
      own = phf.make_orbitals(hf, 1, 1)(x)
      for a, b in zip(got, own):
        np.testing.assert_allclose(np.abs(np.asarray(a)), np.abs(np.asarray(b)), rtol=1e-8,
                                   atol=1e-12)
