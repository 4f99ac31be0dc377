"""Observables tables: trains and evaluates the runs of ACCURACY.md's observables and forces
tables and renders them from the artifact it writes (scripts/render_docs.py).

  python -m scripts.observables                    # every row -> benchmarks/observables.json
  python -m scripts.observables --rows he li       # a subset (a run of its own in the artifact)
  python -m scripts.observables --rows h2_r2 h2_re lih_re --at-once   # the forces, side by side

Each row is two fresh processes, as a user runs them:
  python -m ferminet_fast.train --config configs/<system>.py [settings] --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR --steps S --burn_in B --observables ...
Recorded per row: the evaluated energy, <S^2> and the dipole with their reblocked errors,
and from density.csv the electrons inside the profile and the slope of ln rho at the
nucleus (a weighted fit of ln rho = a + b r + c r^2 to the shells below r_max), which
Kato's cusp condition for the spherically averaged density fixes to -2Z (Steiner, J. Chem.
Phys. 39, 2365 (1963)). The forces rows record both force estimators on every nucleus and,
as their reference, the energy and -dE/dR of a pyscf calculation computed here in the same
invocation (CCSD energies, the full CI for H2's two electrons, or CCSD(T) at R +- 0.01
bohr, central difference); LiH also its
dipole against pyscf's CCSD (unrelaxed density). The tables take each row's latest
measurement. With --at-once the rows run side by side, each its own pair of processes; each
row records how many ran at once (the wall times are then those of a shared machine).
"""

import argparse
import os

import numpy as np

from scripts import accuracy
from scripts import artifacts
from scripts.artifacts import pm

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

JSON = os.path.join(REPO, 'benchmarks', 'observables.json')
FULL = ['--steps=1000', '--burn_in=100', '--observables=s2,dipole,density']
STRETCHED = ['--config.system.molecule=H 0 0 0; H 0 0 6.0', '--config.optim.iterations=1500']
# name: (label, config, training settings, evaluation arguments, expected <S^2> and why).
ROWS = {
    'he': ('He', 'configs/he.py', [], FULL, (0.0, 'singlet')),
    'li': ('Li', 'configs/li.py', [], FULL, (0.75, 'doublet')),
    'h2_stretched': ('H2, R = 6 bohr, optim.spin_penalty=0', 'configs/h2.py',
                     STRETCHED + ['--config.optim.spin_penalty=0'],
                     ['--steps=500', '--burn_in=50', '--observables=s2'],
                     (0.0, 'singlet ground state')),
    'h2_stretched_penalty': ('H2, R = 6 bohr, optim.spin_penalty=1', 'configs/h2.py',
                             STRETCHED + ['--config.optim.spin_penalty=1'],
                             ['--steps=500', '--burn_in=50', '--observables=s2'],
                             (0.0, 'singlet ground state')),
}
CUSP_RMAX = (0.3, 0.4)  # bohr: the shells the cusp fits use.
FORCES = ['--steps=2000', '--burn_in=100', '--observables=forces,forces_warp']
# name: (label, config, training settings, evaluation arguments, reference: the two nuclei
#        (the second at +z, whose force along +z is -dE/dR), R in bohr, pyscf method, basis,
#        and for a dipole reference (method, basis) or None).
FORCE_ROWS = {
    'h2_r2': ('H2, R = 2.0 bohr', 'configs/h2.py',
              ['--config.system.molecule=H 0 0 -1.0; H 0 0 1.0'], FORCES,
              (('H', 'H'), 2.0, 'ccsd', 'aug-cc-pv5z', None)),
    'h2_re': ('H2, R = 1.4 bohr', 'configs/h2.py', [], FORCES,
              (('H', 'H'), 1.4, 'ccsd', 'aug-cc-pv5z', None)),
    'lih_re': ('LiH, R = 3.015 bohr (force on H)', 'configs/lih.py', [],
               FORCES[:2] + ['--observables=forces,forces_warp,dipole'],
               (('Li', 'H'), 3.015, 'ccsd(t)', {'Li': 'cc-pcvqz', 'H': 'cc-pvqz'},
                ('ccsd', 'aug-cc-pvqz'))),
}
FORCE_STEP = 0.01  # bohr: the central difference of the reference energies.


def cusp_slope(table: np.ndarray, r_max: float) -> tuple:
  """(b, its standard error): the weighted least-squares fit ln rho = a + b r + c r^2 over
  the shells of `table` (rows r_lo, r_hi, rho, error) that end at or below `r_max`."""
  rows = table[(table[:, 1] <= r_max + 1e-9) & (table[:, 2] > 0)]
  r = 0.5 * (rows[:, 0] + rows[:, 1])
  y, sigma = np.log(rows[:, 2]), rows[:, 3] / rows[:, 2]
  design = np.stack([np.ones_like(r), r, r * r], axis=1) / sigma[:, None]
  cov = np.linalg.inv(design.T @ design)
  coef = cov @ design.T @ (y / sigma)
  return float(coef[1]), float(np.sqrt(cov[1, 1]))


def density_summary(path: str, charge: int) -> dict:
  """Electrons inside the profile of density.csv and the cusp slopes against -2Z."""
  table = np.loadtxt(path, delimiter=',', skiprows=1)
  shells = 4 * np.pi / 3 * (table[:, 1] ** 3 - table[:, 0] ** 3)
  return {'electrons': float(np.sum(shells * table[:, 2])), 'r_max_bohr': float(table[-1, 1]),
          'cusp': [{'r_max_bohr': r, 'slope': s, 'error': e, 'expected': -2.0 * charge}
                   for r in CUSP_RMAX for s, e in [cusp_slope(table, r)]]}


def pyscf_energy(symbols: tuple, distance: float, method: str, basis) -> float:
  """All-electron energy (Ha) of the diatomic `symbols` at `distance` bohr by pyscf's
  `method` on RHF, every electron correlated: 'ccsd' (for two electrons the full CI in the
  basis) or 'ccsd(t)'."""
  from pyscf import cc, gto, scf
  mol = gto.M(atom=f'{symbols[0]} 0 0 0; {symbols[1]} 0 0 {distance}', unit='bohr',
              basis=basis, verbose=0)
  hf = scf.RHF(mol).set(conv_tol=1e-11).run()
  ccsd = cc.CCSD(hf).set(conv_tol=1e-10).run()
  return float(ccsd.e_tot + (ccsd.ccsd_t() if method == 'ccsd(t)' else 0.0))


def pyscf_dipole(symbols: tuple, distance: float, basis) -> float:
  """Dipole along the bond (e bohr, the second nucleus at +z) of pyscf's CCSD unrelaxed
  density, every electron correlated."""
  from pyscf import cc, gto, scf
  mol = gto.M(atom=f'{symbols[0]} 0 0 0; {symbols[1]} 0 0 {distance}', unit='bohr',
              basis=basis, verbose=0)
  hf = scf.RHF(mol).set(conv_tol=1e-11).run()
  ccsd = cc.CCSD(hf).set(conv_tol=1e-10).run()
  ccsd.solve_lambda()
  dm = hf.mo_coeff @ ccsd.make_rdm1() @ hf.mo_coeff.T
  return float(scf.hf.dip_moment(mol, dm, unit='AU', verbose=0)[2])


def force_reference(symbols: tuple, distance: float, method: str, basis, dipole) -> dict:
  """pyscf's energy at `distance` and -dE/dR (Ha/bohr) by central difference; the dipole
  too when `dipole` names (method, basis)."""
  e = {d: pyscf_energy(symbols, distance + d, method, basis)
       for d in (0.0, FORCE_STEP, -FORCE_STEP)}
  ref = {'method': method, 'basis': basis, 'step_bohr': FORCE_STEP, 'energy': e[0.0],
         'force': -(e[FORCE_STEP] - e[-FORCE_STEP]) / (2 * FORCE_STEP)}
  if dipole:
    ref['dipole'] = {'method': dipole[0], 'basis': dipole[1],
                     'value': pyscf_dipole(symbols, distance, dipole[1])}
  return ref


def run_force_row(name: str, runs_dir: str) -> dict:
  label, config, settings, eval_args, (symbols, distance, method, basis, dip) = FORCE_ROWS[name]
  reference = force_reference(symbols, distance, method, basis, dip)  # First: fails fast.
  ev, cfg, _, train_s, eval_s = accuracy.train_and_evaluate(
      accuracy.new_run_dir(runs_dir, name), config, settings, eval_args)
  obs = ev['observables']
  return {'row': name, 'system': label, 'config': config, 'settings': settings,
          'evaluate': eval_args, 'iterations': ev['checkpoint_step'],
          'optimizer': cfg['optim']['optimizer'], 'energy': ev['energy'], 'error': ev['error'],
          'forces': obs['forces'], 'forces_warp': obs['forces_warp'],
          'dipole': obs.get('dipole'), 'distance_bohr': distance,
          'reference': reference,
          'train_s': train_s, 'eval_s': eval_s}


def run_row(name: str, runs_dir: str) -> dict:
  if name in FORCE_ROWS:
    return run_force_row(name, runs_dir)
  label, config, settings, eval_args, (s2_expected, s2_why) = ROWS[name]
  run = accuracy.new_run_dir(runs_dir, name)
  ev, cfg, _, train_s, eval_s = accuracy.train_and_evaluate(run, config, settings, eval_args)
  obs = ev.get('observables', {})
  row = {'row': name, 'system': label, 'config': config, 'settings': settings,
         'evaluate': eval_args, 'iterations': ev['checkpoint_step'],
         'optimizer': cfg['optim']['optimizer'], 'energy': ev['energy'], 'error': ev['error'],
         'exact': ev.get('exact_energy'), 'error_mha': ev.get('error_mha'),
         's2': obs.get('s2'), 's2_expected': s2_expected, 's2_why': s2_why,
         'dipole': obs.get('dipole'), 'train_s': train_s, 'eval_s': eval_s}
  if os.path.exists(os.path.join(run, 'density.csv')):
    from ferminet_fast.physics import systems
    charge = systems.atomic_number(cfg['system']['atom'], 'system.atom')
    row['density'] = density_summary(os.path.join(run, 'density.csv'), charge)
  return row


def render(path: str = JSON) -> str:
  """The observables table: each row's latest measurement."""
  latest_rows = artifacts.newest_rows(path, ROWS)
  lines = ['| system | training | E evaluated (Ha) | ⟨S²⟩ | expected ⟨S²⟩ | dipole (e bohr) '
           'x, y, z | density: electrons; cusp slope b (r_max) against −2Z | wall (train + '
           'eval) |', '|' + '---|' * 8]
  for _, r in latest_rows:
    energy = pm(r['energy'], r['error'], 6)
    if r.get('error_mha') is not None:
      energy += f' ({r["error_mha"]:+.2f} ± {1e3 * r["error"]:.2f} mHa)'.replace('-', '−')
    s2 = pm(r['s2']['value'][0], r['s2']['error'][0], 5) if r.get('s2') else '–'
    dip = (', '.join(pm(v, e, 4) for v, e in zip(r['dipole']['value'], r['dipole']['error']))
           if r.get('dipole') else '–')
    dens = '–'
    if r.get('density'):
      d = r['density']
      dens = f'{d["electrons"]:.4f} within {d["r_max_bohr"]:.0f} bohr; ' + '; '.join(
          f'{pm(c["slope"], c["error"], 2)} ({c["r_max_bohr"]}) vs {c["expected"]:.0f}'
          .replace('-', '−') for c in d['cusp'])
    lines.append(f'| {r["system"]} | {r["iterations"]} steps, {r["optimizer"]} ({r["config"]}) '
                 f'| {energy} | {s2} | {r["s2_expected"]} ({r["s2_why"]}) | {dip} | {dens} | '
                 f'{accuracy.wall_cell(r)} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, [run for run, _ in latest_rows])])


def _component(obs: dict, nucleus: int, axis: int) -> tuple:
  i = 3 * nucleus + axis
  return obs['value'][i], obs['error'][i]


def _basis_text(basis) -> str:
  return basis if isinstance(basis, str) else ', '.join(f'{k} {v}' for k, v in basis.items())


def render_forces(path: str = JSON) -> str:
  """The forces table: each forces row's latest measurement, against its pyscf reference."""
  latest_rows = artifacts.newest_rows(path, FORCE_ROWS)
  if not latest_rows:
    return f'*No forces rows in `{os.path.relpath(path, REPO)}` yet.*'
  lines = ['| system | training | E evaluated (Ha), against the reference | reference E (Ha); '
           '−dE/dR (Ha/bohr) | '
           '`forces` along the bond | `forces_warp` along the bond | `forces` on the other '
           'nucleus | wall (train + eval) |', '|' + '---|' * 8]
  for _, r in latest_rows:
    ref = r['reference']
    f, df = _component(r['forces'], 1, 2)
    w, dw = _component(r['forces_warp'], 1, 2)
    o, do = _component(r['forces'], 0, 2)
    energy = pm(r['energy'], r['error'], 6)
    energy += f' ({1e3 * (r["energy"] - ref["energy"]):+.2f} mHa from it)'.replace('-', '−')
    reference = (f'{ref["energy"]:.6f}; {ref["force"]:+.5f}'.replace('-', '−') +
                 f' ({ref["method"].upper()}, {_basis_text(ref["basis"])})')
    forces = f'{pm(f, df, 5)} ({(f - ref["force"]) / df:+.1f} σ)'.replace('-', '−')
    warp = f'{pm(w, dw, 5)} ({(w - ref["force"]) / dw:+.1f} σ)'.replace('-', '−')
    lines.append(f'| {r["system"]} | {r["iterations"]} steps, {r["optimizer"]} | {energy} | '
                 f'{reference} | {forces} | {warp} | {pm(o, do, 5)} | {accuracy.wall_cell(r)} |')
  dipoles = [r for _, r in latest_rows if r.get('dipole') and
             r['reference'].get('dipole')]
  for r in dipoles:
    ref = r['reference']['dipole']
    v, e = _component(r['dipole'], 0, 2)  # (x, y, z) of the one dipole.
    lines += ['', f'{r["system"].split(" (")[0]} dipole along the bond (the second nucleus at '
              f'+z): {pm(v, e, 4)} e bohr against ' + f'{ref["value"]:.4f}'.replace('-', '−') +
              f' ({ref["method"].upper()} unrelaxed density, {ref["basis"]}), ' +
              f'{(v - ref["value"]) / e:+.1f} σ'.replace('-', '−')]
  return '\n'.join(lines + ['', artifacts.provenance(path, [run for run, _ in latest_rows])])


TABLES = {'observables': ('ACCURACY.md', render),  # For scripts/render_docs.py.
          'forces': ('ACCURACY.md', render_forces)}


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--rows', nargs='+', default=list(ROWS), choices=list(ROWS) + list(FORCE_ROWS))
  p.add_argument('--json', default=JSON, help='the artifact to append to')
  p.add_argument('--runs-dir', default='', help='keep the run directories here')
  p.add_argument('--at-once', action='store_true', help='run the rows side by side')
  args = p.parse_args()
  accuracy.run_rows(args.rows, run_row, args.json, args.at_once, args.runs_dir)
  print(render(args.json))
  print(render_forces(args.json))


if __name__ == '__main__':
  main()
