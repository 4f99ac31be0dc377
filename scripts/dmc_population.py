"""The population bias of DMC on a trained run: DMC at one time step with several fixed
populations, the same walker-steps each, its mixed estimate and the population-corrected
one (dmc.json's `population`: the mean weights of the last dmc.population_memory Ha^-1
multiplied back in) at each, and the fit E(N) = E_inf + b / N of the mixed estimates.

  python -m scripts.dmc_population --run DIR [--populations 16,32,64,128,256]
                                   [--walker_steps 400000] [--tau T] [--keep DIR]
  python -m scripts.render_docs                  # put the table into ACCURACY.md

DIR is a trained run (for example a row of scripts/dmc_goals.py kept with --keep); each
population's DMC runs on a copy of it, as a user runs it:
  python -m ferminet_fast.dmc --run COPY --tau T --batch_size N --steps S --equilibration Q
with S = walker_steps / N and Q = S / 5; T defaults to the middle of the time steps DMC takes
for the system by default (plan.dmc_time_steps). The bias of the run's own population is
b / N there, with its error, against the corrected estimate's shift.

Each run is appended to benchmarks/dmc_population.json (scripts/artifacts.py); TABLES
renders the newest into ACCURACY.md.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from scripts import artifacts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(artifacts.BENCHMARKS, 'dmc_population.json')


def time_steps(run: str) -> tuple:
  """The time steps (Ha^-1) DMC takes by default for the system of `run`."""
  from ferminet_fast import plan
  from ferminet_fast.runtime import rundir
  return plan.dmc_time_steps(rundir.read_config(run).system)


def default_tau(run: str) -> float:
  """The middle of the time steps DMC takes by default for the system of `run` (Ha^-1)."""
  taus = time_steps(run)
  return taus[len(taus) // 2]


def system_name(run: str) -> str:
  from ferminet_fast.runtime import rundir
  s = rundir.read_config(run).system
  gas = f'electron gas, r_s = {s.rs:g}' if s.rs is not None else ''
  return s.name or s.atom + (f' ({s.ecp})' if s.ecp else '') or s.molecule or gas


def measure(run: str, work: str, populations: list, walker_steps: int, tau: float) -> dict:
  rows = []
  for n in populations:
    copy = os.path.join(work, f'n{n}')
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns('dmc', 'dmc.json', 'dmc_stats.csv',
                                                             'plots'))
    steps = max(100, walker_steps // n)
    cmd = [sys.executable, '-m', 'ferminet_fast.dmc', f'--run={copy}', f'--tau={tau}',
           f'--batch_size={n}', f'--steps={steps}', f'--equilibration={steps // 5}']
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
      raise RuntimeError(f'{" ".join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}')
    with open(os.path.join(copy, 'dmc.json')) as f:
      d = json.load(f)
    r = d['per_tau'][0]
    rows.append({'walkers': n, 'steps': steps, 'energy': r['energy'], 'error': r['error'],
                 'population': r['population'], 'acceptance': r['acceptance'],
                 'wall_s': r['wall_s']})
  return {'run': os.path.abspath(run), 'system': system_name(run),
          'exact_energy': d['exact_energy'], 'tau': tau, 'walker_steps': walker_steps,
          'rows': rows, 'fit': fit(rows),
          'command': 'python -m ferminet_fast.dmc --run COPY --tau T --batch_size N '
                     '--steps S --equilibration S/5'}


def fit(rows: list) -> dict:
  """E(N) = E_inf + b / N, weighted least squares on the mixed estimates (Ha), the errors
  scaled up by sqrt(chi^2 / dof) where the points scatter more than their errors say."""
  n = np.array([r['walkers'] for r in rows], float)
  e = np.array([r['energy'] for r in rows])
  s = np.array([r['error'] for r in rows])
  coef, cov = np.polyfit(1.0 / n, e, 1, w=1.0 / s, cov='unscaled')
  chi2_dof = float(np.sum(((e - np.polyval(coef, 1.0 / n)) / s) ** 2)) / max(1, len(n) - 2)
  scale = np.sqrt(max(1.0, chi2_dof))  # As the DMC extrapolation: never scaled down.
  return {'energy': float(coef[1]), 'error': float(scale * np.sqrt(cov[1, 1])),
          'b': float(coef[0]), 'b_error': float(scale * np.sqrt(cov[0, 0])),
          'chi2_dof': chi2_dof}


def render_table(path: str = JSON) -> str:
  run = artifacts.latest(path)
  if run is None:
    return 'Not measured yet: run `python -m scripts.dmc_population --run DIR`.'
  d = run.data
  exact = d['exact_energy']
  head = ('walkers', 'steps', 'mixed estimate (mHa from exact)', 'population-corrected',
          'shift (mHa)', 'b / N from the fit (mHa)')
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  f = fit(d['rows'])  # Fitted again from the recorded estimates (with chi^2).
  for r in d['rows']:
    p, n = r['population'], r['walkers']
    lines.append(f'| {r["walkers"]} | {r["steps"]} | '
                 f'{artifacts.signed(1e3 * (r["energy"] - exact), 1e3 * r["error"])} | '
                 f'{artifacts.signed(1e3 * (p["energy"] - exact), 1e3 * p["error"])} | '
                 f'{artifacts.signed(1e3 * p["shift"], 1e3 * p["shift_error"], 3)} | '
                 f'{artifacts.signed(1e3 * f["b"] / n, 1e3 * f["b_error"] / n)} |')
  text = (f'{d["system"]}, tau = {d["tau"]:g} Ha^-1, {d["walker_steps"]} walker-steps per '
          f'population; fit E(N) = E_inf + b / N: E_inf '
          f'{artifacts.signed(1e3 * (f["energy"] - exact), 1e3 * f["error"])} mHa from exact, '
          f'b = {artifacts.signed(1e3 * f["b"], 1e3 * f["b_error"])} mHa walkers, chi^2/dof '
          f'{f["chi2_dof"]:.1f}.\n\n')
  return text + '\n'.join(lines) + '\n\n' + artifacts.provenance(path, [run])


TABLES = {'dmc_population': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--run', required=True, help='a trained run directory')
  p.add_argument('--populations', default='16,32,64,128,256')
  p.add_argument('--walker_steps', type=int, default=400_000)
  p.add_argument('--tau', type=float, default=None)
  p.add_argument('--keep', metavar='DIR', help='keep the DMC copies in DIR')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  populations = [int(n) for n in args.populations.split(',')]
  tau = args.tau or default_tau(args.run)
  run_meta = artifacts.meta()
  with tempfile.TemporaryDirectory() as tmp:
    entry = measure(args.run, args.keep or tmp, populations, args.walker_steps, tau)
  artifacts.append(args.json, entry, run_meta)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
