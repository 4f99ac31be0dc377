"""The Ewald sum (physics/ewald.py) against published lattice sums: Madelung constants of
ionic crystals and of the Wigner crystal in a neutralising background; its independence of
the splitting parameter; invariance under translations, permutations and the choice of
cell; float32 against float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ferminet_fast.errors import InputError
from ferminet_fast.physics import ewald, lattice, periodic_hartree_fock


@pytest.fixture(autouse=True)
def float64():
  with jax.enable_x64(True):
    yield

FCC = 0.5 * np.array([[0., 1, 1], [1, 0, 1], [1, 1, 0]])  # Primitive vectors, cube side 1.
PAIR = np.array([1.0, -1.0])


# Madelung constants referred to the nearest-neighbour distance d: the energy per ion pair
# is -M / d (Kittel, Introduction to Solid State Physics, 8th ed., ch. 3; the digits as
# tabulated by Johnson and Templeton, J. Chem. Phys. 34, 2004 (1962)).
@pytest.mark.parametrize('name,vectors,second,d,constant', [
    ('NaCl', FCC, (0.5, 0, 0), 0.5, 1.747565),
    ('CsCl', np.eye(3), (0.5, 0.5, 0.5), np.sqrt(3) / 2, 1.762675),
    ('zinc blende', FCC, (0.25, 0.25, 0.25), np.sqrt(3) / 4, 1.638055),
])
@pytest.mark.jax_range
def test_madelung_constants_of_ionic_crystals(name, vectors, second, d, constant):
  side = 5.0  # bohr; the constant does not depend on it.
  cell = lattice.make_lattice(side * vectors)
  energy = ewald.madelung(cell, side * np.array([(0, 0, 0), second]), PAIR)
  assert -energy * side * d == pytest.approx(constant, abs=2e-6), name


# One electron per primitive cell in a uniform neutralising background (the Wigner
# crystal): energy per electron -c / r_s, c = 0.880059 (sc), 0.895929 (bcc), 0.895873 (fcc)
# (Coldwell-Horsfall and Maradudin, J. Math. Phys. 1, 395 (1960)); for sc this is the
# electron's Madelung self-energy v_M / 2 with v_M = -2.837297 / L (Fraser et al., Phys.
# Rev. B 53, 1814 (1996)).
@pytest.mark.parametrize('cell,constant', [('sc', 0.880059), ('bcc', 0.895929),
                                           ('fcc', 0.895873)])
@pytest.mark.jax_range
def test_one_electron_in_a_cell_gives_the_wigner_crystal_constant(cell, constant):
  rs = 2.0
  box = lattice.electron_gas(rs, cell, 1)
  energy = ewald.make_ewald(box, 1, 0)(jnp.array([0.3, -0.2, 0.7]), jnp.zeros((0, 3)),
                                       jnp.zeros((0,)))
  assert float(energy) * rs == pytest.approx(-constant, abs=2e-6)
  if cell == 'sc':
    assert float(energy) == pytest.approx(-2.837297 / 2 / box.vectors[0, 0], abs=2e-6)


def _configuration(seed: int, n_electrons: int, cell: lattice.Lattice):
  rng = np.random.default_rng(seed)
  x = (rng.uniform(size=(n_electrons, 3)) @ cell.vectors).reshape(-1)
  return jnp.asarray(x)


# A skewed triclinic cell with two nuclei (Z = 3, 1) and four electrons: neutral.
SKEWED = lattice.make_lattice([[4.0, 0.3, -0.2], [0.8, 3.6, 0.4], [-0.5, 0.7, 4.4]])
ATOMS = np.array([[0.1, 0.2, 0.3], [2.0, 1.9, 2.2]])
CHARGES = np.array([3.0, 1.0])


def test_the_sum_does_not_depend_on_the_splitting_parameter():
  x = _configuration(0, 4, SKEWED)
  energies = [float(ewald.make_ewald(SKEWED, 4, 2, setup=ewald.setup_at(SKEWED, a, 1e-12))(
      x, jnp.asarray(ATOMS), jnp.asarray(CHARGES))) for a in (0.3, 0.7, 1.5)]
  assert np.ptp(energies) < 1e-9, energies


def test_invariance_under_translation_permutation_and_lattice_shifts():
  energy = ewald.make_ewald(SKEWED, 4, 2)
  x = _configuration(1, 4, SKEWED)
  atoms, charges = jnp.asarray(ATOMS), jnp.asarray(CHARGES)
  e0 = float(energy(x, atoms, charges))
  shift = jnp.array([0.37, -1.1, 2.3])  # Any common translation of all particles.
  e_shift = energy((x.reshape(-1, 3) + shift).reshape(-1), atoms + shift, charges)
  lattice_moves = jnp.asarray(np.array([[1, 0, 0], [0, -2, 1], [3, 1, -1], [0, 0, 0]])
                              @ SKEWED.vectors)  # Each electron by its own lattice vector.
  e_images = energy((x.reshape(-1, 3) + lattice_moves).reshape(-1), atoms, charges)
  e_permuted = energy(x.reshape(-1, 3)[::-1].reshape(-1), atoms[::-1], charges[::-1])
  np.testing.assert_allclose([e_shift, e_images, e_permuted], e0, atol=1e-10)


def test_a_supercell_of_two_cells_has_twice_the_energy():
  """The same periodic arrangement described by a cell or by a 1 x 1 x 2 supercell (the
  particles copied to the second cell): the supercell's energy is twice the cell's."""
  x = _configuration(2, 4, SKEWED)
  e_cell = float(ewald.make_ewald(SKEWED, 4, 2)(x, jnp.asarray(ATOMS), jnp.asarray(CHARGES)))
  double, matrix = lattice.supercell(SKEWED, (1, 1, 2))
  _, atoms = lattice.replicate(SKEWED, matrix, ('Li', 'H'), ATOMS)
  _, electrons = lattice.replicate(SKEWED, matrix, ('e',) * 4, np.asarray(x).reshape(-1, 3))
  e_double = float(ewald.make_ewald(double, 8, 4)(jnp.asarray(electrons.reshape(-1)),
                                                   jnp.asarray(atoms), jnp.asarray(np.tile(CHARGES, 2))))
  assert e_double == pytest.approx(2 * e_cell, abs=1e-9)


@pytest.mark.jax_range
def test_float32_agrees_with_float64_to_its_tolerance():
  cell = lattice.electron_gas(1.0, 'sc', 14)
  x = _configuration(3, 14, cell)
  none = (jnp.zeros((0, 3)), jnp.zeros((0,)))
  e64 = float(ewald.make_ewald(cell, 14, 0, 'float64')(x, *none))
  e32 = float(ewald.make_ewald(cell, 14, 0, 'float32')(x.astype(jnp.float32),
                                                        *(a.astype(jnp.float32) for a in none)))
  # float32 rounding of terms of order one, summed over ~100 pairs, ~1e-5 relative.
  assert e32 == pytest.approx(e64, rel=2e-5, abs=2e-5)


def test_the_chosen_cut_offs_are_far_smaller_than_a_fixed_box_of_cells():
  """For the 14-electron gas the real-space sum takes 27 images per pair (a cube's
  neighbours after the minimum image), not the 11^3 = 1331 of a fixed box."""
  setup = ewald.choose(lattice.electron_gas(1.0, 'sc', 14), 14, ewald.TOLERANCE['float32'])
  assert len(setup.real_vectors) <= 27
  assert len(setup.recip_vectors) < 400


def _twist_averaged_hartree_fock(n_up: int, rs: float, grid: int) -> float:
  """The Hartree-Fock energy per electron (Ha) of the paramagnetic electron gas of 2 n_up
  electrons at r_s in a simple cubic cell, averaged over the shifted grid^3 twists (at each,
  the n_up lowest plane waves per spin, periodic_hartree_fock.electron_gas_energy)."""
  cell = lattice.electron_gas(rs, 'sc', 2 * n_up)
  with jax.enable_x64(True):
    self_energy = ewald.madelung(cell, np.zeros((1, 3)), np.ones(1))
  twists = (np.array(list(np.ndindex(grid, grid, grid))) + 0.5) / grid
  return float(np.mean([periodic_hartree_fock.electron_gas_energy(
      cell, n_up, n_up, twist, self_energy) for twist in twists])) / (2 * n_up)


def test_twist_averaged_hartree_fock_energy_of_the_electron_gas_reaches_the_limit():
  """The twist-averaged Hartree-Fock energy per electron of the gas at r_s = 1 (6^3 twists)
  approaches the thermodynamic limit 3 k_F^2 / 10 - 3 k_F / (4 pi) = 0.646785 Ha as the
  closed-shell N grows from 14 to 246: its error shrinks at every N, and E_inf + a N^(-2/3)
  fitted over N >= 38 extrapolates to the limit within 3 mHa (five times the fit's rms
  residual, ~0.6 mHa, left by shell structure), where N = 14 is 60 mHa off. At N = 14
  itself twist averaging does not reach the limit: it removes the shells' kinetic error,
  not the finite-size error of the exchange energy."""
  k_f = (9 * np.pi / 4) ** (1 / 3)
  limit = 0.3 * k_f ** 2 - 0.75 / np.pi * k_f
  n = np.array([14, 38, 54, 66, 114, 162, 246])
  errors = np.array([_twist_averaged_hartree_fock(m // 2, 1.0, 6) for m in n]) - limit
  assert np.all(np.diff(np.abs(errors)) < 0), errors
  assert abs(errors[0]) > 0.04, errors
  design = np.stack([np.ones(len(n) - 1), n[1:] ** (-2 / 3)], axis=1)
  fit, *_ = np.linalg.lstsq(design, errors[1:], rcond=None)
  assert abs(fit[0]) < 3e-3, (fit, errors)


# Slabs: periodic along a1 and a2 only (lattice.dims = 2), the two-dimensional Ewald sum.
def _slab(a1, a2, c=10.0):
  return lattice.make_lattice(np.array([a1, a2, (0.0, 0.0, c)], np.float64), dims=2)


@pytest.mark.parametrize('cell', ['primitive', 'square'])
def test_madelung_constant_of_the_square_ionic_layer(cell):
  """Alternating charges on a square net of spacing a (a checkerboard) have the
  two-dimensional Madelung constant 1.6155426267 (energy per ion pair -M / a; Borwein et
  al., Lattice Sums Then and Now, Cambridge 2013, the value of b_2(1)). The primitive cell
  (two ions) and the square cell of four ions give the same energy per pair, and the
  layer's distance from the cell's origin along the normal changes nothing."""
  a = 1.7
  if cell == 'primitive':
    slab = _slab((a, -a, 0.0), (a, a, 0.0))
    positions, charges = np.array([(0, 0, 0.3), (a, 0, 0.3)]), PAIR
  else:
    slab = _slab((2 * a, 0.0, 0.0), (0.0, 2 * a, 0.0))
    positions = np.array([(0, 0, -2.0), (a, 0, -2.0), (0, a, -2.0), (a, a, -2.0)])
    charges = np.array([1.0, -1.0, -1.0, 1.0])
  pairs = len(charges) / 2
  energy = ewald.madelung(slab, positions, charges)
  assert -energy * a / pairs == pytest.approx(1.6155426267, abs=2e-8)


def _neutral_layers(seed: int, dipole: bool) -> tuple:
  """Charges of zero sum at random in-plane positions and heights within 1.5 bohr of the
  origin; without `dipole`, each charge has a twin at the mirror height, so that the
  dipole moment along the normal, sum q z, is zero."""
  rng = np.random.default_rng(seed)
  q = np.array([1.0, -1.0, 2.0, -2.0])
  r = np.concatenate([rng.uniform(0, 3.2, (4, 2)), rng.uniform(-1.5, 1.5, (4, 1))], axis=1)
  if not dipole:
    twin = r.copy()
    twin[:, :2] = rng.uniform(0, 3.2, (4, 2))
    twin[:, 2] *= -1
    q, r = np.concatenate([q, q]), np.concatenate([r, twin])
  return r, q


@pytest.mark.parametrize('dipole', [False, True])
def test_slab_sum_is_the_limit_of_the_bulk_sum_with_vacuum(dipole):
  """The bulk (3-D) Ewald sum of the same cell with 40 bohr of vacuum along the normal
  differs from the slab's (2-D) only by the replicas' interaction, which for neutral layers
  is the dipole term 2 pi M_z^2 / V (Yeh and Berkowitz, J. Chem. Phys. 111, 3155 (1999))
  plus terms that fall as exp(-2 pi c / L): an independent path to the slab's energy."""
  r, q = _neutral_layers(3, dipole)
  a1, a2 = (3.2, 0.0, 0.0), (0.9, 3.0, 0.0)
  slab = _slab(a1, a2)
  bulk = lattice.make_lattice(np.array([a1, a2, (0.0, 0.0, 40.0)]))
  m_z = float(np.sum(q * r[:, 2]))
  assert (abs(m_z) > 0.1) == dipole
  e_bulk = ewald.madelung(bulk, r, q) + 2 * np.pi * m_z**2 / bulk.volume
  assert ewald.madelung(slab, r, q) == pytest.approx(e_bulk, abs=1e-9)


def test_slab_sum_does_not_depend_on_alpha_or_rigid_moves():
  """The slab's energy is independent of the splitting parameter, of in-plane lattice
  translations of single particles, of a rigid shift of all of them (also along the
  normal) and of their order; electrons (x) and nuclei (atoms) enter alike."""
  r, q = _neutral_layers(5, True)
  slab = _slab((3.2, 0.0, 0.0), (0.9, 3.0, 0.0))
  reference = ewald.madelung(slab, r, q)
  for alpha in (0.4, 0.9, 2.0):
    assert ewald.madelung(slab, r, q, alpha=alpha) == pytest.approx(reference, abs=1e-10)
  moved = r + np.array([0.3, -1.1, 7.0])
  moved[1] += 2 * slab.vectors[0] - slab.vectors[1]
  order = np.random.default_rng(0).permutation(len(q))
  assert ewald.madelung(slab, moved[order], q[order]) == pytest.approx(reference, abs=1e-10)
  electrons = q < 0  # Two charge -1 particles as electrons, the rest as nuclei.
  electrons[np.flatnonzero(q == -2.0)] = False
  energy = ewald.make_ewald(slab, int(electrons.sum()), int((~electrons).sum()))
  value = energy(jnp.asarray(r[electrons].ravel()), jnp.asarray(r[~electrons]),
                 jnp.asarray(q[~electrons]))
  assert float(value) == pytest.approx(reference, abs=1e-10)


@pytest.mark.jax_range
def test_slab_sum_of_nuclei_equals_pyscf():
  """pyscf.pbc's own two-dimensional Ewald sum (cell.dimension = 2) of a cell's nuclei, at
  our splitting parameter (their charges do not cancel, so the sum depends on it), equals
  ours; and in float32 ours is within its tolerance of float64."""
  from pyscf.pbc import gto
  a = np.array([[3.0, 0.0, 0.0], [1.0, 2.8, 0.0], [0.0, 0.0, 12.0]])
  cell = gto.Cell(atom='H 0 0 0; He 1.1 0.7 0.4; Li 2.0 1.9 -0.8', a=a, unit='bohr',
                  basis='sto-3g', spin=0, dimension=2, verbose=0)
  cell.build()
  slab = lattice.make_lattice(a, dims=2)
  setup = ewald.choose_slab(slab, 3, ewald.TOLERANCE['float64'])
  ours = ewald.make_ewald(slab, 0, 3, setup=setup)(
      jnp.zeros((0,)), jnp.asarray(cell.atom_coords()), jnp.asarray(cell.atom_charges(), float))
  theirs = cell.ewald(ew_eta=setup.alpha, ew_cut=40.0)
  assert float(ours) == pytest.approx(theirs, abs=1e-8)
  single = ewald.make_ewald(slab, 0, 3, 'float32', setup)(
      jnp.zeros((0,), jnp.float32), jnp.asarray(cell.atom_coords(), jnp.float32),
      jnp.asarray(cell.atom_charges(), jnp.float32))
  assert float(single) == pytest.approx(theirs, abs=1e-5)


def test_a_slab_lies_in_the_xy_plane():
  with pytest.raises(InputError, match='along z'):
    lattice.make_lattice([[3.0, 0, 0], [0, 3.0, 0], [0.5, 0, 10.0]], dims=2)


# Chains: periodic along a1 only (lattice.dims = 1), the one-dimensional Ewald sum.
def _chain(a, extent=10.0):
  return lattice.make_lattice(np.diag([a, extent, extent]), dims=1)


@pytest.mark.parametrize('ions', [2, 4])
@pytest.mark.jax_range
def test_madelung_constant_of_the_alternating_ionic_line(ions):
  """Alternating charges +-1 spaced s on a line have the one-dimensional Madelung constant
  2 ln 2 (the energy per ion pair -2 ln 2 / s, from 1 - 1/2 + 1/3 - ... = ln 2). The cell
  of two ions and that of four give the same energy per pair, and where the line lies
  across the cell changes nothing."""
  s = 1.7
  positions = np.array([(i * s, 0.4, -1.3) for i in range(ions)])
  charges = np.array([(-1.0) ** i for i in range(ions)])
  energy = ewald.madelung(_chain(ions * s), positions, charges)
  assert -energy * s / (ions / 2) == pytest.approx(2 * np.log(2), abs=1e-10)


def _neutral_cell(seed: int) -> tuple:
  """Charges of zero sum at random positions, spread across the chain too."""
  rng = np.random.default_rng(seed)
  q = np.array([1.0, 2.0, -1.0, -1.5, -0.5])
  return rng.normal(size=(5, 3)) * np.array([1.5, 1.0, 1.0]), q


def test_chain_sum_is_the_limit_of_the_direct_sum_over_images():
  """The energy per cell as the plain sum of each pair's interaction over the images
  n = -N .. N along the chain (no Ewald splitting): a neutral cell's interaction with a
  far image falls as 1 / n^3, so the sum converges, its tail as 1 / N^2. At N = 2000 and
  8000 it approaches ours, the tail shrinking sixteenfold, within 1e-8 Ha."""
  a = 3.0
  r, q = _neutral_cell(0)

  def direct(n_max):
    n = np.arange(-n_max, n_max + 1)
    d = r[:, None, None] - r[None, :, None] + n[None, None, :, None] * np.array([a, 0, 0])
    dist = np.linalg.norm(d, axis=-1)
    dist[np.arange(len(q)), np.arange(len(q)), n_max] = np.inf  # Not a charge with itself.
    return 0.5 * np.sum(q[:, None, None] * q[None, :, None] / dist)

  ours = ewald.madelung(_chain(a), r, q)
  coarse, fine = abs(direct(2000) - ours), abs(direct(8000) - ours)
  assert fine < 1e-8 and 10 < coarse / fine < 25, (coarse, fine)


def test_chain_sum_does_not_depend_on_alpha_or_rigid_motions():
  """The chain's energy is independent of the splitting parameter (from sums with no
  reciprocal terms to ones with many), of lattice translations of single particles, of a
  rigid shift of all of them in any direction, of a rotation of all of them about the axis,
  and of their order; electrons (x) and nuclei (atoms) enter alike."""
  a = 3.0
  chain = _chain(a)
  r, q = _neutral_cell(1)
  reference = ewald.madelung(chain, r, q)
  terms = [len(ewald.chain_setup_at(chain, alpha, 1e-12).wavenumbers)
           for alpha in (0.1, 0.6, 2.0, 6.0)]
  assert terms[0] == 0 and terms[-1] > 20, terms  # From none to many reciprocal terms.
  for alpha in (0.1, 0.6, 2.0, 6.0):
    assert ewald.madelung(chain, r, q, alpha=alpha) == pytest.approx(reference, abs=1e-10)
  angle = 0.7
  rotation = np.array([[1, 0, 0], [0, np.cos(angle), -np.sin(angle)],
                       [0, np.sin(angle), np.cos(angle)]])
  moved = r @ rotation.T + np.array([0.3, -1.1, 7.0])
  moved[1, 0] -= 2 * a
  order = np.random.default_rng(0).permutation(len(q))
  assert ewald.madelung(chain, moved[order], q[order]) == pytest.approx(reference, abs=1e-10)
  electrons = np.array([False, False, True, False, False])
  energy = ewald.make_ewald(chain, 1, 4)
  value = energy(jnp.asarray(r[electrons].ravel()), jnp.asarray(r[~electrons]),
                 jnp.asarray(q[~electrons]))
  assert float(value) == pytest.approx(reference, abs=1e-10)


def test_chain_reciprocal_terms_equal_their_integral():
  """Each reciprocal term's K(k, rho) = int_0^alpha (2 / t) exp(-rho^2 t^2 - k^2 / 4 t^2) dt,
  by our fixed Gauss-Legendre nodes, against scipy's adaptive quadrature, from on the axis
  to far across it; and float32's whole sum within its tolerance of float64's."""
  from scipy import integrate
  a = 3.0
  setup = ewald.chain_setup_at(_chain(a), 2.0, 1e-12)
  ours = np.exp(-np.outer(np.array([0.0, 0.3, 1.0, 3.0, 10.0, 25.0]) ** 2, setup.nodes_t2)
                ) @ setup.node_weights * a / 2
  for i, rho in enumerate((0.0, 0.3, 1.0, 3.0, 10.0, 25.0)):
    for m, k in enumerate(setup.wavenumbers):
      exact, _ = integrate.quad(lambda t: 2 / t * np.exp(-rho**2 * t**2 - k**2 / (4 * t**2)),
                                0, setup.alpha, limit=500, epsabs=1e-16, epsrel=1e-13)
      assert ours[i, m] == pytest.approx(exact, abs=1e-13)
  r, q = _neutral_cell(2)
  chain = _chain(a)
  double = ewald.madelung(chain, r, q)
  single = ewald.make_ewald(chain, 0, 5, 'float32')(
      jnp.zeros((0,), jnp.float32), jnp.asarray(r, jnp.float32), jnp.asarray(q, jnp.float32))
  assert float(single) == pytest.approx(double, abs=1e-5)


def test_a_chain_lies_along_x():
  with pytest.raises(InputError, match='a1 along x'):
    lattice.make_lattice([[3.0, 0.2, 0], [0, 3.0, 0], [0, 0, 10.0]], dims=1)
  with pytest.raises(InputError, match='a1 along x'):
    lattice.make_lattice([[3.0, 0, 0], [0.5, 3.0, 0], [0, 0, 10.0]], dims=1)


@pytest.mark.parametrize('periodic', ['slab', 'chain'])
def test_a_charged_slab_or_chain_is_refused(periodic):
  """A charged layer or line has no finite energy per cell (its potential grows without
  bound away from it), so a non-neutral set is refused rather than given a value that
  depends on the splitting parameter; the same charges in a bulk cell take the uniform
  background and have one."""
  cell = _slab((3.0, 0.0, 0.0), (0.0, 3.0, 0.0)) if periodic == 'slab' else _chain(3.0)
  r, q = np.array([(0.0, 0.0, 0.0), (1.5, 0.0, 0.0)]), np.array([1.0, 2.0])
  with pytest.raises(ValueError, match='must be neutral'):
    ewald.madelung(cell, r, q)
  bulk = lattice.make_lattice(np.diag([3.0, 3.0, 10.0]))
  assert ewald.madelung(bulk, r, q, alpha=0.7) == pytest.approx(ewald.madelung(bulk, r, q),
                                                                abs=1e-9)
