"""Observables table: trains and evaluates the runs of ACCURACY.md's observables table and
renders it from the artifact it writes (scripts/render_docs.py).

  python scripts/observables.py                    # every row -> benchmarks/observables.json
  python scripts/observables.py --rows he li       # a subset (a run of its own in the artifact)

Each row is two fresh processes, as a user runs them:
  python -m ferminet_fast.train --config configs/<system>.py [settings] --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR --steps S --burn_in B --observables ...
Recorded per row: the evaluated energy, <S^2> and the dipole with their reblocked errors,
and from density.csv the electrons inside the profile and the slope of ln rho at the
nucleus (a weighted fit of ln rho = a + b r + c r^2 to the shells below r_max), which
Kato's cusp condition for the spherically averaged density fixes to -2Z (Steiner, J. Chem.
Phys. 39, 2365 (1963)). The table takes each row's latest measurement.
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import accuracy  # noqa: E402
import artifacts  # noqa: E402

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


def run_row(name: str, runs_dir: str) -> dict:
  label, config, settings, eval_args, (s2_expected, s2_why) = ROWS[name]
  run = os.path.join(runs_dir, name)
  train_s = accuracy.timed([sys.executable, '-m', 'ferminet_fast.train', '--config', config,
                           f'--config.log.save_path={run}', '--config.log.progress=False',
                           *settings])
  eval_s = accuracy.timed([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
                           *eval_args])
  with open(os.path.join(run, 'eval.json')) as f:
    ev = json.load(f)
  with open(os.path.join(run, 'config.json')) as f:
    cfg = json.load(f)
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


def _pm(value: float, error: float, digits: int = 5) -> str:
  return f'{value:.{digits}f} ± {error:.{digits}f}'.replace('-', '−')


def render(path: str = JSON) -> str:
  """The observables table: each row's latest measurement."""
  runs = artifacts.read(path)
  newest = {r['row']: (run, r) for run in runs for r in run.data['rows']}
  latest = {name: newest[name] for name in ROWS if name in newest}  # In the order of ROWS.
  lines = ['| system | training | E evaluated (Ha) | ⟨S²⟩ | expected ⟨S²⟩ | dipole (e bohr) '
           'x, y, z | density: electrons; cusp slope b (r_max) against −2Z | wall (train + '
           'eval) |', '|' + '---|' * 8]
  for run, r in latest.values():
    energy = _pm(r['energy'], r['error'], 6)
    if r.get('error_mha') is not None:
      energy += f' ({r["error_mha"]:+.2f} ± {1e3 * r["error"]:.2f} mHa)'.replace('-', '−')
    s2 = _pm(r['s2']['value'][0], r['s2']['error'][0]) if r.get('s2') else '–'
    dip = (', '.join(_pm(v, e, 4) for v, e in zip(r['dipole']['value'], r['dipole']['error']))
           if r.get('dipole') else '–')
    dens = '–'
    if r.get('density'):
      d = r['density']
      dens = f'{d["electrons"]:.4f} within {d["r_max_bohr"]:.0f} bohr; ' + '; '.join(
          f'{_pm(c["slope"], c["error"], 2)} ({c["r_max_bohr"]}) vs {c["expected"]:.0f}'
          .replace('-', '−') for c in d['cusp'])
    lines.append(f'| {r["system"]} | {r["iterations"]} steps, {r["optimizer"]} ({r["config"]}) '
                 f'| {energy} | {s2} | {r["s2_expected"]} ({r["s2_why"]}) | {dip} | {dens} | '
                 f'{r["train_s"]:.0f} + {r["eval_s"]:.0f} s |')
  used = []
  for run, _ in latest.values():
    if all(run is not u for u in used):
      used.append(run)
  return '\n'.join(lines + ['', artifacts.provenance(path, used)])


TABLES = {'observables': ('ACCURACY.md', render)}  # For scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--rows', nargs='+', default=list(ROWS), choices=list(ROWS))
  p.add_argument('--json', default=JSON, help='the artifact to append to')
  p.add_argument('--runs-dir', default='', help='keep the run directories here')
  args = p.parse_args()
  run_meta = artifacts.meta()
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    runs_dir = args.runs_dir or tmp
    for name in args.rows:
      rows.append(run_row(name, runs_dir))
      print(json.dumps(rows[-1]), flush=True)
  artifacts.append(args.json, {'rows': rows}, run_meta)
  print(render(args.json))


if __name__ == '__main__':
  main()
