"""Hartree-Fock orbitals of crystals: the SCF is pyscf.pbc's, the orbitals are evaluated in JAX.

The simulation cell (the supercell the electrons live in) is handed over as plain arrays:
lattice vectors (3, 3) bohr, one per row, atom symbols and positions (bohr). pyscf.pbc runs a
Hartree-Fock of that cell at one k-point (its twist; the Gamma point by default) with Gaussian
density fitting and the 'ewald' treatment of the exchange divergence, so that its energy per
simulation cell is the expectation of the Coulomb energy summed by Ewald with the Madelung
self-term. At the Gamma point the orbitals are real and lattice-periodic; at a twist k_s of the
simulation cell they are complex Bloch functions, phi(r + L) = exp(i k_s . L) phi(r) for its
lattice vectors L. The cheaper route for a supercell S of a primitive cell is k-point HF of the
primitive cell on the k-points that fold onto the supercell's Gamma point (or its twist),
unfolded (hartree_fock_kpoints): the same orbitals and energy
(tests/test_periodic_hartree_fock.py).

Semi-local ECPs (ecp.py evaluates them in the local energy) or all-electron bases give orbitals
whose determinant has pyscf's energy under our Hamiltonian; GTH pseudopotentials (`pseudo`)
are pyscf's separable form, which the local energy does not evaluate: orbitals only.

On the device, each periodic basis function is the molecular Gaussian (hartree_fock.py, the one
home of the closed form) summed over lattice images with the Bloch phase of the twist k_s:
  chi_mu(r) = sum_T exp(i k_s . T) phi_mu(r - R_mu - T),
the displacement r - R_mu first wrapped into the cell's fractional range [-1/2, 1/2)^3, the
images T a constant set per shell: every lattice vector within that shell's cut-off radius
(where its functions fall below `tol`) plus the wrapped displacement's largest length. The
values equal pyscf's `cell.pbc_eval_gto` at that k-point (tests/test_periodic_hartree_fock.py).
"""

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import ewald
from ferminet_fast.physics import hartree_fock as molecular
from ferminet_fast.physics import lattice as lattice_lib


class PeriodicHartreeFock(NamedTuple):
  """Occupied HF orbitals of a simulation cell at its twist: mo(r) = chi(r) @ coeffs[spin]."""
  shells: tuple  # molecular.Shell per pyscf shell of the cell, pyscf's AO order.
  images: tuple  # (n_img, 3) lattice translations (bohr) summed over, one array per shell.
  lattice: np.ndarray  # (3, 3) lattice vectors (rows), bohr.
  # ((n_ao, n_up), (n_ao, n_down)) orbital coefficients: real at the Gamma point, complex at
  # a twist.
  coeffs: tuple
  energy: float  # Ha per simulation cell, pyscf's HF total energy (exxdiv 'ewald').
  cell: object  # The pyscf.pbc.gto.Cell (bohr), for checks against pyscf itself.
  kpt: np.ndarray = np.zeros(3)  # (3,) 1/bohr, the twist k_s of the simulation cell.
  dims: int = 3  # Periodic dimensions: 3, 2 for a slab (images in the xy plane), 1 for a chain.

  @property
  def twisted(self) -> bool:
    return bool(np.any(self.kpt))


def make_cell(lattice, symbols: Sequence[str], positions, basis, *, ecp=None, pseudo=None,
              spin: int = 0, charge: int = 0, precision: float = 1e-8, dims: int = 3):
  """A built pyscf.pbc.gto.Cell: lattice (3, 3) rows in bohr, positions (n_atom, 3) bohr,
  basis (name or {symbol: name}), optional ECP (semi-local, as ecp.py evaluates) or GTH
  pseudopotential, spin = n_up - n_down, periodic in `dims` dimensions (2: a slab in the xy
  plane; 1: a chain along x, whose open directions pyscf.pbc takes as infinite vacuum, the
  only treatment it has for one dimension). InputError for a bad lattice or unknown basis."""
  from pyscf.pbc import gto
  lattice = lattice_lib.make_lattice(lattice, 'lattice', dims).vectors
  positions = np.asarray(positions, np.float64).reshape(-1, 3)
  if len(symbols) != len(positions):
    raise InputError(f'{len(symbols)} atom symbols for {len(positions)} positions')
  try:
    cell = gto.Cell(a=lattice, atom=[(s, tuple(p)) for s, p in zip(symbols, positions)],
                    unit='bohr', basis=basis, ecp=ecp or {}, pseudo=pseudo, spin=spin,
                    charge=charge, precision=precision, dimension=dims, verbose=0)
    if dims == 1:
      cell.low_dim_ft_type = 'inf_vacuum'
    return cell.build()
  except (RuntimeError, KeyError, ValueError) as e:  # pyscf's errors for unknown names.
    raise InputError(f'pyscf cannot build the cell with basis {basis!r}, ecp {ecp!r}, pseudo '
                     f'{pseudo!r}: {type(e).__name__}: {e}') from None


def cutoff_radius(shell: molecular.Shell, tol: float) -> float:
  """Radius (bohr) beyond which every function of `shell` is below `tol` in magnitude, from
  the bound r^l sum_p |c_p| exp(-a_p r^2) max_m sum_k |cart2sph[k, m]| (each Cartesian monomial
  is at most r^l in magnitude)."""
  l = int(shell.powers[0].sum())
  r = np.linspace(0.0, 20.0 / np.sqrt(shell.exps.min()), 20001)[1:]
  angular = np.abs(shell.cart2sph).sum(axis=0).max()
  bound = angular * r ** l * (np.exp(-np.outer(r ** 2, shell.exps)) @ np.abs(shell.coeffs)
                              ).max(axis=1)
  above = np.nonzero(bound >= tol)[0]
  return float(r[above[-1] + 1]) if len(above) else float(r[0])


def lattice_images(lattice: np.ndarray, radius: float, dims: int = 3) -> np.ndarray:
  """(n_img, 3) lattice vectors T (bohr) that a Gaussian of cut-off `radius`, centred within
  half a cell (fractional [-1/2, 1/2) along each periodic direction) of a point, can reach:
  |T| < radius + the largest such displacement; a slab's (dims = 2) in its plane only, a
  chain's (dims = 1) along its axis only.
  Sorted by length, the origin first."""
  mask = lattice_lib.periodic_mask(dims)
  reach = radius + lattice_lib.half_diagonal(lattice_lib.make_lattice(lattice, 'lattice', dims))
  # |n_i| = |T . inv(lattice)[:, i]| <= |T| |inv(lattice)[:, i]|.
  n_max = np.ceil(reach * np.linalg.norm(np.linalg.inv(lattice), axis=0)).astype(int)
  n_max = n_max * mask.astype(int)
  grid = np.stack(np.meshgrid(*[np.arange(-m, m + 1) for m in n_max], indexing='ij'), -1)
  t = grid.reshape(-1, 3) @ lattice
  t = t[np.linalg.norm(t, axis=1) < reach]
  return t[np.argsort(np.linalg.norm(t, axis=1), kind='stable')]


def image_sets(shells: tuple, lattice: np.ndarray, tol: float, dims: int = 3) -> tuple:
  """The image translations of each shell (lattice_images at its cut-off_radius)."""
  return tuple(lattice_images(lattice, cutoff_radius(s, tol), dims) for s in shells)


def _real_gamma(c: np.ndarray) -> np.ndarray:
  """Gamma-point orbital coefficients as real numbers (pyscf may carry a zero imaginary part)."""
  c = np.asarray(c)
  if np.iscomplexobj(c):
    if np.abs(c.imag).max() > 1e-8 * max(np.abs(c.real).max(), 1.0):
      raise ValueError('Gamma-point orbitals have an imaginary part')
    c = c.real
  return c


def _auxbasis(cell):
  """The density-fitting basis: pyscf's choice per element (a JK-fitting set, or even-tempered
  functions generated from the orbital basis where no set covers the element; pyscf.pbc's
  own default stops with an error for e.g. Li in 6-31G)."""
  from pyscf import df
  return df.make_auxbasis(cell)


def hartree_fock(lattice, symbols: Sequence[str], positions, basis, *, n_up: int,
                 n_down: int, restricted: bool = True, ecp=None, pseudo=None,
                 tol: float = 1e-8, precision: float = 1e-8, kpt=None,
                 dims: int = 3) -> PeriodicHartreeFock:
  """ROHF (UHF unless `restricted`) of the simulation cell with n_up, n_down electrons at the
  Gamma point, or at the twist `kpt` (3,) 1/bohr (complex orbitals); Gaussian density
  fitting, exchange divergence by 'ewald'; periodic in `dims` dimensions (2: a slab in the
  xy plane, 1: a chain along x). `tol` sets the image sums of the on-device orbitals,
  `precision` pyscf's integral screening."""
  from pyscf.pbc import scf
  cell = make_cell(lattice, symbols, positions, basis, ecp=ecp, pseudo=pseudo,
                   spin=n_up - n_down, charge=0, precision=precision, dims=dims)
  n_elec = int(round(cell.nelectron))
  if n_up + n_down != n_elec:
    cell = make_cell(lattice, symbols, positions, basis, ecp=ecp, pseudo=pseudo,
                     spin=n_up - n_down, charge=n_elec - n_up - n_down, precision=precision,
                     dims=dims)
  kpt = np.zeros(3) if kpt is None else np.asarray(kpt, np.float64)
  mf = (scf.ROHF if restricted else scf.UHF)(cell, kpt=kpt).density_fit(
      auxbasis=_auxbasis(cell))
  mf.exxdiv = 'ewald'
  energy = molecular.scf_energy(mf)
  if not mf.converged:
    raise RuntimeError(f'pyscf.pbc SCF did not converge (last energy {energy} Ha)')
  coeff = mf.mo_coeff if np.ndim(mf.mo_coeff) == 3 else (mf.mo_coeff, mf.mo_coeff)
  occ = mf.mo_occ if np.ndim(mf.mo_occ) == 2 else (mf.mo_occ > 0, mf.mo_occ > 1)
  as_kind = (lambda c: np.asarray(c, np.complex128)) if np.any(kpt) else _real_gamma
  coeffs = tuple(as_kind(c)[:, np.asarray(o) > 0][:, :n]
                 for c, o, n in zip(coeff, occ, (n_up, n_down)))
  shells = molecular.shells_of(cell)
  lattice = np.asarray(cell.lattice_vectors(), np.float64)
  return PeriodicHartreeFock(shells, image_sets(shells, lattice, tol, dims), lattice, coeffs,
                             energy, cell, kpt, dims)


class CellData(NamedTuple):
  """What of a PeriodicHartreeFock's basis changes with the size of its cell, as data: one
  cell's, or stacked over a scan of the cell (`orbitals_over_cells`)."""
  lattice: Any  # (3, 3) bohr, the lattice vectors (rows).
  centres: Any  # (n_shells, 3) bohr, the shells' centres.
  images: tuple  # (n_img, 3) bohr per shell: the lattice translations summed over.
  kpt: Any  # (3,) 1/bohr, the twist.


def cell_data(hf: PeriodicHartreeFock) -> CellData:
  return CellData(hf.lattice, np.asarray([s.center for s in hf.shells]), hf.images, hf.kpt)


def atomic_orbitals(hf: PeriodicHartreeFock, r: jnp.ndarray) -> jnp.ndarray:
  """Periodic basis functions at points r (n, 3), bohr -> (n, n_ao), pyscf's AO order, at
  the twist hf.kpt (complex there); any r (the sums are lattice-periodic, or Bloch at a twist:
  no wrapping needed by the caller)."""
  return atomic_orbitals_in(hf.shells, hf.dims, hf.twisted, cell_data(hf), r)


def atomic_orbitals_in(shells: tuple, dims: int, twisted: bool, cell: CellData,
                       r: jnp.ndarray) -> jnp.ndarray:
  """`atomic_orbitals` of the basis `shells` (their centres and images, the lattice and
  twist given by `cell`, which may be traced data), periodic in `dims` dimensions, complex
  if `twisted`.

  r - R_mu = d + T0 with d in the home cell's fractional range and T0 a lattice vector, so
  chi_mu(r) = exp(i k_s . T0) sum_t exp(i k_s . t) phi_mu(d - t) over the shell's images t."""
  lattice = jnp.asarray(cell.lattice, r.dtype)
  inverse = jnp.linalg.inv(lattice)
  kpt = jnp.asarray(cell.kpt, r.dtype)
  # A slab's periodic directions are in its plane; a chain's, along it.
  mask = jnp.asarray(lattice_lib.periodic_mask(dims), r.dtype)
  out = []
  for i, (s, t) in enumerate(zip(shells, cell.images)):
    t = jnp.asarray(t, r.dtype)
    f = (r - jnp.asarray(cell.centres[i], r.dtype)) @ inverse
    home = jnp.round(f) * mask
    d = (f - home) @ lattice  # (n, 3), fractional in [-1/2, 1/2] where periodic.
    v = molecular.shell_values(s, (d[:, None, :] - t[None]).reshape(-1, 3))
    v = v.reshape(r.shape[0], t.shape[0], -1)  # (n, n_img, n_fn)
    if not twisted:
      out.append(v.sum(axis=1))
      continue
    phase = (home @ lattice) @ kpt  # (n,) k_s . T0
    image_phase = t @ kpt  # (n_img,)
    bloch = jax.lax.complex(jnp.cos(image_phase), jnp.sin(image_phase))
    out.append(jnp.einsum('nif,i->nf', v, bloch)
               * jax.lax.complex(jnp.cos(phase), jnp.sin(phase))[:, None])
  return jnp.concatenate(out, axis=-1)


def orbitals_over_cells(hfs: list, n_up: int, n_down: int) -> tuple:
  """(orbitals(x (3N,), data) -> [(n_s, n_s) per spin with electrons], data: (CellData,
  coefficients per spin) stacked over the cells (G, ...)): the HF of one crystal in G sizes of
  its cell (a scan of the cell: the same basis, its centres and lattice scaled) as one
  function of data, for jax.vmap over the cells. Each cell sums its shells over the same
  lattice translations in units of its own vectors (those of the smallest cell, which needs
  the most; in larger cells the farthest are negligible), and each orbital's sign is aligned
  with the previous cell's (hartree_fock.aligned_signs, as for molecules)."""
  smallest = hfs[int(np.argmin([abs(np.linalg.det(hf.lattice)) for hf in hfs]))]
  steps = [np.round(t @ np.linalg.inv(smallest.lattice)) for t in smallest.images]
  cells = [cell_data(hf)._replace(images=tuple(n @ hf.lattice for n in steps)) for hf in hfs]
  blocks = [(lo, hi) for lo, hi in ((0, n_up), (n_up, n_up + n_down)) if hi > lo]
  coeffs = molecular.aligned_signs([hf.coeffs[:len(blocks)] for hf in hfs])
  data = (jax.tree.map(lambda *a: np.stack(a), *cells),
          tuple(np.stack([c[spin] for c in coeffs]) for spin in range(len(blocks))))
  first = hfs[0]

  def orbitals(x, one):
    cell, cs = one
    ao = atomic_orbitals_in(first.shells, first.dims, first.twisted, cell, x.reshape(-1, 3))
    return [ao[lo:hi] @ c.astype(ao.dtype) for (lo, hi), c in zip(blocks, cs)]

  return orbitals, data


def make_orbitals(hf: PeriodicHartreeFock, n_up: int, n_down: int) -> Callable:
  """x (3N,) -> [(n_s, n_s) per spin with electrons]: occupied orbital j at electron i of that
  spin, for one configuration (vmap for walkers); as molecular.make_orbitals."""
  coeffs = dict(zip(('up', 'down'), hf.coeffs))
  blocks = [(lo, hi, coeffs[name]) for name, lo, hi in
            (('up', 0, n_up), ('down', n_up, n_up + n_down)) if hi > lo]

  def orbitals(x):
    ao = atomic_orbitals(hf, x.reshape(-1, 3))  # (N, n_ao)
    return [ao[lo:hi] @ jnp.asarray(c, ao.dtype) for lo, hi, c in blocks]

  return orbitals


def make_slater(hf: PeriodicHartreeFock, n_up: int, n_down: int) -> Callable:
  """x (3N,) -> (sign, log|psi|) of the HF Slater determinant (one per spin, multiplied),
  for one configuration: the wavefunction whose Ewald energy is pyscf's HF energy."""
  orbitals = make_orbitals(hf, n_up, n_down)

  def slater(x):
    signs, logs = zip(*[jnp.linalg.slogdet(m) for m in orbitals(x)])
    return jnp.prod(jnp.stack(signs)), jnp.sum(jnp.stack(logs))

  return slater


def supercell_matrix(matrix) -> np.ndarray:
  """(3, 3) integer matrix S (supercell lattice = S @ primitive lattice) from S itself or from
  a k-mesh (3,) (S = diag(mesh)); InputError unless S is integer with det S > 0."""
  m = np.asarray(matrix)
  m = np.diag(m) if m.shape == (3,) else m
  if m.shape != (3, 3) or not np.all(m == np.round(m)) or np.linalg.det(m) < 0.5:
    raise InputError(f'supercell: need an integer matrix (3, 3) or mesh (3,) with positive '
                     f'determinant, got {matrix!r}')
  return np.round(m).astype(int)


def cell_translations(matrix) -> np.ndarray:
  """(det S, 3) integer vectors n of the primitive cells inside the supercell S (fractional
  coordinates n @ inv(S) in [0, 1)^3), sorted (C order for a diagonal S)."""
  return lattice_lib.translations(supercell_matrix(matrix))


def folded_kpoints(matrix) -> np.ndarray:
  """(det S, 3) k-points of the primitive cell, in fractions of its reciprocal vectors in
  [0, 1), that fold onto the supercell's Gamma point: m @ inv(S).T modulo 1, m integer."""
  s = supercell_matrix(matrix)
  f = np.mod(cell_translations(s.T) @ np.linalg.inv(s).T, 1.0)
  f = np.unique(np.round(f, 12) % 1.0, axis=0)
  assert len(f) == round(abs(np.linalg.det(s))), (len(f), s)
  return f


def supercell(lattice, symbols: Sequence[str], positions, matrix) -> tuple:
  """(lattice S @ lattice (3, 3), symbols, positions (n_atom det S, 3)) of the supercell S
  (supercell_matrix) of a primitive cell, bohr; atoms ordered cell by cell
  (cell_translations' order), the primitive cell's order within each."""
  primitive, s = lattice_lib.make_lattice(lattice, 'lattice'), supercell_matrix(matrix)
  symbols, positions = lattice_lib.replicate(primitive, s, symbols,
                                             np.asarray(positions, np.float64))
  return s @ primitive.vectors, list(symbols), positions


def _real_span(c: np.ndarray, overlap: np.ndarray, n_occ: int) -> np.ndarray:
  """(n_ao, n_occ) real coefficients spanning the same orbital space as the complex c (n_ao,
  n_occ), orthonormal in `overlap`: the space of Bloch orbitals filled at k and -k alike is
  closed under complex conjugation; ValueError if it is not."""
  w, u = np.linalg.eigh(overlap)
  half, inv_half = (u * np.sqrt(w)) @ u.T, (u / np.sqrt(w)) @ u.T
  x = half @ c  # Orthonormal columns in the Euclidean metric.
  projector = x @ x.conj().T
  if np.abs(projector.imag).max() > 1e-6:
    raise ValueError('the occupied Bloch orbitals are not filled at k and -k alike; no real '
                     'supercell orbitals span them (choose a k-mesh with an insulating filling)')
  p, v = np.linalg.eigh(projector.real)
  return inv_half @ v[:, np.argsort(p)[::-1][:n_occ]]


def _supercell_madelung(mf, energy: float, big) -> float:
  """The KRHF energy per primitive cell with the 'ewald' exchange term of the supercell `big`.
  pyscf takes the Madelung constant of the Monkhorst-Pack mesh it infers from the k-points,
  which is the supercell's only for a diagonal supercell matrix; the term is linear in the
  constant at fixed density (the occupied space does not change), so it is rescaled."""
  from pyscf.pbc import tools
  used = tools.madelung(mf.cell, mf.kpts)
  right = tools.madelung(big, np.zeros((1, 3)))
  if abs(used - right) <= 1e-12 * abs(right):
    return energy
  dm = mf.make_rdm1()
  mf.exxdiv = None
  without = float(mf.energy_tot(dm))
  mf.exxdiv = 'ewald'
  return without + (energy - without) * right / used


def hartree_fock_kpoints(lattice, symbols: Sequence[str], positions, basis, *,
                         kmesh, ecp=None, pseudo=None, tol: float = 1e-8,
                         precision: float = 1e-8, kpt=None) -> PeriodicHartreeFock:
  """Closed-shell KRHF of the primitive cell on the k-points that fold onto the Gamma point of
  the supercell `kmesh` (a mesh (3,) or an integer matrix (3, 3), supercell_matrix), or onto
  its twist `kpt` (3,) 1/bohr, unfolded to that supercell (supercell()): the Bloch orbital n
  at k is sum_{T, mu} exp(i k.T) C_mu,n(k) chi_mu,T(r) in the supercell's basis (atoms copied
  to each T); at the Gamma point a real basis of those orbitals is returned, at a twist the
  Bloch orbitals themselves, orthonormalised; and the energy per supercell (n_k times per
  primitive cell). Same orbitals as the HF of the supercell at that k-point, at a fraction of
  its cost (tests/test_periodic_hartree_fock.py)."""
  from pyscf.pbc import scf
  prim = make_cell(lattice, symbols, positions, basis, ecp=ecp, pseudo=pseudo,
                   precision=precision)
  if prim.nelectron % 2:
    raise InputError('k-point HF here is closed-shell (KRHF): the primitive cell has an odd '
                     f'number of electrons ({prim.nelectron})')
  kpt = np.zeros(3) if kpt is None else np.asarray(kpt, np.float64)
  kpts = folded_kpoints(kmesh) @ prim.reciprocal_vectors() + kpt
  mf = scf.KRHF(prim, kpts).density_fit(auxbasis=_auxbasis(prim))
  mf.exxdiv = 'ewald'
  energy = molecular.scf_energy(mf)
  if not mf.converged:
    raise RuntimeError(f'pyscf.pbc KRHF did not converge (last energy {energy} Ha)')
  big = make_cell(*supercell(prim.lattice_vectors(), symbols, positions, kmesh), basis,
                  ecp=ecp, pseudo=pseudo, precision=precision)
  energy = len(kpts) * _supercell_madelung(mf, energy, big)
  # (n_k, 3) bohr, in the order of supercell()'s copies.
  translations = cell_translations(kmesh) @ prim.lattice_vectors()
  columns = []
  for k, c, occ in zip(kpts, mf.mo_coeff, mf.mo_occ):
    phase = np.exp(1j * translations @ k) / np.sqrt(len(kpts))  # (n_k,)
    columns.append(np.kron(phase[:, None], np.asarray(c)[:, np.asarray(occ) > 0]))
  c = np.concatenate(columns, axis=1)  # (n_k * n_ao, n_occ) complex
  if np.any(kpt):
    overlap = np.asarray(big.pbc_intor('int1e_ovlp', kpts=kpt))
    w, u = np.linalg.eigh(c.conj().T @ overlap @ c)
    c = c @ (u / np.sqrt(w)) @ u.conj().T  # Orthonormal in the overlap at the twist.
  else:
    c = _real_span(c, np.asarray(big.pbc_intor('int1e_ovlp')).real, c.shape[1])
  shells = molecular.shells_of(big)
  big_lattice = np.asarray(big.lattice_vectors(), np.float64)
  return PeriodicHartreeFock(shells, image_sets(shells, big_lattice, tol), big_lattice,
                             (c, c), energy, big, kpt)


def for_system(system, basis: str, restricted: bool) -> tuple:
  """(PeriodicHartreeFock, the method's name) of a crystal's simulation cell (a systems.System
  with a lattice), at its twist, for pretraining: k-point RHF of the primitive cell unfolded
  to the supercell when the supercell holds several primitive cells, the primitive cell has an
  even number of electrons and the simulation cell is closed-shell with the primitive cell's
  charge (the cheaper route, the same orbitals); else ROHF / UHF (`restricted`) of the
  simulation cell at its twist.
  InputError for the electron gas (no nuclei: its plane-wave envelope is already the HF
  determinant) and for effective core potentials (not evaluated in a cell yet)."""
  if not isinstance(system.boundary, boundary_lib.Periodic):
    raise ValueError('for_system is for periodic systems; see hartree_fock.hartree_fock')
  if not len(system.symbols):
    raise InputError('config.pretrain.iterations > 0: the electron gas needs no Hartree-Fock '
                     'pretraining (its plane-wave envelope starts as the HF determinant); set '
                     'it to 0')
  if system.has_ecp:
    raise InputError('config.pretrain: Hartree-Fock pretraining of a crystal with effective '
                     'core potentials is not supported; use all electrons (config.system.ecp '
                     "= '')")
  vectors = system.lattice.vectors
  kpt = system.boundary.twist_vector() if system.complex else None
  n_up, n_down = system.n_up, system.n_down
  primitive = system.primitive.vectors if system.primitive is not None else vectors
  matrix = np.round(vectors @ np.linalg.inv(primitive)).astype(int)
  n_cells = int(round(np.linalg.det(matrix)))
  n_atoms = len(system.symbols) // n_cells
  charge = float(np.sum(system.charges))
  dims = system.lattice.dims
  if (dims == 3 and n_cells > 1 and n_up == n_down and round(charge) == n_up + n_down
      and round(charge) // n_cells % 2 == 0):
    return hartree_fock_kpoints(primitive, system.symbols[:n_atoms],
                                system.positions[:n_atoms], basis, kmesh=matrix,
                                kpt=kpt), 'KRHF'
  return hartree_fock(vectors, system.symbols, system.positions, basis, n_up=n_up,
                      n_down=n_down, restricted=restricted, kpt=kpt,
                      dims=dims), 'ROHF' if restricted else 'UHF'


def electron_gas_energy(lattice: lattice_lib.Lattice, n_up: int, n_down: int,
                        twist=(0.0, 0.0, 0.0), self_energy: float = None) -> float:
  """The Hartree-Fock energy (Ha per cell) of the electron gas in `lattice` at `twist`
  (fractional): the determinant of the lowest plane waves k = G + k_s per spin. Kinetic
  sum k^2 / 2; exchange -(2 pi / volume) sum over ordered pairs k != k' of one spin of
  1 / |k - k'|^2 (the Ewald interaction's Fourier coefficients, no G = 0 term); and each
  electron's Madelung self-energy v_M / 2, the Ewald energy of one unit charge in its
  background (`self_energy`, Ha, when already known for this cell). The reference from
  which the gas's correlation energy is measured. Float64 needs jax_enable_x64 (the
  Madelung term is an Ewald sum)."""
  energy = 0.0
  for n in (n_up, n_down):
    k = lattice_lib.k_shells(lattice, n, twist)[:n]
    q2 = np.sum((k[:, None] - k[None]) ** 2, axis=-1)
    off = ~np.eye(n, dtype=bool)
    energy += np.sum(k * k) / 2 - 2 * np.pi / lattice.volume * np.sum(1 / q2[off])
  if self_energy is None:
    self_energy = ewald.madelung(lattice, np.zeros((1, 3)), np.ones(1))
  return float(energy + (n_up + n_down) * self_energy)
