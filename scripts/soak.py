"""Soak: long trainings at the race settings with several seeds, every curve kept, each
judged for a collapse by criteria fixed here before any run.

  python -m scripts.soak --system N2 --seconds 1800 --seeds 4 5 [--keep DIR]
  python -m scripts.soak --system C2H4 --seconds 1800 --seeds 0 1 2
  python -m scripts.soak --system N2 --seeds 10 --set optim.max_fisher_step=0.01
  python -m scripts.render_docs                       # the table in RELIABILITY.md

Each training is the race's (scripts/race.py, `race_ours`: configs/n2.py or configs/c2h4.py
with batch 256, the small network, 10 MCMC moves per step, the step limit raised so that
the budget ends the run, SIGTERM when it is spent), with a checkpoint every
CHECKPOINT_MINUTES and every checkpoint kept, so that a collapse can be replayed from the
last state before it (`--keep DIR` keeps the run directories). The averaged parameters,
what `evaluate` takes by default, are then evaluated (--eval-sweeps after 100 of burn-in).

What counts, per run (the guard's own statistic, config.py's optim.blowup_*):
  - a blown-up step: batch variance of the local energy above BLOWUP_FACTOR times the
    median of the BLOWUP_WINDOW steps before it;
  - a collapse: RUN_OF_BAD or more blown-up steps in a row in stats.csv, or a rewind the
    training announced (a collapse the guard caught: the job survives, the event counts);
  - damaged at the end: the median variance of the last TAIL steps above BLOWUP_FACTOR
    times the median of the BLOWUP_WINDOW before them, or an evaluated energy more than
    DAMAGE_HA above the reference (the exact energy; for a system without one, such as
    ethene, the lowest median energy of the training's curve windows).
In healthy 1800 s N2 races single blown-up steps occur about once per 150 steps, never
more than two in a row (ACCURACY.md); the collapsed race had every step blown up for its
last 110 steps.

Each run is appended to benchmarks/soak.json (scripts/artifacts.py) with its curve: per
window of CURVE_WINDOWS equal parts of the steps, the median energy and variance, the largest
variance, the median acceptance, move width and learning rate, and the median and largest
realised Fisher length of the updates and the median of the optimizer's model of it
(stats.csv's fisher_step and model_step); each step's ratio of the two summarised; the
settings changed from the race's (--set); and the machine's load
averages (1, 5 and 15 minutes) as the training ends, above the cores when other work shared
the machine and the run took fewer steps for it.
"""

import argparse
import os
import re
import sys
import time
from typing import Optional

import numpy as np

from ferminet_fast.runtime import rundir
from scripts import artifacts
from scripts import ferminet_reference as reference
from scripts import race

JSON = os.path.join(artifacts.BENCHMARKS, 'soak.json')
CHECKPOINT_MINUTES = 2.0
BLOWUP_FACTOR = 20.0
BLOWUP_WINDOW = 500
RUN_OF_BAD = 5  # optim.rewind_after's default: the guard rewinds after this many in a row.
TAIL = 100
DAMAGE_HA = 1.0
CURVE_WINDOWS = 200
REWIND = re.compile(r'rewinding to step (\d+)')


def blown_up(variance) -> np.ndarray:
  """(steps,) bool: each step's variance above BLOWUP_FACTOR times the median of the
  BLOWUP_WINDOW steps before it (False for the first BLOWUP_WINDOW steps)."""
  v = np.asarray(variance, float)
  out = np.zeros(len(v), bool)
  for t in range(BLOWUP_WINDOW, len(v)):
    out[t] = v[t] > BLOWUP_FACTOR * np.median(v[t - BLOWUP_WINDOW:t])
  return out


def runs_of(flags) -> list:
  """[(first step, length)] of the stretches of True in `flags`."""
  out, start = [], None
  for t, f in enumerate(list(flags) + [False]):
    if f and start is None:
      start = t
    elif not f and start is not None:
      out.append((start, t - start))
      start = None
  return out


def judge(variance, rewinds: list, evaluated_ha: float, reference_ha: float) -> dict:
  """The criteria of the module docstring applied to one training; `reference_ha` is the
  energy the evaluated one is judged against (Ha)."""
  v = np.asarray(variance, float)
  bad = blown_up(v)
  stretches = [(s, n) for s, n in runs_of(bad) if n >= RUN_OF_BAD]
  damaged_tail = bool(len(v) >= BLOWUP_WINDOW + TAIL and np.median(v[-TAIL:]) >
                      BLOWUP_FACTOR * np.median(v[-TAIL - BLOWUP_WINDOW:-TAIL]))
  damaged_eval = bool(np.isfinite(evaluated_ha) and evaluated_ha - reference_ha > DAMAGE_HA)
  return {'blown_up_steps': int(bad.sum()),
          'longest_run_of_blown_up': max([n for _, n in runs_of(bad)], default=0),
          'collapses': [{'step': int(s), 'length': int(n)} for s, n in stretches],
          'rewinds': rewinds, 'collapsed': bool(stretches or rewinds),
          'damaged_at_end': damaged_tail or damaged_eval}


def curve(rows: list) -> dict:
  """Per window of CURVE_WINDOWS equal parts of the steps: first step, median energy (Ha)
  and variance (Ha^2), largest variance, median acceptance, move width (bohr) and rate."""
  if not rows:
    return {}
  col = lambda k: np.array([rundir.stats_value(r, k) for r in rows])  # noqa: E731
  cols = {k: col(k) for k in ('energy', 'variance', 'pmove', 'move_width', 'lr',
                              'fisher_step', 'model_step')}
  edges = np.unique(np.linspace(0, len(rows), CURVE_WINDOWS + 1).astype(int))
  out = {'step': edges[:-1].tolist()}
  for name, k, f in (('energy', 'energy', np.median), ('variance', 'variance', np.median),
                     ('variance_max', 'variance', np.max), ('pmove', 'pmove', np.median),
                     ('move_width', 'move_width', np.median), ('lr', 'lr', np.median),
                     ('fisher_step', 'fisher_step', np.median),
                     ('fisher_step_max', 'fisher_step', np.max),
                     ('model_step', 'model_step', np.median)):
    out[name] = [float(f(cols[k][a:b])) for a, b in zip(edges[:-1], edges[1:])]
  return out


def fisher_ratio(rows: list) -> Optional[dict]:
  """Each step's realised Fisher length over its optimizer's model of it (stats.csv's
  fisher_step / model_step, vmc/step.py): median, 99th percentile and largest, with the
  step of the largest; None where the run did not record them."""
  ratio = np.array([rundir.stats_value(r, 'fisher_step') / rundir.stats_value(r, 'model_step')
                    if rundir.stats_value(r, 'model_step') > 0 else np.nan for r in rows])
  if not np.isfinite(ratio).any():
    return None
  worst = int(np.nanargmax(ratio))
  return {'median': float(np.nanmedian(ratio)), 'p99': float(np.nanpercentile(ratio, 99)),
          'max': float(ratio[worst]), 'max_step': int(rows[worst]['step'])}


def one(system: str, seconds: float, seed: int, run_dir: str, sweeps: int,
        reference_ha: Optional[float], settings: Optional[dict] = None) -> dict:
  """One training and its evaluation, judged; `settings` {key: value} change the race's."""
  rewinds, lines = [], []

  def on_line(t, line):
    lines.append(line)
    m = REWIND.search(line)
    if m:
      rewinds.append({'to_step': int(m.group(1)), 'at_s': round(t, 1)})

  cmd = [sys.executable, '-m', 'ferminet_fast.train',
         *reference.ours(system, run_dir, {
             'log.timers': 'false', 'log.progress': 'false', 'debug.seed': str(seed),
             'optim.iterations': race.RACE_ITERATIONS,
             'log.save_frequency': str(CHECKPOINT_MINUTES), 'log.keep_checkpoints': '10000',
             **(settings or {})})]
  t0 = time.perf_counter()
  wall = race._run(cmd, seconds, on_line=on_line)
  load = os.getloadavg()  # Other work on the machine shows here (the training's own ~cores).
  rows = race._rows(os.path.join(run_dir, 'stats.csv'))
  ev = race.evaluate_ours(run_dir, sweeps, race.EVAL_BURN_IN, reference_ha)
  evaluated = ev['energy_ha'] if ev else float('nan')
  out = {'system': system, 'seconds': seconds, 'seed': seed, 'steps': len(rows),
         'wall_s': round(wall, 1), 'evaluated_averaged': ev, 'curve': curve(rows),
         'settings': settings or {}, 'fisher_ratio': fisher_ratio(rows),
         'log_tail': ''.join(lines[-5:]) if not rows else None,
         'elapsed_s': round(time.perf_counter() - t0, 1),
         'load_average_at_end': [round(x, 2) for x in load]}
  judged_from = reference_ha
  if judged_from is None:
    judged_from = min(out['curve']['energy'], default=float('nan'))
  out.update(judge([float(r['variance']) for r in rows], rewinds, evaluated, judged_from))
  return out


def _evaluated(ev: Optional[dict]) -> str:
  """An evaluation as mHa from the exact energy, or as the energy (Ha) without one."""
  if not ev:
    return '–'
  if ev.get('error_mha') is None:
    return f'{ev["energy_ha"]:.4f} ± {1e-3 * ev["stat_mha"]:.4f} Ha'
  return f'{ev["error_mha"]:+.1f} ± {ev["stat_mha"]:.1f} mHa'


def render_table(path: str = JSON) -> str:
  """RELIABILITY.md's soak table: every soak training, none averaged away."""
  runs = artifacts.read(path)
  if not runs:
    return 'No soak has run yet.'
  lines = ['| system | settings | budget (s) | seed | steps | blown-up steps | longest run of '
           'them | collapses (first step, length) | rewinds | damaged at the end | evaluated, '
           'averaged parameters | realised / model Fisher length: median, 99%, largest (step) '
           '| load at the end (15 min) | date |', '|' + '---|' * 14]
  for run in runs:
    for r in [run.data]:
      ev = r['evaluated_averaged']
      ratio = r.get('fisher_ratio')
      lines.append(' | '.join([
          f'| {r["system"]}',
          ', '.join(f'`{k} = {v}`' for k, v in r.get('settings', {}).items()) or "the race's",
          f'{r["seconds"]:.0f}', str(r['seed']), str(r['steps']),
          str(r['blown_up_steps']), str(r['longest_run_of_blown_up']),
          ', '.join(f'{c["step"]} ({c["length"]})' for c in r['collapses']) or 'none',
          str(len(r['rewinds'])), 'yes' if r['damaged_at_end'] else 'no',
          _evaluated(ev),
          (f'{ratio["median"]:.0f}, {ratio["p99"]:.0f}, {ratio["max"]:.0f} ({ratio["max_step"]})'
           if ratio else '– (not recorded)'),
          f'{r["load_average_at_end"][2]:.1f}' if r.get('load_average_at_end') else '–',
          (run.meta.get('date') or '')[:10]]) + ' |')
  n = len(runs)
  collapsed = sum(run.data['collapsed'] for run in runs)
  lines += ['', f'{collapsed} of {n} trainings collapsed (a run of {RUN_OF_BAD} or more '
            f'steps whose variance exceeds {BLOWUP_FACTOR:.0f}× the median of the '
            f'{BLOWUP_WINDOW} before, or a rewind). The load average above the machine\'s '
            f'cores means other work shared it (– where not recorded). The realised '
            f'Fisher length of each update over the one its optimizer\'s model gave '
            f'(stats.csv\'s fisher_step / model_step) was recorded from 2026-12-07 on. '
            + artifacts.provenance(path, runs)]
  return '\n'.join(lines)


TABLES = {'soak': ('RELIABILITY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--system', default='N2', choices=('N2', 'C2H4', 'Ne'))
  p.add_argument('--seconds', type=float, default=1800.0, help='wall-time budget of each run')
  p.add_argument('--seeds', type=int, nargs='+', default=[0], help="our debug.seed, one run each")
  p.add_argument('--eval-sweeps', type=int, default=500, help='sweeps of each evaluation')
  p.add_argument('--keep', metavar='DIR', help='keep the run directories in DIR')
  p.add_argument('--set', nargs='+', default=[], metavar='KEY=VALUE',
                 help="settings changed from the race's, e.g. optim.max_fisher_step=0.01")
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  if any('=' not in item for item in args.set):
    p.error('--set takes KEY=VALUE pairs')
  settings = dict(item.split('=', 1) for item in args.set)
  reference_ha = race.reference_of(args.system)
  with race.run_directories(args.keep, 'soak_') as fresh:
    for seed in args.seeds:
      r = one(args.system, args.seconds, seed, fresh(f'{args.system}_seed{seed}'),
              args.eval_sweeps, reference_ha, settings)
      r['reference_ha'] = reference_ha
      artifacts.append(args.json, r)  # One run each: a soak stopped part-way keeps the rest.
      print(f'{args.system} seed {seed}: {r["steps"]} steps, collapsed {r["collapsed"]}, '
            f'damaged {r["damaged_at_end"]}, evaluated {r["evaluated_averaged"]}', flush=True)


if __name__ == '__main__':
  main()
