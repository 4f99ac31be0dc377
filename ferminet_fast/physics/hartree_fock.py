"""Hartree-Fock orbitals: the SCF is pyscf's, the orbitals are evaluated in JAX.

pyscf (an optional dependency, pip install 'ferminet_fast[pyscf]') supplies the basis and
the occupied molecular-orbital coefficients once, on the host. The Gaussian basis functions
themselves are cheap closed forms, so they are evaluated here in JAX: the orbitals can sit
inside a jitted pretraining step (and its MCMC moves) on any device, with no host callback.
Only spherical (pyscf's default) Gaussian shells are used; their values equal pyscf's
`mol.eval_gto('GTOval_sph', r)` (tests/test_hartree_fock.py).
"""

from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import systems


class Shell(NamedTuple):
  """One contracted Gaussian shell: n_ctr functions of angular momentum l (2l+1 each),
  phi(r) = sum_p coeffs[p, c] exp(-exps[p] |r - center|^2) * Y_lm(r - center)."""
  center: np.ndarray  # (3,) bohr.
  exps: np.ndarray  # (n_prim,) 1/bohr^2.
  coeffs: np.ndarray  # (n_prim, n_ctr), primitive normalisation included.
  powers: np.ndarray  # (n_cart, 3) integer powers of (x, y, z), pyscf's Cartesian order.
  cart2sph: np.ndarray  # (n_cart, 2l+1) Cartesian monomials -> real solid harmonics.


class HartreeFock(NamedTuple):
  """Occupied HF orbitals: mo(r) = ao(r) @ coeffs[spin]."""
  shells: tuple  # Shell per pyscf shell, in pyscf's AO order.
  coeffs: tuple  # ((n_ao, n_up), (n_ao, n_down)) molecular-orbital coefficients.
  energy: float  # Ha, the HF total energy.
  mol: object  # The pyscf.gto.Mole (bohr), for checks against pyscf itself.


def bases(system: systems.System, basis, ecp_basis: str) -> dict:
  """{symbol: basis name}: `ecp_basis` for the elements with an ECP, `basis` (one name, or a
  {symbol: name} map) for the rest."""
  with_ecp = {s for s, e in zip(system.symbols, system.ecp) if e is not None}
  return {s: ecp_basis if s in with_ecp else basis[s] if isinstance(basis, dict) else basis
          for s in sorted(set(system.symbols))}


def check_basis(basis, system: systems.System, ecp_basis: str = '',
                setting: Optional[str] = None) -> None:
  """Raises InputError unless pyscf knows the basis of every element of `system`; the
  message names `setting` (None: config.pretrain's basis key)."""
  from pyscf import gto
  with_ecp = {s for s, e in zip(system.symbols, system.ecp) if e is not None}
  for symbol, name in bases(system, basis, ecp_basis).items():
    key = 'ecp_basis' if symbol in with_ecp else 'basis'
    try:
      gto.basis.load(name, symbol)
    except Exception as e:  # pyscf raises BasisNotFoundError, KeyError, ... by format.
      where = setting or f'config.pretrain.{key}'
      raise InputError(f'{where} = {name!r}: pyscf has no such basis for '
                       f'{symbol} ({type(e).__name__})') from e


def _cartesian_powers(l: int) -> np.ndarray:
  """(n_cart, 3) powers (lx, ly, lz) with lx + ly + lz = l, in pyscf's order (xx, xy, xz,
  yy, yz, zz for l = 2)."""
  return np.array([(lx, ly, l - lx - ly) for lx in range(l, -1, -1)
                   for ly in range(l - lx, -1, -1)], dtype=np.int32)


def shells_of(mol) -> tuple:
  """The spherical Gaussian shells of a built pyscf Mole, through its public API."""
  from pyscf import gto
  if mol.cart:
    raise ValueError('Cartesian Gaussian bases are not supported; use spherical (pyscf '
                     'default)')
  shells = []
  for i in range(mol.nbas):
    l, exps = mol.bas_angular(i), np.asarray(mol.bas_exp(i))
    coeffs = np.asarray(mol.bas_ctr_coeff(i)) * gto.gto_norm(l, exps)[:, None]
    shells.append(Shell(np.asarray(mol.bas_coord(i)), exps, coeffs, _cartesian_powers(l),
                        np.asarray(gto.cart2sph(l))))
  return tuple(shells)


def scf_energy(mf, dm0=None) -> float:
  """Runs the pyscf SCF `mf` (molecular or periodic), from the density matrix `dm0` if given
  (else pyscf's guess), and returns its energy (Ha), on one
  OpenMP thread: pyscf's threaded integral and Fock builds add in an order that varies
  from run to run, and where occupied orbitals are degenerate (N2's pi orbitals) that last-
  bit noise picks a different basis of the degenerate space each time, so the pretraining
  targets, and with them the whole run, would differ between runs with the same seed. A
  periodic cell's density fit is built inside too, as its threaded build varies as well
  (its price: BENCHMARKS.md, "The Hartree-Fock SCF on one thread")."""
  from pyscf import lib
  with lib.with_omp_threads(1):
    return float(mf.kernel(dm0))


def molecule(system: systems.System, basis, ecp_basis: str = '',
             setting: Optional[str] = None):
  """The pyscf.gto.Mole of `system` at its positions (bohr) in `basis`: its charge and spin,
  and atoms with an effective core potential given it and `ecp_basis` (an unknown basis:
  InputError naming `setting`, as check_basis)."""
  from pyscf import gto
  check_basis(basis, system, ecp_basis, setting)
  ecp = {s: e.name for s, e in zip(system.symbols, system.ecp) if e is not None}
  return gto.M(atom=[(s, tuple(p)) for s, p in zip(system.symbols, system.positions)],
               unit='bohr', basis=bases(system, basis, ecp_basis), ecp=ecp,
               spin=system.n_up - system.n_down,
               charge=int(round(float(np.sum(system.charges)))) - system.n_electrons,
               verbose=0)


def hartree_fock(system: systems.System, basis: str, restricted: bool,
                 ecp_basis: str = '') -> HartreeFock:
  """UHF (ROHF if `restricted`) of `system` in `basis`, occupied orbitals per spin; atoms
  with an effective core potential get it and `ecp_basis`."""
  from pyscf import scf
  mol = molecule(system, basis, ecp_basis)
  mf = (scf.ROHF if restricted else scf.UHF)(mol)
  energy = scf_energy(mf)
  coeff = mf.mo_coeff if mf.mo_coeff.ndim == 3 else (mf.mo_coeff, mf.mo_coeff)
  occ = mf.mo_occ if mf.mo_occ.ndim == 2 else (mf.mo_occ > 0, mf.mo_occ > 1)
  coeffs = tuple(np.asarray(c[:, np.asarray(o) > 0][:, :n]) for c, o, n in
                 zip(coeff, occ, system.electrons))
  return HartreeFock(shells_of(mol), coeffs, energy, mol)


def hessian(system: systems.System, basis) -> np.ndarray:
  """(3 M, 3 M) Ha/bohr^2: the UHF Hessian of the nuclear positions of `system` (bohr) in
  `basis`, pyscf's analytic second derivatives; rows and columns ordered nucleus by nucleus,
  x, y, z."""
  from pyscf import lib, scf
  mf = scf.UHF(molecule(system, basis))
  scf_energy(mf)
  with lib.with_omp_threads(1):  # As scf_energy: the same Hessian from run to run.
    h = np.asarray(mf.Hessian().kernel())  # (M, M, 3, 3)
  m = len(system.positions)
  return h.transpose(0, 2, 1, 3).reshape(3 * m, 3 * m)


def shell_values(s: Shell, d: jnp.ndarray) -> jnp.ndarray:
  """The functions of shell `s` at displacements d (n, 3) from its centre, bohr -> (n, n_ctr *
  (2l+1)), pyscf's order. The one home of the Gaussian closed form (molecular and periodic)."""
  r2 = jnp.sum(d * d, axis=-1, keepdims=True)  # (n, 1)
  radial = jnp.exp(-r2 * jnp.asarray(s.exps, d.dtype)) @ jnp.asarray(s.coeffs, d.dtype)
  monomials = jnp.stack([d[:, 0] ** int(a) * d[:, 1] ** int(b) * d[:, 2] ** int(c)
                         for a, b, c in s.powers], axis=-1)  # (n, n_cart)
  angular = monomials @ jnp.asarray(s.cart2sph, d.dtype)  # (n, 2l+1)
  return (radial[:, :, None] * angular[:, None, :]).reshape(d.shape[0], -1)


def atomic_orbitals(shells: tuple, r: jnp.ndarray, centres=None) -> jnp.ndarray:
  """Basis functions at points r (n, 3), bohr -> (n, n_ao), pyscf's AO order; `centres`
  (n_shells, 3) bohr, the shells' centres as data (None: their own)."""
  if centres is None:
    centres = [jnp.asarray(s.center, r.dtype) for s in shells]
  return jnp.concatenate([shell_values(s, r - c) for s, c in zip(shells, centres)], axis=-1)


def make_orbitals(hf: HartreeFock, system: systems.System) -> Callable:
  """x (3N,) -> [(n_s, n_s) per spin with electrons]: occupied orbital j at electron i of
  that spin, for one configuration (vmap for walkers)."""
  coeffs = dict(zip(('up', 'down'), hf.coeffs))
  blocks = [(lo, hi, coeffs[name]) for name, lo, hi in systems.spin_blocks(*system.electrons)]

  def orbitals(x):
    ao = atomic_orbitals(hf.shells, x.reshape(-1, 3))  # (N, n_ao)
    return [ao[lo:hi] @ jnp.asarray(c, x.dtype) for lo, hi, c in blocks]

  return orbitals


class Orbitals(NamedTuple):
  """One geometry's occupied orbitals as data, for `orbitals_over_geometries`."""
  centres: Any  # (n_shells, 3) bohr, the basis shells' centres.
  coeffs: tuple  # ((n_ao, n_s) per spin with electrons) molecular-orbital coefficients.


def aligned_signs(coeffs: list) -> list:
  """Molecular-orbital coefficients of G geometries or cells, [(n_ao, n_s) per spin] each,
  with each orbital's sign chosen to agree with the previous one's (a positive real part of
  the overlap of their coefficients; they may be complex), so that a smooth function of the
  geometry can fit them all."""
  out = [list(coeffs[0])]
  for c in coeffs[1:]:
    out.append([c_s * np.where(np.real(np.sum(np.conj(before) * c_s, axis=0)) < 0, -1.0, 1.0)
                for c_s, before in zip(c, out[-1])])
  return out


def orbitals_over_geometries(hfs: list, system: systems.System) -> tuple:
  """(orbitals(x (3N,), data) -> [(n_s, n_s) per spin with electrons], data: Orbitals stacked
  over the geometries (G, ...)): the HF of one molecule at G geometries (same elements and
  basis, so the same shells but for their centres) as one function of data, for jax.vmap
  over the geometries, each orbital's sign aligned with the previous geometry's
  (`aligned_signs`)."""
  coeffs = aligned_signs([hf.coeffs for hf in hfs])  # (n_ao, n_up), (n_ao, n_down) each.
  blocks = systems.spin_blocks(*system.electrons)
  spin = {'up': 0, 'down': 1}
  data = Orbitals(np.stack([[s.center for s in hf.shells] for hf in hfs]),
                  tuple(np.stack([c[spin[name]] for c in coeffs]) for name, _, _ in blocks))
  shells = hfs[0].shells

  def orbitals(x, one: Orbitals):
    ao = atomic_orbitals(shells, x.reshape(-1, 3), one.centres.astype(x.dtype))  # (N, n_ao)
    return [ao[lo:hi] @ c.astype(x.dtype) for (_, lo, hi), c in zip(blocks, one.coeffs)]

  return orbitals, data
