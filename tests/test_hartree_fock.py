"""Hartree-Fock orbitals on the device: the Gaussian basis functions and occupied orbitals
evaluated in JAX equal pyscf's own (libcint's) values at random points, for bases with s to
f shells on a molecule; the SCF energy is pyscf's UHF/ROHF energy."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast.physics import hartree_fock, systems

pytestmark = pytest.mark.jax_range

pytest.importorskip('pyscf')


@pytest.mark.parametrize('basis', ['sto-6g', 'cc-pvdz', 'cc-pvtz'])  # s-p, + d, + f shells.
def test_basis_functions_equal_pyscf(basis):
  from pyscf import gto
  mol = gto.M(atom='N 0 0 0; N 0 0 2.068; H 0.3 1.0 -1.0', unit='bohr', basis=basis, spin=1,
              verbose=0)
  r = np.random.default_rng(0).normal(size=(400, 3)) * 1.5 + np.array([0.0, 0.0, 1.0])
  want = mol.eval_gto('GTOval_sph', r)
  with jax.enable_x64(True):
    got = np.asarray(hartree_fock.atomic_orbitals(hartree_fock.shells_of(mol),
                                                  jnp.asarray(r, jnp.float64)))
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize('restricted', [False, True])
def test_occupied_orbitals_equal_pyscf(restricted):
  cfg = tiny_config('Li')
  cfg.system.atom, cfg.system.molecule = '', 'Li 0 0 0; H 0 0 3.015'
  cfg.system.spin = 0
  system = systems.make_system(cfg.system)
  hf = hartree_fock.hartree_fock(system, 'cc-pvdz', restricted)
  assert hf.energy == pytest.approx(-7.98, abs=0.01)  # RHF/cc-pVDZ of LiH near -7.983 Ha.
  x = np.random.default_rng(1).normal(size=(8, 3 * system.n_electrons)) * 2.0
  got = jax.vmap(hartree_fock.make_orbitals(hf, system))(jnp.asarray(x, jnp.float32))
  ao = hf.mol.eval_gto('GTOval_sph', x.reshape(-1, 3)).reshape(8, system.n_electrons, -1)
  lo = 0
  for block, coeffs in zip(got, hf.coeffs):
    n_s = coeffs.shape[1]
    want = ao[:, lo:lo + n_s] @ coeffs
    assert block.shape == (8, n_s, n_s)
    np.testing.assert_allclose(np.asarray(block), want, atol=1e-5 * np.abs(want).max())
    lo += n_s


def test_every_run_gets_the_same_orbitals():
  """N2's occupied pi orbitals are degenerate: with pyscf's threaded builds, each SCF picked
  another basis of that space (entries differing by up to 1.3 on a 2-core machine), and
  with it other pretraining targets and another run from the same seed."""
  cfg = tiny_config('Li')
  cfg.system.atom, cfg.system.molecule = '', 'N 0 0 -1.034; N 0 0 1.034'
  cfg.system.units = 'bohr'
  system = systems.make_system(cfg.system)
  first = hartree_fock.hartree_fock(system, 'sto-6g', restricted=False)
  for _ in range(3):
    again = hartree_fock.hartree_fock(system, 'sto-6g', restricted=False)
    assert again.energy == first.energy
    for a, b in zip(again.coeffs, first.coeffs):
      np.testing.assert_array_equal(a, b)


def test_orbital_signs_follow_the_geometry():
  """Each SCF fixes its orbitals' signs at random; aligned over a scan of LiH's bond, each
  orbital changes little from one geometry to the next, whatever signs the SCF chose, real
  or complex (a crystal's twisted orbitals)."""
  cfg = tiny_config('Li')
  cfg.system.atom, cfg.system.spin = '', 0
  hfs = []
  for bond in (2.9, 3.0, 3.1):
    cfg.system.molecule = f'Li 0 0 0; H 0 0 {bond}'
    hfs.append(hartree_fock.hartree_fock(systems.make_system(cfg.system), 'cc-pvdz', True))
  flips = np.random.default_rng(0).choice([-1.0, 1.0], size=(3, hfs[0].coeffs[0].shape[1]))
  for kind in (np.float64, np.complex128):
    coeffs = [[np.asarray(c, kind) * f for c in hf.coeffs] for hf, f in zip(hfs, flips)]
    aligned = hartree_fock.aligned_signs(coeffs)
    for before, after, given in zip(aligned, aligned[1:], coeffs[1:]):
      for b, a, g in zip(before, after, given):
        np.testing.assert_array_equal(np.abs(a), np.abs(g))  # Only signs change.
        assert np.abs(a - b).max() < 0.5 * np.abs(a + b).max()


def test_the_hessian_is_the_derivative_of_pyscf_forces():
  """Water's UHF/sto-3g Hessian, ordered nucleus by nucleus and x, y, z: symmetric, zero
  along a rigid translation, and each column of a hydrogen's and the oxygen's the central
  difference of pyscf's analytic gradients at +-1e-3 bohr."""
  from pyscf import scf
  cfg = tiny_config('Li')
  cfg.system.atom, cfg.system.molecule, cfg.system.spin = '', (
      'O 0 0 0; H 0 1.43 1.11; H 0.1 -1.43 1.11'), 0
  cfg.system.units = 'bohr'
  system = systems.make_system(cfg.system)
  h = hartree_fock.hessian(system, 'sto-3g')
  assert h.shape == (9, 9)
  np.testing.assert_allclose(h, h.T, atol=1e-6)
  np.testing.assert_allclose(h @ np.tile([0.0, 1.0, 0.0], 3), 0, atol=1e-5)

  def gradient(positions):
    mf = scf.UHF(hartree_fock.molecule(dataclasses.replace(system, positions=positions),
                                       'sto-3g'))
    hartree_fock.scf_energy(mf)
    return np.asarray(mf.nuc_grad_method().kernel()).ravel()

  for column in (4, 2):  # The first hydrogen's y, the oxygen's z.
    step = np.zeros(9)
    step[column] = 1e-3
    up, down = (np.asarray(system.positions) + sign * step.reshape(3, 3) for sign in (1, -1))
    np.testing.assert_allclose(h[:, column], (gradient(up) - gradient(down)) / 2e-3,
                               atol=2e-4)
