"""DMC's time per step at several systems, this checkout against a baseline checkout (an
earlier commit of ours), whole processes alternated: how a change to the DMC step's program
or to the loop that runs it shows in time.

  python -m scripts.dmc_step_time --baseline DIR [--systems He H2 Li Ne] [--steps 400]
                                  [--repeats 3]
  python -m scripts.render_docs                  # put the table into BENCHMARKS.md

DIR is a checkout of the code to compare with (git worktree add --detach DIR COMMIT). For
each system a run is trained here for --train-steps steps without pretraining
(configs/<system>.py; the step time depends on the network and the batch, and on the
acceptance only a little), and each code runs DMC on its own copy of it, as a user runs it:
  python -m ferminet_fast.dmc --run COPY --tau T --steps S --equilibration 0
(cwd the checkout, which `python -m` imports), at the largest of the system's default time
steps (plan.dmc_time_steps), the two codes alternated within each repeat and their order
flipped from one repeat to the next. ms per step is dmc.json's: the loop over the steps from
the first to the last, start-up and compilation excluded; the whole process's seconds are
recorded beside it.

Each system's row is appended to benchmarks/dmc_step_time.json (scripts/artifacts.py) as
soon as it is measured; TABLES renders the newest row of each system into BENCHMARKS.md.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from scripts import artifacts
from scripts import dmc_goals

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(artifacts.BENCHMARKS, 'dmc_step_time.json')
CONFIGS = {'He': 'configs/he.py', 'H2': 'configs/h2.py', 'Li': 'configs/li.py',
           'Be': 'configs/be.py', 'LiH': 'configs/lih.py', 'Ne': 'configs/ne.py',
           'N2': 'configs/n2.py'}
CODES = ('baseline', 'ours')


def _call(cmd: list, cwd: str) -> float:
  """Runs `cmd` in `cwd`; the seconds it took. Raises with its last output if it failed."""
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
  if proc.returncode:
    raise RuntimeError(f'{" ".join(cmd)} (in {cwd}) failed ({proc.returncode}):\n'
                       f'{proc.stderr[-2000:]}')
  return time.perf_counter() - t0


def train(system: str, run: str, steps: int) -> None:
  _call([sys.executable, '-m', 'ferminet_fast.train', '--config', CONFIGS[system],
         f'--config.optim.iterations={steps}', '--config.pretrain.iterations=0',
         f'--config.log.save_path={run}', '--config.log.progress=False'], REPO)


def measure(system: str, work: str, baseline: str, steps: int, repeats: int,
            train_steps: int) -> dict:
  """One system's row: each code's ms per step and process seconds in every repeat."""
  run = os.path.join(work, system)
  train(system, run, train_steps)
  tau = dmc_goals.time_steps(CONFIGS[system])[0]
  with open(os.path.join(run, 'config.json')) as f:
    walkers = json.load(f)['batch_size']
  checkouts = {'baseline': os.path.abspath(baseline), 'ours': REPO}
  out = {c: {'ms_per_step': [], 'process_s': []} for c in CODES}
  for r in range(repeats):
    for code in (CODES if r % 2 == 0 else CODES[::-1]):
      copy = os.path.join(work, f'{system}_{code}')
      shutil.rmtree(copy, ignore_errors=True)
      shutil.copytree(run, copy)
      seconds = _call([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={copy}',
                       f'--tau={tau}', f'--steps={steps}', '--equilibration=0'],
                      checkouts[code])
      with open(os.path.join(copy, 'dmc.json')) as f:
        out[code]['ms_per_step'].append(json.load(f)['per_tau'][0]['ms_per_step'])
      out[code]['process_s'].append(seconds)
  return {'system': system, 'walkers': walkers, 'tau': tau, 'steps': steps, **out}


def _baseline_commit(baseline: str) -> str:
  """The baseline checkout's commit, with ' with uncommitted changes' where it has some."""
  git = lambda *a: subprocess.run(['git', '-C', baseline, *a], capture_output=True,  # noqa
                                  text=True).stdout.strip()
  commit = git('rev-parse', 'HEAD') or 'unknown'
  return commit + (' with uncommitted changes' if git('status', '--porcelain',
                                                      '--untracked-files=no') else '')


def render(path: str = JSON) -> str:
  runs = artifacts.read(path)
  if not runs:
    return 'Not measured yet: run `python -m scripts.dmc_step_time --baseline DIR`.'
  newest = {}
  for run in runs:
    for row in run.data['rows']:
      newest[row['system']] = (run, row)
  head = ('system', 'walkers', 'tau (Ha^-1)', 'steps', 'baseline (ms/step)', 'ours (ms/step)',
          'ours / baseline', 'per repeat', 'process (s): baseline, ours')
  lines = []
  for run, row in newest.values():
    base, ours = (np.asarray(row[c]['ms_per_step']) for c in CODES)
    ratios = ours / base
    cells = [row['system'], str(row['walkers']), f'{row["tau"]:g}', str(row['steps']),
             f'{np.median(base):.2f}', f'{np.median(ours):.2f}',
             f'**{np.median(ours) / np.median(base):.2f}**',
             f'{ratios.min():.2f}–{ratios.max():.2f} (n = {len(ratios)})',
             f'{np.median(row["baseline"]["process_s"]):.0f}, '
             f'{np.median(row["ours"]["process_s"]):.0f}']
    lines.append('| ' + ' | '.join(cells) + ' |')
  short = lambda c: c.partition(' ')[0][:7] + ''.join(c.partition(' ')[1:])  # noqa: E731
  commits = sorted({short(run.data['baseline_commit']) for run, _ in newest.values()})
  note = (f'Medians over the repeats; the baseline is commit {", ".join(commits)}. '
          + artifacts.provenance(path, [run for run, _ in newest.values()]))
  return artifacts.table(head, lines) + '\n\n' + note


TABLES = {'dmc-step-time': ('BENCHMARKS.md', render)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--baseline', required=True, metavar='DIR', help='a checkout to compare with')
  p.add_argument('--systems', nargs='+', default=['He', 'H2', 'Li', 'Ne'])
  p.add_argument('--steps', type=int, default=400, help='DMC steps per process')
  p.add_argument('--repeats', type=int, default=3)
  p.add_argument('--train-steps', type=int, default=100, help='training steps of each run')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  unknown = [s for s in args.systems if s not in CONFIGS]
  if unknown:
    sys.exit(f'--systems: each of {", ".join(CONFIGS)}, not {", ".join(unknown)}')
  if not os.path.isfile(os.path.join(args.baseline, 'ferminet_fast', 'dmc.py')):
    sys.exit(f'--baseline {args.baseline}: not a checkout of this project')
  run_meta = artifacts.meta()
  commit = _baseline_commit(args.baseline)
  with tempfile.TemporaryDirectory() as work:
    for system in args.systems:  # Each system's row kept as soon as it is measured.
      row = measure(system, work, args.baseline, args.steps, args.repeats, args.train_steps)
      artifacts.append(args.json, {'baseline_commit': commit, 'rows': [row]}, run_meta)
      print(json.dumps(row), flush=True)
  print(render(args.json))
  print('python -m scripts.render_docs puts the table into BENCHMARKS.md')


if __name__ == '__main__':
  main()
