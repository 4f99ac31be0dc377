"""Accuracy table: trains and evaluates the shipped configs and writes ACCURACY.md.

  python scripts/accuracy.py                      # all systems, ACCURACY.md + benchmarks/accuracy.json
  python scripts/accuracy.py --systems he h2      # a subset (the table keeps the other rows)
  python scripts/accuracy.py --matched            # the equal-wall-time comparison with FermiNet

Each system is two fresh processes, as a user runs them:
  python -m ferminet_fast.train --config configs/<system>.py --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR
The energy is the evaluation's (parameters frozen, reblocked standard error), not the
running mean of training; the wall time is both processes from start to exit.

--matched trains the same configs for fewer steps, so that the whole training process
takes no longer than DeepMind FermiNet's in the reference runs (KFAC, 2-core machine of
the same kind), and reports what FermiNet reported: the running mean of the last 20% of
training. The steps are an exact prefix of the full run (same seed, same schedule).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import dmc_goals
import race

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# (config file stem, label, goal in mHa): the targets of the table.
SYSTEMS = {
    'he': ('He', 0.5),
    'h2': ('H2 (R = 1.4 bohr)', 0.5),
    'li': ('Li', 1.0),
    'lih': ('LiH (R = 3.015 bohr)', 1.0),
    'be': ('Be', 1.6),
}
BUDGET_S = 600.0  # Training + evaluation wall time allowed per system.
# FermiNet's KFAC reference on a 2-core machine (hidden ((64,8),(64,8)), 2 determinants,
# batch 256, 2000 steps, no pretraining): (errors in mHa of its runs, whole-process wall
# time in s of the faster run), and our steps that fit in that time here.
REFERENCE = {
    'he': ('-0.0 / -0.6', 63.0, 2400),
    'h2': ('-0.1 / +0.5', 62.0, 1800),
    'li': ('+2.9 / +3.4', 85.0, 1950),
    'lih': ('+1.8', 115.0, 2300),
    'be': ('+3.1', 114.0, 2150),
}


def _timed(cmd):
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
  if proc.returncode:
    raise RuntimeError(f'{" ".join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}')
  return time.perf_counter() - t0


def _new_run_dir(runs_dir: str, stem: str) -> str:
  """A directory of its own (an existing one would be resumed, not retrained)."""
  stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
  return os.path.join(runs_dir, f'{stem}_{stamp}')


def run_matched(stem: str, runs_dir: str, extra: list) -> dict:
  run = _new_run_dir(runs_dir, stem)
  reported, ref_s, steps = REFERENCE[stem]
  train_s = _timed([sys.executable, '-m', 'ferminet_fast.train', '--config',
                    f'configs/{stem}.py', f'--config.log.save_path={run}',
                    f'--config.optim.iterations={steps}', '--config.log.progress=False', *extra])
  with open(os.path.join(run, 'result.json')) as f:
    res = json.load(f)
  return {'system': SYSTEMS[stem][0], 'config': f'configs/{stem}.py', 'iterations': steps,
          'train_s': train_s, 'error_mha': res['error_mha'], 'stat_mha': 1e3 * res['error'],
          'ferminet_mha': reported, 'ferminet_s': ref_s}


def matched_table(rows) -> str:
  lines = ['| system | FermiNet KFAC (mHa) | FermiNet wall (s) | ours (mHa) | our wall (s) | '
           'our steps |', '|---|---|---|---|---|---|']
  for r in rows:
    lines.append(f'| {r["system"]} | {r["ferminet_mha"]} | {r["ferminet_s"]:.0f} | '
                 f'{r["error_mha"]:+.2f} ± {r["stat_mha"]:.2f} | {r["train_s"]:.0f} | '
                 f'{r["iterations"]} |')
  return '\n'.join(lines)


def run_system(stem: str, runs_dir: str, extra: list) -> dict:
  run = _new_run_dir(runs_dir, stem)
  train_s = _timed([sys.executable, '-m', 'ferminet_fast.train', '--config',
                    f'configs/{stem}.py', f'--config.log.save_path={run}',
                    '--config.log.progress=False', *extra])
  eval_s = _timed([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}'])
  with open(os.path.join(run, 'eval.json')) as f:
    ev = json.load(f)
  with open(os.path.join(run, 'config.json')) as f:
    cfg = json.load(f)
  with open(os.path.join(run, 'timings.json')) as f:
    timings = json.load(f)
  label, goal = SYSTEMS[stem]
  return {
      'system': label, 'config': f'configs/{stem}.py', 'exact': ev['exact_energy'],
      'energy': ev['energy'], 'error': ev['error'], 'error_mha': ev['error_mha'],
      'stat_mha': 1e3 * ev['error'], 'tau': ev['tau'], 'goal_mha': goal,
      'within_goal': abs(ev['error_mha']) <= goal, 'train_s': train_s, 'eval_s': eval_s,
      'wall_s': train_s + eval_s, 'iterations': ev['checkpoint_step'],
      'eval_sweeps': ev['steps'], 'optimizer': cfg['optim']['optimizer'],
      'pretrain': cfg.get('pretrain', {}).get('iterations', 0),
      'network': cfg['network']['network_type'], 'batch_size': cfg['batch_size'],
      'determinants': cfg['network']['determinants'],
      'machine': timings['machine'], 'versions': timings['versions']}


def table(rows) -> str:
  head = ('system', 'exact (Ha)', 'ours (Ha)', 'error (mHa)', 'goal (mHa)', 'wall time (s)',
          'train + eval (s)', 'iterations', 'optimizer', 'pretrain', 'network')
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in rows:
    lines.append('| ' + ' | '.join([
        r['system'], f'{r["exact"]:.6f}', f'{r["energy"]:.5f} ± {r["error"]:.5f}',
        f'{r["error_mha"]:+.2f} ± {r["stat_mha"]:.2f}',
        f'{r["goal_mha"]:.1f}' + ('' if r['within_goal'] else ' (missed)'),
        f'{r["wall_s"]:.0f}', f'{r["train_s"]:.0f} + {r["eval_s"]:.0f}', str(r['iterations']),
        r['optimizer'], str(r['pretrain']), f'{r["network"]}, {r["determinants"]} det, '
        f'batch {r["batch_size"]}']) + ' |')
  return '\n'.join(lines)


def write_markdown(path: str, results: dict) -> None:
  rows, matched = results['full'], results['matched']
  m, v = rows[0]['machine'], rows[0]['versions']
  text = f"""# Accuracy

Energies of the shipped configs (`configs/`), each trained and then evaluated in fresh
processes on one machine, float32. **ours** is the evaluation's energy: parameters frozen,
{min(r['eval_sweeps'] for r in rows)}+ MCMC sweeps of the whole batch, standard error by
reblocking (`python -m ferminet_fast.evaluate`); it is not the running mean of training.
**error** is ours minus the exact non-relativistic (Born-Oppenheimer) energy, with the
statistical error. **wall time** is both processes from start to exit (imports,
compilation and burn-in included).

    python scripts/accuracy.py

Machine: {m['cpu']}, {m['cpu_count']} cores, {m['platform']} ({m['device']}), {m['date'][:10]}.
Versions: {', '.join(f'{k} {val}' for k, val in v.items())}.

{table(rows)}

Each row must be within its goal in at most {BUDGET_S:.0f} s of wall time on 2 CPU cores.
"""
  if matched:
    text += f"""
## At FermiNet's wall time

DeepMind FermiNet on a 2-core machine of the same kind (KFAC, hidden ((64,8),(64,8)),
2 determinants, batch 256, 2000 iterations, no pretraining) against the same configs as
above, stopped after the steps that fit in FermiNet's time here: an exact prefix of the full
runs. Both columns are the running mean of the last 20% of training, as FermiNet reported
it (not an evaluation), with its reblocked error. Start-up on this shared VM varies by a
few seconds from run to run, so a wall time may exceed FermiNet's by that much.

    python scripts/accuracy.py --matched

{matched_table(matched)}
"""
  text += """
SPRING against KFAC, and how these settings were chosen: [BENCHMARKS.md](BENCHMARKS.md#optimizers-kfac-and-spring).
"""
  kept = dmc_goals.kept_section(path)  # scripts/dmc_goals.py's section stays as it was.
  text += ('\n' + kept if kept else '') + race.MARKER + race.section()
  with open(path, 'w') as f:
    f.write(text)


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--systems', nargs='+', default=list(SYSTEMS), choices=list(SYSTEMS))
  p.add_argument('--matched', action='store_true',
                 help="Run the equal-wall-time comparison with FermiNet's reference.")
  p.add_argument('--out', default=os.path.join(REPO, 'ACCURACY.md'))
  p.add_argument('--json', default=os.path.join(REPO, 'benchmarks', 'accuracy.json'))
  p.add_argument('--table-only', action='store_true',
                 help='Rewrite the markdown from the JSON without running anything.')
  p.add_argument('--runs-dir', default='', help='Keep the run directories here (default: a '
                 'temporary directory, deleted afterwards).')
  args, overrides = p.parse_known_args()  # --config.KEY=VALUE: passed to every training.
  if any(not o.startswith('--config.') for o in overrides):
    p.error(f'unrecognized arguments: {" ".join(overrides)}')
  results = {'full': [], 'matched': []}
  if os.path.exists(args.json):  # Rows of systems not re-run are kept.
    with open(args.json) as f:
      results.update(json.load(f))
  kind = 'matched' if args.matched else 'full'
  rows = {r['config']: r for r in results[kind]}
  with tempfile.TemporaryDirectory() as tmp:
    for stem in ([] if args.table_only else args.systems):
      r = (run_matched if args.matched else run_system)(stem, args.runs_dir or tmp, overrides)
      r['date'] = datetime.datetime.now().isoformat(timespec='seconds')
      r['overrides'] = overrides
      rows[r['config']] = r
      print(f'{r["system"]}: {r["error_mha"]:+.2f} +- {r["stat_mha"]:.2f} mHa in '
            f'{r.get("wall_s", r["train_s"]):.0f} s', flush=True)
  results[kind] = [rows[f'configs/{s}.py'] for s in SYSTEMS if f'configs/{s}.py' in rows]
  os.makedirs(os.path.dirname(args.json), exist_ok=True)
  with open(args.json, 'w') as f:
    json.dump(results, f, indent=1)
  if results['full']:
    write_markdown(args.out, results)
  print((matched_table if args.matched else table)(results[kind]))


if __name__ == '__main__':
  main()
