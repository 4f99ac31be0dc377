"""Replays a stretch of a kept training from one of its checkpoints: the way to study a
collapse (scripts/soak.py) step by step, with a checkpoint after every step if asked.

  python -m scripts.replay --run DIR --system N2 --seed S --from STEP [--steps 100]
                           [--save-every 1] [--out OUT]
  python -m scripts.render_docs                       # the table in RELIABILITY.md

DIR is a training run by scripts/race.py's settings (scripts/soak.py keeps them, with a
checkpoint every 2 minutes); --system and --seed are the soak's. The newest checkpoint of
DIR at or before STEP is copied to OUT with the run's settings and stats.csv, and the
training resumes there, as a user's resume does, for --steps steps; the replay's energy
of every step is compared with the original's. On the same machine and version the
replay is the same computation, so the energies agree bit for bit: the stretch before a
collapse can be replayed with per-step checkpoints (--save-every 1) and every state looked
at. Each replay is appended to benchmarks/replay.json (scripts/artifacts.py).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from scripts import artifacts
from scripts import ferminet_reference as reference
from scripts import race

JSON = os.path.join(artifacts.BENCHMARKS, 'replay.json')


def checkpoint_at_or_before(run_dir: str, step: int) -> int:
  from ferminet_fast.runtime import checkpoint
  steps = [s for s in checkpoint.saved_steps(run_dir) if s <= step]
  if not steps:
    raise SystemExit(f'{run_dir} has no checkpoint at or before step {step}')
  return steps[-1]


def replay(run_dir: str, system: str, seed: int, start: int, steps: int, out: str,
           save_every: int = 0) -> dict:
  """Resumes a copy of `run_dir` at its newest checkpoint <= `start` in `out` for `steps`
  steps; the replayed steps' energies against the original's."""
  first = checkpoint_at_or_before(run_dir, start)
  os.makedirs(os.path.join(out, 'checkpoints'))
  for name in ('config.json', 'resolved.json', 'stats.csv'):
    shutil.copy(os.path.join(run_dir, name), out)
  shutil.copytree(os.path.join(run_dir, 'checkpoints', str(first)),
                  os.path.join(out, 'checkpoints', str(first)))
  keys = {'log.timers': 'false', 'log.progress': 'false', 'debug.seed': str(seed),
          'optim.iterations': str(first + steps), 'log.save_frequency': '0',
          'log.save_every': str(save_every), 'log.keep_checkpoints': '100000'}
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.train',
                         *reference.ours(system, out, keys)], cwd=race.REPO,
                        capture_output=True, text=True)
  if proc.returncode != 0:
    raise SystemExit(f'the replay failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}')
  original = {int(r['step']): float(r['energy'])
              for r in race._rows(os.path.join(run_dir, 'stats.csv'))}
  replayed = [(int(r['step']), float(r['energy']))
              for r in race._rows(os.path.join(out, 'stats.csv')) if int(r['step']) >= first]
  shared = [(t, e) for t, e in replayed if t in original]
  diff = np.array([abs(e - original[t]) for t, e in shared])
  return {'run': os.path.basename(os.path.normpath(run_dir)), 'system': system, 'seed': seed,
          'from_step': first, 'steps': len(replayed), 'compared': len(shared),
          'identical': bool(len(shared) and not diff.any()),
          'max_energy_difference_ha': float(diff.max()) if len(diff) else float('nan')}


def render_table(path: str = JSON) -> str:
  """RELIABILITY.md's replays: each one's stretch and whether it matched bit for bit."""
  runs = artifacts.read(path)
  if not runs:
    return 'No replay has run yet.'
  lines = ['| run | from step | steps replayed | compared with the original | energies '
           'identical | largest difference (Ha) |', '|' + '---|' * 6]
  for run in runs:
    r = run.data
    lines.append(f'| {r["run"]} | {r["from_step"]} | {r["steps"]} | {r["compared"]} | '
                 f'{"yes" if r["identical"] else "no"} | {r["max_energy_difference_ha"]:.3g} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, runs)])


TABLES = {'replay': ('RELIABILITY.md', render_table)}  # Rendered by scripts/render_docs.py.


def add_arguments(p: argparse.ArgumentParser, steps: int) -> None:
  """The options that say what to replay: --run, --system, --seed, --from, --steps."""
  p.add_argument('--run', required=True, help='a kept training run directory')
  p.add_argument('--system', required=True, choices=('N2', 'C2H4', 'Ne'))
  p.add_argument('--seed', type=int, required=True, help='the training\'s debug.seed')
  p.add_argument('--from', dest='start', type=int, required=True,
                 help='replay from the newest checkpoint at or before this step')
  p.add_argument('--steps', type=int, default=steps, help='updates replayed')


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  add_arguments(p, 100)
  p.add_argument('--save-every', type=int, default=0, help='a checkpoint every this many '
                 'steps of the replay (0: at its end only)')
  p.add_argument('--out', help='the replay\'s run directory (kept; default: a temporary one)')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  work = None if args.out else tempfile.mkdtemp(prefix='replay_')
  out = args.out or os.path.join(work, 'run')
  if os.path.exists(out):
    sys.exit(f'{out} exists: give another --out')
  try:
    r = replay(args.run, args.system, args.seed, args.start, args.steps, out, args.save_every)
  finally:
    if work:
      shutil.rmtree(work, ignore_errors=True)
  artifacts.append(args.json, r)
  print(r)


if __name__ == '__main__':
  main()
