"""DMC's two kinds of move on one trained run, each in the same wall-time budget: at the
system's default time steps, electron-by-electron moves (dmc.moves = 'electron', each
electron's move accepted or rejected alone) against all-electron moves ('all', the whole
move accepted or rejected); per time step the acceptance, effective time step, ms per step,
autocorrelation, energy and error, and the extrapolation to tau -> 0. The kind that gives
the smaller error of E(tau -> 0) in the same time is the cheaper for that system.

  python -m scripts.dmc_moves --run DIR [--seconds 900] [--moves electron,all] [--keep DIR]
  python -m scripts.render_docs                  # put the table into ACCURACY.md

DIR is a trained run (for example a row of scripts/dmc_goals.py kept with --keep); each kind
runs on a copy of it, as a user runs it:
  python -m ferminet_fast.dmc --run COPY --moves M --steps S --equilibration Q
with S + Q steps per time step planned from a probe's step time to fill the budget, and Q
the same fraction of them as in scripts/dmc_goals.py (its dmc_steps and EQUILIBRATION).

Each run is appended to benchmarks/dmc_moves.json (scripts/artifacts.py); TABLES renders
the newest run of each system into ACCURACY.md.
"""

import argparse
import os
import shutil
import sys
import tempfile

from scripts import artifacts
from scripts import dmc_goals
from scripts import dmc_population

JSON = os.path.join(artifacts.BENCHMARKS, 'dmc_moves.json')
KINDS = ('electron', 'all')  # dmc.moves (config.py), in the order they run.
PER_TAU = ('tau', 'energy', 'error', 'acceptance', 'tau_eff', 'autocorrelation', 'steps',
           'equilibration', 'wall_s', 'ms_per_step')  # Kept of each time step's record.


def measure(run: str, work: str, kinds: list, seconds: float) -> dict:
  """Runs DMC with each kind of move on a copy of `run` in `seconds` each."""
  taus = dmc_population.time_steps(run)
  results = []
  for kind in kinds:
    copy = os.path.join(work, kind)
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns('dmc', 'dmc.json',
                                                             'dmc_stats.csv', 'plots'))
    moves = (f'--moves={kind}',)
    total = dmc_goals.dmc_steps(copy, seconds, taus, moves)
    equilibration = int(dmc_goals.EQUILIBRATION * total)
    cmd = [sys.executable, '-m', 'ferminet_fast.dmc', f'--run={copy}', *moves,
           f'--steps={total - equilibration}', f'--equilibration={equilibration}']
    wall = dmc_goals._run(cmd)
    d = dmc_goals._read(copy, 'dmc.json')
    results.append({'moves': kind, 'wall_s': wall, 'energy': d['energy'], 'error': d['error'],
                    'per_tau': [{k: r[k] for k in PER_TAU} for r in d['per_tau']],
                    'command': ' '.join(['python', *cmd[1:]])})
  return {'run': os.path.abspath(run), 'system': dmc_population.system_name(run),
          'exact_energy': d['exact_energy'], 'budget_s': seconds, 'taus': list(taus),
          'kinds': results}


def energy_text(value: float, error: float, exact) -> str:
  """mHa from `exact` where there is one, else the energy in Ha."""
  if exact is None:
    return f'{artifacts.pm(value, error, 5)} Ha'
  return f'{artifacts.signed(1e3 * (value - exact), 1e3 * error)} mHa'


def render_table(path: str = JSON) -> str:
  runs = artifacts.read(path)
  if not runs:
    return 'Not measured yet: run `python -m scripts.dmc_moves --run DIR`.'
  newest = {}
  for r in runs:  # The newest of each system (or run directory, where no name was recorded).
    newest[r.data['system'] or os.path.basename(r.data['run'])] = r
  head = ('system', 'moves', 'tau (Ha^-1)', 'acceptance', 'tau_eff / tau', 'ms per step',
          'steps kept', 'autocorrelation (steps)', 'E(tau)', 'E(tau -> 0)')
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for name, run in newest.items():
    d = run.data
    for k in d['kinds']:
      fit = dmc_goals.extrapolated(k)
      chi2 = f', chi^2/dof {fit["chi2_dof"]:.1f}' if fit.get('chi2_dof') is not None else ''
      for i, t in enumerate(k['per_tau']):
        last = (energy_text(fit['energy'], fit['error'], d['exact_energy']) + chi2
                + f' ({k["wall_s"]:.0f} s)' if i == 0 else '')
        lines.append(f'| {name} | {k["moves"]} | {t["tau"]:g} | '
                     f'{t["acceptance"]:.3f} | {t["tau_eff"] / t["tau"]:.3f} | '
                     f'{t["ms_per_step"]:.0f} | {t["steps"]} | {t["autocorrelation"]:.1f} | '
                     f'{energy_text(t["energy"], t["error"], d["exact_energy"])} | {last} |')
  return '\n'.join(lines) + '\n\n' + artifacts.provenance(path, list(newest.values()))


TABLES = {'dmc_moves': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--run', required=True, help='a trained run directory')
  p.add_argument('--seconds', type=float, default=900.0, help='DMC budget of each kind')
  p.add_argument('--moves', default=','.join(KINDS), help='kinds of move, comma-separated')
  p.add_argument('--keep', metavar='DIR', help='keep the DMC copies in DIR')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  kinds = args.moves.split(',')
  if not set(kinds) <= set(KINDS):
    sys.exit(f'--moves: each of {", ".join(KINDS)}, not {args.moves}')
  run_meta = artifacts.meta()
  with tempfile.TemporaryDirectory() as tmp:
    entry = measure(args.run, args.keep or tmp, kinds, args.seconds)
  artifacts.append(args.json, entry, run_meta)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
