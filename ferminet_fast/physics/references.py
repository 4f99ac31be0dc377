"""Reference energies of a molecule from pyscf at each geometry of a set: the curve that a
surface's evaluated energies are drawn beside (pes.json, plots/pes.png).

A reference is named 'METHOD/BASIS': METHOD one of METHODS (Hartree-Fock, CCSD, CCSD(T),
full CI, on RHF orbitals for closed shells, or a spin-broken UHF's where that lies lower,
else ROHF; or NEVPT2), BASIS a pyscf basis name, or a
pair of cardinal numbers in brackets, 'cc-pv[q5]z', for the two-point extrapolation to the
complete-basis limit: the reference energy (Hartree-Fock's, or CASSCF's) of the larger
basis plus the correlation energy extrapolated as E_X = E_CBS + A X^-3 (Helgaker, Klopper,
Koch and Noga, J. Chem. Phys. 106, 9639 (1997)).

NEVPT2 is for bonds stretched past where a single determinant describes them (N2 beyond
about 2.5 bohr, where CCSD(T) fails): strongly contracted NEVPT2 (Angeli, Cimiraglia,
Evangelisti, Leininger and Malrieu, J. Chem. Phys. 114, 10252 (2001)) on a CASSCF of the
full valence space, each element's valence shell (H and He 1s, Li to Ne 2s 2p, Na to Ar 3s
3p) chosen by atomic-valence overlap (AVAS: Sayfutyarova, Sun, Chan and Knizia, J. Chem.
Theory Comput. 13, 4063 (2017)) at each geometry, so that the space is the same along a
curve; the cores are inactive and correlated by the perturbation.

Atoms with an effective core potential take BASIS for it. A core-valence basis (cc-pCVXZ:
Woon and Dunning, J. Chem. Phys. 103, 4572 (1995); cc-pwCVXZ: Peterson and Dunning, J.
Chem. Phys. 117, 10548 (2002)) gives H and He, which have no core, the valence basis
cc-pVXZ, as those families define them.
"""

import dataclasses
import re
from typing import NamedTuple

import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import hartree_fock, systems

METHODS = ('hf', 'ccsd', 'ccsd(t)', 'fci', 'nevpt2')
CARDINALS = {'d': 2, 't': 3, 'q': 4, '5': 5, '6': 6, '7': 7}  # The X of cc-pVXZ.
_PAIR = re.compile(r'^(?P<head>[^\[\]]*)\[(?P<x>\w)(?P<y>\w)\](?P<tail>[^\[\]]*)$')


class Reference(NamedTuple):
  """What a reference is: `method`, and the bases with the cardinal number each stands for
  (one basis with None, or the two of an extrapolation)."""
  method: str
  bases: tuple  # ((basis, X or None), ...)
  name: str  # As given: 'fci/cc-pv[q5]z'.


def parse(text: str, setting: str = '--reference') -> Reference:
  """The reference `text` names ('METHOD/BASIS'); InputError naming `setting` if malformed
  or its method unknown (the basis is checked against each system: `energies`)."""
  method, _, basis = text.strip().lower().partition('/')
  if method not in METHODS or not basis:
    raise InputError(f"{setting} = {text!r}: give 'METHOD/BASIS', METHOD one of "
                     f"{', '.join(METHODS)}, e.g. 'ccsd(t)/cc-pvtz' or 'fci/cc-pv[q5]z' (a "
                     'complete-basis extrapolation)')
  pair = _PAIR.match(basis)
  if pair is None:
    return Reference(method, ((basis, None),), text)
  x, y = (CARDINALS.get(pair[k]) for k in ('x', 'y'))
  if x is None or y is None or x >= y:
    raise InputError(f'{setting} = {text!r}: the bracket holds two cardinal numbers in '
                     f"rising order from {''.join(CARDINALS)}, e.g. 'cc-pv[tq]z'")
  return Reference(method, tuple((pair['head'] + c + pair['tail'], n) for c, n in
                                 ((pair['x'], x), (pair['y'], y))), text)


_CORE_VALENCE = re.compile(r'^(?P<head>(aug-)?cc-p)w?cv(?P<tail>\w+z)$')
_NO_CORE = ('H', 'He')


def element_bases(system: systems.System, basis: str) -> dict:
  """{symbol: basis name} of `system`'s elements in `basis`: its core-valence form names the
  valence basis for H and He."""
  valence = _CORE_VALENCE.sub(r'\g<head>v\g<tail>', basis)
  return {s: valence if s in _NO_CORE else basis for s in sorted(set(system.symbols))}


def check(reference: Reference, system: systems.System, setting: str = '--reference') -> None:
  """Raises InputError unless pyscf has each basis of `reference` for `system`'s elements
  (and, for NEVPT2, each element has its full-valence space)."""
  if reference.method == 'nevpt2':
    valence_space(system)
  for basis, _ in reference.bases:
    named = element_bases(system, basis)
    hartree_fock.check_basis(named, system, basis, setting)


def _broken_symmetry(mol, e_rhf: float):
  """A UHF of the closed-shell `mol` started from atomic densities with the beta spin's
  first atom emptied (spin symmetry broken), if it lies below the RHF energy `e_rhf` (past
  a bond's Coulson-Fischer point); else None."""
  from pyscf import scf
  mf = scf.UHF(mol)
  dm_a, dm_b = mf.get_init_guess()
  first = slice(*mol.aoslice_by_atom()[0][2:])
  dm_b = dm_b.copy()
  dm_b[first, :] = dm_b[:, first] = 0.0
  e = hartree_fock.scf_energy(mf, (dm_a, dm_b))
  return mf if mf.converged and e < e_rhf - 1e-6 else None


# (largest Z, core orbitals, valence shells...) of the rows hydrogen to argon.
VALENCE_SHELLS = ((2, 0, '1s'), (10, 1, '2s', '2p'), (18, 5, '3s', '3p'))
SHELL_ORBITALS = {'s': 1, 'p': 3}


def valence_space(system: systems.System) -> tuple:
  """(AVAS's labels, orbitals, electrons, core orbitals) of the full valence space of
  `system`: 'N 2s', 'N 2p', ... for each element, the number of its valence orbitals (N2:
  8), of the electrons outside the cores (N2: 10) and of the core orbitals (N2: 2).
  InputError beyond argon, or with an effective core potential."""
  labels, orbitals, core = [], 0, 0
  ecps = system.ecp or (None,) * len(system.symbols)
  for symbol, charge, ecp in zip(system.symbols, system.charges, ecps):
    row = next((r for r in VALENCE_SHELLS if charge <= r[0]), None)
    if row is None or ecp is not None:
      raise InputError(f'reference nevpt2: {symbol} has no full-valence space here (hydrogen '
                       'to argon, all electrons)')
    labels += [f'{symbol} {shell}' for shell in row[2:] if f'{symbol} {shell}' not in labels]
    orbitals += sum(SHELL_ORBITALS[shell[-1]] for shell in row[2:])
    core += row[1]
  return labels, orbitals, system.n_electrons - 2 * core, core


def nevpt2_parts(mf, system: systems.System) -> tuple:
  """(CASSCF, NEVPT2 correlation) energy, Ha, from the converged mean field `mf`: the
  full-valence active space (valence_space) by AVAS, its CASSCF, and strongly contracted
  NEVPT2 on it. AVAS leaves the core orbitals out of its choice (with them, N2 at 1.6 bohr
  takes a core orbital into the space) and must find exactly the valence space (else
  RuntimeError), so that every geometry and basis of a curve has the same one. CASSCF has local minima (H2 at 6 bohr in
  cc-pVDZ: from AVAS's projected orbitals it converges 0.9 mHa above its lowest), so it
  starts both from those and from the mean field's orbitals nearest the Fermi level, and
  the lower converged one is taken: the energy is variational in the orbitals."""
  from pyscf import mcscf, mrpt
  from pyscf.mcscf import avas
  labels, want_orbitals, want_electrons, core = valence_space(system)
  n_orbitals, n_electrons, orbitals = avas.avas(mf, labels, ncore=core, verbose=0)
  if (n_orbitals, n_electrons) != (want_orbitals, want_electrons):
    raise RuntimeError(f'AVAS found {n_electrons} electrons in {n_orbitals} orbitals for '
                       f'{system.name}, not the full valence space of {want_electrons} in '
                       f'{want_orbitals}')
  spin = mf.mol.spin
  best = None
  for start in (orbitals, None):
    cas = mcscf.CASSCF(mf, n_orbitals, ((n_electrons + spin) // 2, (n_electrons - spin) // 2))
    cas.verbose = 0
    cas.kernel(start)
    if cas.converged and (best is None or cas.e_tot < best.e_tot):
      best = cas
  if best is None:
    raise RuntimeError(f'CASSCF({n_electrons}, {n_orbitals}) of {system.name} did not converge')
  return float(best.e_tot), float(mrpt.NEVPT(best).kernel())


def parts(system: systems.System, method: str, basis: str) -> tuple:
  """(reference, correlation) energy, Ha, of `system` at its positions by `method`: the
  reference is Hartree-Fock's, or for NEVPT2 the CASSCF's (nevpt2_parts). A
  closed shell whose spin-broken UHF lies below its RHF (a stretched bond) takes the UHF as
  the reference determinant of the correlated method: the RHF's ionic dissociation makes
  its energy, and so the correlation energy, converge with the basis unlike the
  correlation of the atoms, and the X^-3 extrapolation of that difference is wrong by
  about 1 mHa at H2's 6 bohr."""
  from pyscf import cc, fci, scf
  mol = hartree_fock.molecule(system, element_bases(system, basis), basis)
  mf = (scf.RHF if mol.spin == 0 else scf.ROHF)(mol)
  e_hf = hartree_fock.scf_energy(mf)
  if method == 'hf':
    return e_hf, 0.0
  if method == 'fci':
    return e_hf, float(fci.FCI(mf).kernel()[0]) - e_hf
  if method == 'nevpt2':
    return nevpt2_parts(mf, system)
  if mol.spin == 0 and mol.nelectron > 1:
    broken = _broken_symmetry(mol, e_hf)
    if broken is not None:
      mf, e_hf = broken, float(broken.e_tot)
  solver = cc.CCSD(mf).run()
  e_corr = float(solver.e_corr)
  if method == 'ccsd(t)':
    e_corr += float(solver.ccsd_t())
  return e_hf, e_corr


def energy(system: systems.System, reference: Reference) -> float:
  """The reference energy, Ha, of `system` at its positions."""
  (basis, x), *larger = reference.bases
  e_hf, e_corr = parts(system, reference.method, basis)
  if not larger:
    return e_hf + e_corr
  (basis_y, y), = larger
  e_hf_y, e_corr_y = parts(system, reference.method, basis_y)
  return e_hf_y + (y ** 3 * e_corr_y - x ** 3 * e_corr) / (y ** 3 - x ** 3)


def energies(system: systems.System, reference: Reference) -> np.ndarray:
  """The reference energy (G,) Ha at each geometry of `system` (its surface's, or its own)."""
  check(reference, system)
  return np.array([energy(dataclasses.replace(system, positions=r, surface=None), reference)
                   for r in system.geometries.positions])
