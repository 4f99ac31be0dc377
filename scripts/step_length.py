"""How far each update moves psi, at the walkers whose gradient made it and at walkers that
had no part in it, against the optimizer's own model of it.

  python -m scripts.step_length --run DIR --system N2 --seed S --from STEP [--steps 60]
                                [--offset 20] [--label NAME]
  python -m scripts.render_docs                       # the table in ACCURACY.md

Every step records in stats.csv the squared length of its update u = params_s -
params_(s-1) in the Fisher metric of log|psi| (`fisher_step`: kfac.squared_length of the
change of log|psi| at the step's walkers x_s, centred, the largest 1% left out) and the
length the optimizer's model gave it (`model_step`: KFAC's lr^2 <F~^-1 g, g>, which its norm
constraint bounds). In the races' trainings the first is several times the second. The
update is made from the gradient at x_s, a few hundred walkers, and lies in the span of
their own derivatives J_i = d log|psi(x_i)| / d params: a direction picked from a sample
looks longer on that sample than on another one. This script tells the two apart. It
replays (scripts/replay.py) --steps steps of a kept training from its checkpoint at or
before STEP with a checkpoint after every step, and for every update s measures the length
  - realised at x_s (the change of log|psi|; what fisher_step records, checked against it),
  - to first order at x_s (J_i u, one forward-mode derivative),
  - both again at x_(s+offset) (or x_(s-offset) near the replay's end): the walkers of a
    step `offset` steps away, drawn from nearly the same |psi|^2 but not used by update s,
each over the model's length. Where the lengths at other walkers are near the model's, the
realised length at the step's own walkers measures the update's fit to its batch, not an
error of KFAC's curvature.

Each run is appended to benchmarks/step_length.json (scripts/artifacts.py).
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

from scripts import artifacts
from scripts import race
from scripts import replay

JSON = os.path.join(artifacts.BENCHMARKS, 'step_length.json')
WAYS = ('realised_own', 'first_order_own', 'realised_other', 'first_order_other')


def measure(run_dir: str, offset: int) -> dict:
  """Each update s of `run_dir` whose checkpoints s - 1 and s are both kept, measured the
  four ways of WAYS (the other walkers from checkpoint s + offset, else s - offset), with
  stats.csv's fisher_step and model_step of that update (its row s - 1: rows count the
  updates from 0)."""
  import jax
  from ferminet_fast import plan
  from ferminet_fast.environment import distributed
  from ferminet_fast.optimizers import kfac
  from ferminet_fast.runtime import checkpoint, rundir
  from ferminet_fast.stages import trained
  cfg = rundir.read_config(run_dir)
  cfg.distributed.cpu_devices = 1  # A diagnostic: one device (scripts/outliers.py).
  cfg = plan.settings(cfg, later_stage=True)
  run = trained.TrainedRun.load(run_dir, cfg, 'last', distributed.context(cfg.batch_size))
  parts = run.built.parts
  if parts.geometries is not None or run.built.system.states > 1:
    raise SystemExit(f'{run_dir}: measured for one geometry and one state')

  @jax.jit
  def lengths(old, new, x):
    change = parts.walkers_log_psi(new, x) - parts.walkers_log_psi(old, x)
    u = jax.tree.map(lambda a, b: a - b, new, old)
    linear = jax.jvp(lambda p: parts.walkers_log_psi(p, x), (old,), (u,))[1]
    return kfac.squared_length(change), kfac.squared_length(linear)

  cache = {}  # Step -> (params, walkers' x) of the checkpoints read most recently.

  def state_at(s):
    if s not in cache:
      found, state = checkpoint.restore_latest(run_dir, run.built.state, ('params', 'walkers'), s)
      if found != s:
        raise SystemExit(f'{run_dir}: checkpoint {s} did not restore')
      if len(cache) > 2 * offset + 4:
        cache.pop(min(cache))
      cache[s] = (state.params, state.walkers.x)
    return cache[s]

  rows = {int(r['step']): r for r in race._rows(os.path.join(run_dir, 'stats.csv'))}
  kept = set(checkpoint.saved_steps(run_dir))
  steps = []
  for s in sorted(kept):
    other = s + offset if s + offset in kept else s - offset
    if s - 1 not in kept or other not in kept or other == s or s - 1 not in rows:
      continue
    (old, _), (new, x_own) = state_at(s - 1), state_at(s)
    x_other = state_at(other)[1]
    own = [float(v) for v in lengths(old, new, x_own)]
    others = [float(v) for v in lengths(old, new, x_other)]
    steps.append({'step': s, 'other_walkers_step': other,
                  'fisher_step': float(rows[s - 1]['fisher_step']),
                  'model_step': float(rows[s - 1]['model_step']),
                  **dict(zip(WAYS, own + others))})
  return {'run': os.path.basename(os.path.normpath(run_dir)), 'offset': offset,
          'walkers': int(cfg.batch_size), 'steps': steps, 'summary': summarise(steps)}


def summarise(steps: list) -> dict:
  """Per way of WAYS, the median, 10th and 90th percentiles over the updates of its length
  over the model's; and the median of the other walkers' realised length over the own."""
  if not steps:
    return {}
  model = np.array([s['model_step'] for s in steps])
  out = {}
  for way in WAYS:
    q = np.array([s[way] for s in steps]) / model
    out[way] = {'median': float(np.median(q)), 'p10': float(np.percentile(q, 10)),
                'p90': float(np.percentile(q, 90))}
  out['other_over_own'] = float(np.median([s['realised_other'] / s['realised_own']
                                           for s in steps]))
  return out


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's table: per replayed stretch, each way's length over the model's."""
  runs = artifacts.read(path)
  if not runs:
    return 'No update has been measured yet.'
  lines = ['| training | updates (from step) | walkers | other walkers, steps away | '
           'realised, own walkers | first order, own walkers | realised, other walkers | '
           'first order, other walkers | other / own, realised |', '|' + '---|' * 9]
  for run in runs:
    r, s = run.data, run.data['summary']
    cell = lambda w: f'{s[w]["median"]:.1f} ({s[w]["p10"]:.1f} to {s[w]["p90"]:.1f})'
    lines.append(f'| {r.get("label") or r["run"]} | {len(r["steps"])} '
                 f'({r["steps"][0]["step"]}) | {r["walkers"]} | {r["offset"]} | '
                 + ' | '.join(cell(w) for w in WAYS) + f' | {s["other_over_own"]:.2f} |')
  return '\n'.join(lines + [
      '', 'Each update\'s squared length in the Fisher metric of log|psi| (centred, the '
      'largest 1% of walkers left out) over the length KFAC\'s model gave it (stats.csv\'s '
      'model_step): median over the updates (10th to 90th percentile). ' +
      artifacts.provenance(path, runs)])


TABLES = {'step-length': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--run', required=True, help='a kept training run directory')
  p.add_argument('--system', required=True, choices=('N2', 'C2H4', 'Ne'))
  p.add_argument('--seed', type=int, required=True, help='the training\'s debug.seed')
  p.add_argument('--from', dest='start', type=int, required=True,
                 help='replay from the newest checkpoint at or before this step')
  p.add_argument('--steps', type=int, default=60, help='updates replayed')
  p.add_argument('--offset', type=int, default=20,
                 help='steps between an update and the walkers it is measured at besides its own')
  p.add_argument('--label', help='the training\'s name in the table')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  if not 0 < args.offset < args.steps:
    p.error('--offset must lie between 0 and --steps')
  work = tempfile.mkdtemp(prefix='step_length_')
  try:
    out = os.path.join(work, 'run')
    replayed = replay.replay(args.run, args.system, args.seed, args.start, args.steps, out,
                             save_every=1)
    if not replayed['identical']:
      sys.exit(f'the replay did not match the training: {replayed}')
    r = measure(out, args.offset)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  r.update(run=os.path.basename(os.path.normpath(args.run)), label=args.label,
           system=args.system, seed=args.seed, replay=replayed)
  artifacts.append(args.json, r)
  print(r['summary'])


if __name__ == '__main__':
  main()
