"""pyscf reference energies at each geometry: the complete-basis extrapolation against the
exact Born-Oppenheimer energy of H2, and the names a reference may have."""

import dataclasses

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError
from ferminet_fast.physics import geometries, hartree_fock, references, systems

pytest.importorskip('pyscf')

# H2 at R = 1.4011 bohr: -1.174475714220 Ha, the Born-Oppenheimer energy of K. Pachucki,
# Phys. Rev. A 82, 032509 (2010) (Table I), converged far beyond the digits used here.
H2_BOND, H2_EXACT = 1.4011, -1.174475714220


def h2(*bonds):
  cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                            'system.molecule': f'H 0 0 0; H 0 0 {bonds[0]}'})
  system = systems.make_system(cfg.system)
  if len(bonds) == 1:
    return system
  stack = np.array([[[0, 0, 0], [0, 0, b]] for b in bonds], float)
  return dataclasses.replace(system, surface=geometries.Surface(stack))


def test_the_basis_limit_extrapolation_gives_the_exact_h2_energy():
  """Correlation in cc-pVTZ and cc-pVQZ extrapolated by X^-3 is within 0.1 mHa of the exact
  energy, while cc-pVQZ alone is above it by more than 0.5 mHa (the basis error the
  extrapolation removes) and Hartree-Fock by the correlation energy, ~41 mHa. For two
  electrons CCSD is full CI, so CCSD stands in for it (faster), and full CI must agree."""
  system = h2(H2_BOND)
  (hf_t, corr_t), (hf_q, corr_q) = (references.parts(system, 'ccsd', f'cc-pv{x}z')
                                    for x in 'tq')
  cbs = hf_q + (64 * corr_q - 27 * corr_t) / (64 - 27)
  assert references.energy(system, references.parse('ccsd/cc-pv[tq]z')) == pytest.approx(
      cbs, abs=1e-10)
  assert abs(cbs - H2_EXACT) < 1e-4
  assert hf_q + corr_q - H2_EXACT > 5e-4
  assert 0.040 < hf_q - H2_EXACT < 0.042
  fci = references.energy(system, references.parse('fci/cc-pvdz'))
  assert fci == pytest.approx(references.energy(system, references.parse('ccsd/cc-pvdz')),
                              abs=1e-7)


def test_each_geometry_gets_its_own_reference():
  """Over a set, the energies follow the bond: HF/STO-3G of H2 is lowest near 1.35 bohr
  (its known STO-3G minimum, 0.712 angstrom) and rises either side."""
  e = references.energies(h2(1.0, 1.35, 2.0), references.parse('hf/sto-3g'))
  assert e[1] < e[0] and e[1] < e[2] and e[0] != e[2]


@pytest.mark.parametrize('text,said', [
    ('fci', "give 'METHOD/BASIS'"), ('mp2/cc-pvdz', "give 'METHOD/BASIS'"),
    ('fci/cc-pv[qt]z', 'two cardinal numbers in rising order'),
    ('fci/cc-pv[qx]z', 'two cardinal numbers in rising order')])
def test_a_malformed_reference_is_one_clear_error(text, said):
  with pytest.raises(InputError, match=said):
    references.parse(text)


def test_a_basis_pyscf_does_not_have_is_refused():
  with pytest.raises(InputError, match="--reference = 'cc-pv9z': pyscf has no such basis"):
    references.check(references.parse('hf/cc-pv9z'), h2(1.4))


def test_a_stretched_bond_binds_in_the_basis_limit():
  """H2 at 6 bohr lies below two hydrogen atoms (by about 0.8 mHa exactly): the CCSD
  reference extrapolated from cc-pVDZ and cc-pVTZ stays below the atoms' energies in the
  larger basis, which an RHF-based split into Hartree-Fock and correlation energies does
  not give (the RHF's ionic dissociation converges with the basis unlike the atoms)."""
  atom = systems.make_system(tiny_config('H').system)
  atoms = 2 * references.energy(atom, references.parse('hf/cc-pvtz'))  # Exact for one electron.
  stretched = references.energy(h2(6.0), references.parse('ccsd/cc-pv[dt]z'))
  assert atoms - 2e-3 < stretched < atoms


def test_a_core_valence_basis_gives_hydrogen_its_valence_basis():
  """H has no core: in cc-pCVDZ it takes cc-pVDZ, so H2's energy is the same in both, while
  LiH's core-valence basis adds core functions on Li alone and lowers its Hartree-Fock
  energy, by less than a millihartree (the core's correlation is what those functions are
  for)."""
  system = h2(H2_BOND)
  assert references.energy(system, references.parse('hf/cc-pcvdz')) == pytest.approx(
      references.energy(system, references.parse('hf/cc-pvdz')), abs=1e-10)
  cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                            'system.molecule': 'Li 0 0 0; H 0 0 3.015'})
  lih = systems.make_system(cfg.system)
  valence, core = (references.energy(lih, references.parse(f'hf/cc-p{c}vdz')) for c in ('', 'c'))
  assert 0 < valence - core < 1e-3


def test_nevpt2_is_exact_where_its_active_space_is_and_corrects_the_casscf():
  """H2's full-valence space is CAS(2, 2) (the two 1s): as the bond breaks, the CASSCF of
  it becomes exact within the basis (two one-electron atoms), so NEVPT2 agrees with full CI
  at 6 bohr to 0.1 mHa (what remains is the atoms' dispersion). At the equilibrium bond the
  CASSCF misses the dynamic correlation, which NEVPT2 adds: it lies below the CASSCF and
  nearer full CI, while the CASSCF lies above it."""
  fci = references.parse('fci/cc-pvdz')
  for bond, near in ((6.0, 1e-4), (H2_BOND, None)):
    e_cas, e_pt2 = references.parts(h2(bond), 'nevpt2', 'cc-pvdz')
    exact = references.energy(h2(bond), fci)
    if near:
      assert abs(e_cas + e_pt2 - exact) < near
    else:
      assert e_pt2 < 0 and e_cas > exact
      assert abs(e_cas + e_pt2 - exact) < abs(e_cas - exact) / 2


def test_nevpt2_takes_the_full_valence_space_along_a_curve(monkeypatch):
  """N2's full valence space is the 2s and 2p of both atoms, 10 electrons in 8 orbitals
  outside 2 core orbitals; NEVPT2 takes it compressed (1.6 bohr, where AVAS would take a
  core orbital in too unless told the cores), at the equilibrium bond and stretched, with a
  negative correlation energy, and the equilibrium lowest. Where AVAS finds another space,
  or an atom has an effective core potential, it is refused."""
  from pyscf import scf
  energies = []
  for bond in (1.6, 2.068, 4.0):
    cfg = tiny_config('H', **{'system.atom': '', 'system.units': 'bohr',
                              'system.molecule': f'N 0 0 0; N 0 0 {bond}'})
    system = systems.make_system(cfg.system)
    assert references.valence_space(system)[1:] == (8, 10, 2)
    mf = scf.RHF(hartree_fock.molecule(system, '6-31g'))
    hartree_fock.scf_energy(mf)
    e_cas, e_pt2 = references.nevpt2_parts(mf, system)
    assert e_pt2 < 0
    energies.append(e_cas + e_pt2)
  assert energies[0] > energies[1] < energies[2]  # Compressed and stretched lie above.
  from pyscf.mcscf import avas
  monkeypatch.setattr(avas, 'avas', lambda mf, labels, **kw: (7, 10, mf.mo_coeff))
  with pytest.raises(RuntimeError, match='AVAS found 10 electrons in 7 orbitals'):
    references.nevpt2_parts(mf, system)
  si = systems.make_system(tiny_config('Si', **{'system.ecp': 'ccecp'}).system)
  with pytest.raises(InputError, match='Si has no full-valence space'):
    references.check(references.parse('nevpt2/cc-pvdz'), si)
