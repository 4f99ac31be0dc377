"""The end of training in a fixed budget: trainings of one system at the race settings under
each arm (learning-rate annealing, the averaging window, the batch), several seeds, each
evaluated as the races evaluate; which gives the lowest energy a user gets.

  python -m scripts.schedule_study --system Ne --steps 9800 --seeds 0 1 \
      --arms default anneal average_window
  python -m scripts.render_docs                     # the table in ACCURACY.md

Each training is `python -m ferminet_fast.train` with the settings of the races
(ferminet_reference.SHARED: configs/ne.py, KFAC, batch 256, the small network, 10 MCMC
moves per step) and debug.seed = the seed, for a fixed number of steps (`optim.iterations`)
rather than a wall-time budget, so that what an arm reaches does not depend on the load of
the machine while it trains. `--steps` is the budget at batch 256; an arm with another
batch trains steps x 256 / batch steps, its walker-steps held (a step's cost grows with
its batch). `--steps 9800` is what our Ne training reached in each of the 600 s races on
the 2-core machine (benchmarks/race.json: 9715-9903 steps).

Both the averaged parameters (what `python -m ferminet_fast.evaluate` takes by default) and
the last are evaluated with the races' sweeps and burn-in (race.evaluate_ours). The arms run
seed by seed (every arm of a seed before the next seed), so a study stopped part-way holds
whole seeds; each training is appended to benchmarks/schedule_study.json as it ends, with
its curve and the ratio of each step's realised Fisher length to its optimizer's model of it
(soak.curve, soak.fisher_ratio).
"""

import argparse
import os
import sys
import time

from scripts import artifacts
from scripts import ferminet_reference as reference
from scripts import race
from scripts import soak

JSON = os.path.join(artifacts.BENCHMARKS, 'schedule_study.json')
BATCH = int(reference.SHARED['batch_size'])
# Each arm: (what it changes, in words; our settings that differ from the races').
ARMS = {
    'default': ('the races\' settings: no annealing, average over the last 3% of updates', {}),
    'anneal': ('each step annealed over the last 30% of the steps to 0.1 times, after '
               "KFAC's norm bound",
               {'optim.lr.anneal': '0.3', 'optim.lr.anneal_to': '0.1'}),
    'average_window': ('average over the last 10% of updates',
                       {'optim.average_fraction': '0.1'}),
    'anneal_average': ('both: steps annealed over the last 30%, average over the last 10%',
                       {'optim.lr.anneal': '0.3', 'optim.lr.anneal_to': '0.1',
                        'optim.average_fraction': '0.1'}),
    'batch512': ('512 walkers, half the steps', {'batch_size': '512'}),
    'robust': ('the median window (median_mad) and the node factor at 0.01 bohr on the '
               "gradient's weights", {'optim.clip_method': 'median_mad',
                                      'optim.node_cutoff': '0.01'}),
    'norm3': ("KFAC's norm bound 3e-3, three times the default: steps 1.7 times longer where "
              'it binds', {'optim.kfac.norm_constraint': '3e-3'}),
    'dense_rest': ('one dense block of the curvature over the parameters outside the dense '
                   'layers (envelopes, Jastrow), not its diagonal (optim.kfac.dense_rest)',
                   {'optim.kfac.dense_rest': 'true'}),
    'fisher_bound': ("each update's length in the Fisher metric at the walkers, centred and "
                     'without the 1% of walkers that change most, bounded at 0.01 '
                     "(optim.max_fisher_step), ten times KFAC's norm bound",
                     {'optim.max_fisher_step': '0.01'}),
    'reduce': ("KFAC-reduce's Kronecker factors of the dense layers (one row per "
               "configuration: its mean input, its summed output derivative), not "
               "KFAC-expand's (every electron's or pair's row its own example)",
               {'optim.kfac.rows': 'reduce'}),
    'split': ("KFAC-reduce's Kronecker block of the dense layers plus KFAC-expand's over each "
              "row's deviation from its configuration's mean input, inverted together",
              {'optim.kfac.rows': 'split'}),
}


def steps_of(arm: str, steps: int) -> int:
  """The arm's steps for a budget of `steps` at the races' batch: walker-steps held."""
  batch = int(ARMS[arm][1].get('batch_size', BATCH))
  return max(1, round(steps * BATCH / batch))


def keys_of(arm: str, steps: int, seed: int) -> dict:
  """Our settings of one training of the study (after the races' shared ones)."""
  return {'log.timers': 'false', 'log.progress': 'false', 'debug.seed': str(seed),
          **ARMS[arm][1], 'optim.iterations': str(steps_of(arm, steps))}


def one(system: str, arm: str, steps: int, seed: int, run_dir: str, sweeps: int,
        reference_ha: float) -> dict:
  """One training and both its evaluations."""
  cmd = [sys.executable, '-m', 'ferminet_fast.train',
         *reference.ours(system, run_dir, keys_of(arm, steps, seed))]
  wall = race._run(cmd, None)
  rows = race._rows(os.path.join(run_dir, 'stats.csv'))
  t0 = time.perf_counter()
  averaged = race.evaluate_ours(run_dir, sweeps, race.EVAL_BURN_IN, reference_ha, 'average')
  last = race.evaluate_ours(run_dir, sweeps, race.EVAL_BURN_IN, reference_ha, 'last')
  return {'system': system, 'arm': arm, 'arm_text': ARMS[arm][0], 'settings': ARMS[arm][1],
          'seed': seed, 'budget_steps': steps, 'steps': len(rows), 'wall_s': round(wall, 1),
          'eval_s': round(time.perf_counter() - t0, 1), 'reference_ha': reference_ha,
          'eval_sweeps': sweeps, 'eval_burn_in': race.EVAL_BURN_IN,
          'evaluated_averaged': averaged, 'evaluated_last': last,
          'curve': soak.curve(rows), 'fisher_ratio': soak.fisher_ratio(rows)}


def _pm(ev) -> str:
  return f'{ev["error_mha"]:+.1f} ± {ev["stat_mha"]:.1f}' if ev else '–'


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's table: every training of the study, by system, budget and arm, then
  each arm's mean over its seeds beside the default arm's on the same seeds. An arm is
  named by what it changed when it ran (its recorded text): what an arm's name means may
  change between versions (the annealing acted on the schedule's rate before the norm
  bound until it acted on the step after it). Each arm's seed is compared with the default
  arm's run of that seed on the same processor where there is one."""
  runs = artifacts.read(path)
  if not runs:
    return 'The study has not run yet.'
  lines = ['| system | budget (steps at batch 256) | arm | what it changes | seed | steps | '
           'evaluated, averaged parameters (mHa) | evaluated, last parameters (mHa) | '
           'date |', '|' + '---|' * 9]
  by_arm: dict = {}  # (system, budget, arm, text) -> {seed: (averaged, last) mHa, processor}.
  # (system, budget, seed, processor) -> the default arm's (averaged, last) there, the newest.
  defaults: dict = {}
  for run in runs:
    r = run.data
    lines.append(f'| {r["system"]} | {r["budget_steps"]} | {r["arm"]} | {r["arm_text"]} | '
                 f'{r["seed"]} | {r["steps"]} | {_pm(r["evaluated_averaged"])} | '
                 f'{_pm(r["evaluated_last"])} | {(run.meta.get("date") or "")[:10]} |')
    if r['evaluated_averaged'] and r['evaluated_last']:
      key = (r['system'], r['budget_steps'], r['arm'], r['arm_text'])
      cpu = (run.meta.get('machine') or {}).get('cpu')
      errs = (r['evaluated_averaged']['error_mha'], r['evaluated_last']['error_mha'], cpu)
      by_arm.setdefault(key, {})[r['seed']] = errs
      if r['arm'] == 'default':
        defaults[r['system'], r['budget_steps'], r['seed'], cpu] = errs
  lines += ['', '| system | budget (steps) | arm | what it changes | seeds | averaged '
            'parameters, mean (mHa) | the default arm\'s, same seeds | difference, each seed '
            '| last parameters, mean (mHa) | the default arm\'s, same seeds | difference, each '
            'seed |', '|' + '---|' * 11]
  for (system, budget, arm, text), errs in by_arm.items():
    newest = by_arm.get((system, budget, 'default', ARMS['default'][0]), {})
    seeds = sorted(errs)
    both = [s for s in seeds if s in newest]
    # Each seed against the default arm on the same processor where it ran there (the same
    # seed's trajectory differs between processors), else against its newest.
    default = {s: defaults.get((system, budget, s, errs[s][2]), newest[s]) for s in both}
    cells = []
    for k in (0, 1):  # Averaged, then last parameters.
      mean = sum(errs[s][k] for s in seeds) / len(seeds)
      base = f'{sum(default[s][k] for s in both) / len(both):+.1f}' if both else '–'
      diffs = ', '.join(f'{errs[s][k] - default[s][k]:+.1f}' for s in both) or '–'
      cells += [f'{mean:+.1f}', base, diffs if arm != 'default' else '–']
    lines.append(f'| {system} | {budget} | {arm} | {text} | {", ".join(map(str, seeds))} | '
                 + ' | '.join(cells) + ' |')
  lines += ['', artifacts.provenance(path, runs)]
  return '\n'.join(lines)


TABLES = {'schedule-study': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  # Systems with an exact energy to measure the arms' errors from (ethene has none).
  p.add_argument('--system', default='Ne', choices=('Ne', 'N2'))
  p.add_argument('--steps', type=int, default=9800,
                 help='training steps at batch 256 (an arm with another batch: walker-steps held)')
  p.add_argument('--seeds', type=int, nargs='+', default=[0, 1], help='our debug.seed values')
  p.add_argument('--arms', nargs='+', default=['default', 'anneal', 'average_window'],
                 choices=list(ARMS))
  p.add_argument('--eval-sweeps', type=int, default=2000, help='sweeps of each evaluation')
  p.add_argument('--keep', metavar='DIR', help='keep the run directories in DIR')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  reference_ha = race.reference_of(args.system)
  with race.run_directories(args.keep, 'schedule_') as fresh:
    for seed in args.seeds:
      for arm in args.arms:
        r = one(args.system, arm, args.steps, seed, fresh(f'{args.system}_{arm}_seed{seed}'),
                args.eval_sweeps, reference_ha)
        artifacts.append(args.json, r)
        print(f'{args.system} {arm} seed {seed}: {r["steps"]} steps in {r["wall_s"]} s, '
              f'averaged {_pm(r["evaluated_averaged"])}, last {_pm(r["evaluated_last"])} mHa',
              flush=True)


if __name__ == '__main__':
  main()
