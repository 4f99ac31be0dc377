"""Time to energy: ours and DeepMind FermiNet trained for the same wall time, one after the
other on the same machine, and the energy each has when its time is up.

  bash ../shared/anchors/setup-ferminet.sh /tmp/fn        # FermiNet, once
  python scripts/race.py --ferminet /tmp/fn --system Ne --seconds 600
  python scripts/race.py --ferminet /tmp/fn --system Ne N2 --seconds 1800 --evaluate
  python scripts/race.py --table-only                     # rewrite ACCURACY.md from the JSON

Both are whole processes started cold (imports, HF pretraining, compilation and burn-in
count against the budget) with the settings of configs/ne.py and configs/n2.py: KFAC,
batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC moves per step; each code's
other settings are its defaults (FermiNet pretrains for 1000 steps). When the budget is
spent the process gets SIGTERM. The energy is what FermiNet reports: the mean of the last
20% of the training steps done, with a reblocked standard error. `--evaluate` adds an
evaluation of each code's final parameters, not timed: ours by python -m
ferminet_fast.evaluate, FermiNet's by its own inference mode (`optim.optimizer='none'`,
restored from its last checkpoint, which it is asked to write every 15 s), the same number
of sweeps after the same burn-in. The training mean is measured on walkers that the
previous update was fitted to, which biases it low at these sizes (BENCHMARKS.md,
"Convergence at size"); the evaluated energies are the ones to quote.

Every training step is given its wall time: ours from stats.csv, read once a second;
FermiNet's from its per-step log line, read as it is printed. The results go to
benchmarks/race.json (rows of other systems and budgets are kept), the energy-against-time
curves to benchmarks/race_<system>_<seconds>s.png, and the table into ACCURACY.md.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ferminet_fast.physics import systems  # noqa: E402
from ferminet_fast.run import cli  # noqa: E402
from ferminet_fast.vmc import stats  # noqa: E402
import ferminet_reference as reference  # noqa: E402

SOURCES = {  # Where the exact energy in our config (physics/systems.py for atoms) comes from.
    'Ne': 'Chakravorty et al. 1993',
    'N2': 'Pfau et al. 2020, Table 1',
}
GOALS = (('Ne', 600), ('Ne', 1800), ('N2', 1800))  # Races whose error ratio must be <= 0.5.
JSON = os.path.join(REPO, 'benchmarks', 'race.json')
ACCURACY_MD = os.path.join(REPO, 'ACCURACY.md')
EVAL_BURN_IN = 100  # Sweeps discarded before each evaluation (both codes' default).
MARKER = '\n<!-- scripts/race.py writes from here to the end -->\n'


def _run(cmd: list, seconds: Optional[float], on_line=None, env=None) -> float:
  """Runs cmd; SIGTERM at `seconds` after start (SIGKILL 60 s later; None: no limit).
  on_line(t, line) sees every stderr line as it comes. Returns the seconds it lived."""
  t0 = time.perf_counter()
  proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=env)

  def read():
    for line in proc.stderr:
      if on_line:
        on_line(time.perf_counter() - t0, line)

  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  try:
    proc.wait(timeout=seconds)
  except subprocess.TimeoutExpired:
    proc.send_signal(signal.SIGTERM)
    try:
      proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
  reader.join(timeout=10)
  return time.perf_counter() - t0


def _rows(path: str) -> list:
  try:
    with open(path) as f:
      return list(csv.DictReader(f))
  except FileNotFoundError:
    return []


def race_ours(name: str, seconds: float, run_dir: str, extra: list) -> dict:
  """Our training for `seconds`; steps timed by polling stats.csv once a second."""
  stats_csv = os.path.join(run_dir, 'stats.csv')
  times, stop = [], threading.Event()  # times[i]: when step i was first seen, s.

  def poll(t0):
    while not stop.is_set():
      n = len(_rows(stats_csv))
      times.extend([time.perf_counter() - t0] * (n - len(times)))
      stop.wait(1.0)

  cmd = [sys.executable, '-m', 'ferminet_fast.train',
         *reference.ours(name, run_dir, {'log.timers': 'false', 'log.progress': 'false'}),
         *extra]
  poller = threading.Thread(target=poll, args=(time.perf_counter(),), daemon=True)
  poller.start()
  wall = _run(cmd, seconds)
  stop.set()
  poller.join()
  rows = _rows(stats_csv)
  times.extend([wall] * (len(rows) - len(times)))
  energy = np.array([float(r['energy']) for r in rows])
  variance = np.array([float(r['variance']) for r in rows])
  return {'t': times[:len(rows)], 'energy': energy.tolist(), 'variance': variance.tolist(),
          'wall_s': wall}


FERMINET_SAVE_MINUTES = 0.25  # FermiNet's checkpoint interval in a race (its default: 10).


def _ferminet_steps(fn_dir: str, name: str, run_dir: str, keys: dict, seconds: float) -> dict:
  """Runs FermiNet; its per-step log lines as times, energies and `ew_variance` (FermiNet's
  exponentially weighted variance of the step energies, not our local-energy variance)."""
  t, energy, variance = [], [], []

  def on_line(now, line):
    m = reference.STEP_LINE.search(line)
    if m:
      t.append(now)
      energy.append(float(m.group(2)))
      variance.append(float(m.group(3)))

  wall = _run(reference.command(fn_dir, name, run_dir, keys), seconds, on_line)
  return {'t': t, 'energy': energy, 'ew_variance': variance, 'wall_s': wall}


def race_ferminet(fn_dir: str, name: str, seconds: float, run_dir: str) -> dict:
  """FermiNet's training for `seconds`, checkpointing every FERMINET_SAVE_MINUTES."""
  return _ferminet_steps(fn_dir, name, run_dir,
                         {'optim.iterations': '1000000',
                          'log.save_frequency': str(FERMINET_SAVE_MINUTES)}, seconds)


def checkpoint_step(path: str) -> int:
  """The step of FermiNet's checkpoint file qmcjax_ckpt_NNNNNN.npz."""
  return int(re.search(r'qmcjax_ckpt_(\d+)\.npz$', path).group(1))


def evaluate_ferminet(fn_dir: str, name: str, run_dir: str, out_dir: str, sweeps: int,
                      burn_in: int, exact: float) -> Optional[dict]:
  """FermiNet's inference mode on its newest checkpoint in run_dir: `burn_in` sweeps, then
  `sweeps` sweeps with the parameters fixed; their energies reblocked, as ours are."""
  files = sorted(f for f in os.listdir(run_dir) if f.startswith('qmcjax_ckpt_'))
  if not files:
    return None
  run = _ferminet_steps(fn_dir, name, out_dir,
                        {'optim.optimizer': 'none', 'optim.iterations': str(sweeps),
                         'mcmc.burn_in': str(burn_in), 'log.restore_path': run_dir,
                         'log.save_frequency': '1000'}, None)
  if len(run['energy']) < 2:
    return None
  est = stats.reblock(np.asarray(run['energy']))
  return {'error_mha': 1e3 * (est.mean - exact), 'stat_mha': 1e3 * est.error,
          'checkpoint_step': checkpoint_step(files[-1]), 'sweeps': len(run['energy'])}


def evaluate_ours(run_dir: str, sweeps: int, burn_in: int,
                  parameters: str = 'average') -> Optional[dict]:
  """python -m ferminet_fast.evaluate on our newest checkpoint: its `parameters` ('average',
  what a user evaluates by default, or 'last')."""
  if not os.path.exists(os.path.join(run_dir, 'checkpoints')):
    return None
  subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run_dir}',
                  f'--steps={sweeps}', f'--burn_in={burn_in}', f'--parameters={parameters}'],
                 cwd=REPO, check=True, capture_output=True)
  with open(os.path.join(run_dir, 'eval.json')) as f:
    ev = json.load(f)
  return {'error_mha': ev['error_mha'], 'stat_mha': 1e3 * ev['error'],
          'checkpoint_step': ev['checkpoint_step'], 'sweeps': ev['steps'],
          'parameters': ev.get('parameters', 'last'),
          'average_updates': ev.get('average_updates', 1.0)}


def summary(run: dict, exact: float) -> dict:
  """Mean of the last 20% of steps with its reblocked error, as mHa from exact."""
  e = np.asarray(run['energy'])
  if len(e) < 10:
    return {'steps': int(len(e)), 'error_mha': float('nan'), 'stat_mha': float('nan')}
  tail = e[int(0.8 * len(e)):]
  est = stats.reblock(tail)
  return {'steps': int(len(e)), 'energy': est.mean, 'error_mha': 1e3 * (est.mean - exact),
          'stat_mha': 1e3 * est.error, 'first_step_s': float(run['t'][0])}


def plot(entry: dict, path: str) -> None:
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(7, 4))
  for who, style in (('ferminet', 'C1'), ('ours', 'C0')):
    run = entry[who]
    t, e = np.asarray(run['t']), 1e3 * (np.asarray(run['energy']) - entry['exact'])
    if not len(e):
      continue
    w = max(1, len(e) // 40)  # Median over windows of 2.5% of the steps.
    n = len(e) // w * w
    name = 'DeepMind FermiNet' if who == 'ferminet' else 'ferminet_fast'
    ax.plot(t[:n].reshape(-1, w).mean(1), np.median(e[:n].reshape(-1, w), axis=1), style,
            label=f'{name} ({entry[who + "_summary"]["error_mha"]:+.0f} mHa, training)')
    ev = entry.get(who + '_evaluated')
    if ev:  # The final parameters evaluated, drawn at the end of the run.
      ax.errorbar([run['wall_s']], [ev['error_mha']], yerr=[ev['stat_mha']], fmt='o',
                  color=style, capsize=3, label=f'{name} evaluated ({ev["error_mha"]:+.0f} mHa)')
  ax.axhline(0, color='k', lw=0.5)
  ax.set_yscale('symlog', linthresh=10)
  ax.set_xlabel('wall time since process start (s)')
  ax.set_ylabel('energy - exact (mHa), median per 2.5% of steps')
  ax.set_title(f'{entry["system"]}, {entry["seconds"]:.0f} s on {entry["machine"]}')
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _ratio(ours: Optional[dict], theirs: Optional[dict]) -> str:
  if not ours or not theirs or not theirs['error_mha'] > 0:
    return '–'
  return f'{ours["error_mha"] / theirs["error_mha"]:.2f}'


def _error(e: Optional[dict]) -> str:
  return f'{e["error_mha"]:+.1f} ± {e["stat_mha"]:.1f}' if e else '–'


def _last(e: dict) -> Optional[dict]:
  """Our evaluation of the last parameters (what FermiNet's evaluation takes), or None."""
  ev = e.get('ours_evaluated')
  if e.get('ours_evaluated_last'):
    return e['ours_evaluated_last']
  return ev if ev and ev.get('parameters', 'last') == 'last' else None


def _verdict(e: dict) -> str:
  """The goal judged on evaluated energies, like for like (both codes' last parameters):
  a bound in mHa on our error ('<= +35 mHa ...') or on the ratio ('<= 0.5x FermiNet')."""
  ours, theirs, goal = _last(e), e.get('ferminet_evaluated'), e.get('goal', '')
  if not ours or not theirs:
    return 'not judged (no like-for-like evaluation)'
  bound = re.match(r'≤ \+([0-9.]+) mHa', goal)
  if bound:
    met = ours['error_mha'] <= float(bound.group(1))
  elif '0.5×' in goal:
    met = ours['error_mha'] <= 0.5 * theirs['error_mha']
  else:
    return ''
  return 'met' if met else 'missed'


def table(entries: list) -> str:
  lines = ['| system | budget (s) | FermiNet: steps, training error (mHa) | ours: steps, '
           'training error (mHa) | ratio | FermiNet evaluated (mHa) | ours evaluated, last '
           'parameters (mHa) | ratio evaluated, like for like | ours evaluated, averaged '
           'parameters (mHa) | goal | goal judged like for like, one race |',
           '|' + '---|' * 11]
  for e in entries:
    f, o = e['ferminet_summary'], e['ours_summary']
    fe, last = e.get('ferminet_evaluated'), _last(e)
    averaged = e.get('ours_evaluated') if e.get('ours_evaluated') is not last else None
    lines.append(f'| {e["system"]} | {e["seconds"]:.0f} | {f["steps"]}, {_error(f)} | '
                 f'{o["steps"]}, {_error(o)} | {_ratio(o, f)} | {_error(fe)} | '
                 f'{_error(last)} | {_ratio(last, fe)} | {_error(averaged)} | '
                 f'{e.get("goal", "")} | {_verdict(e)} |')
  return '\n'.join(lines)


def section(path: str = JSON) -> str:
  """The ACCURACY.md section of the races in `path` ('' when there are none)."""
  if not os.path.exists(path):
    return ''
  with open(path) as f:
    entries = json.load(f)
  if not entries:
    return ''
  lines = ['', '## Time to energy against DeepMind FermiNet', '',
           'Each row is one run of `scripts/race.py`: FermiNet (commit 0ce3411, jax 0.8.3) and '
           'ours, one after the other on the same machine, each a whole process stopped when '
           'its budget was spent (pretraining, compilation and burn-in included). Error: the '
           'mean of the last 20% of training steps minus the exact energy, reblocked standard '
           'error; "evaluated": the final parameters (FermiNet: its last checkpoint, written '
           'every 15 s) evaluated afterwards with fixed parameters, not timed, by each code '
           '(FermiNet: its inference mode), the same number of sweeps after 100 of burn-in. '
           'Goals are judged on the evaluated energies, like for like: both codes\' last '
           'parameters. Ours averaged over the last 3% of the updates '
           '(`optim.average_fraction`, what `python -m ferminet_fast.evaluate` takes by '
           'default; rows before it have none) are given beside, labelled, and are not '
           'compared with FermiNet\'s last parameters. Each row is one race: between two races '
           'of the same settings FermiNet\'s evaluated error moved by several of its error '
           'bars (BENCHMARKS.md), so one race does not resolve a ratio near 0.5. '
           'The training mean is biased low at Ne (BENCHMARKS.md, "Convergence at size"): '
           'quote the evaluated energies; rows without them predate that finding. '
           'Settings: KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC moves '
           'per step, each code\'s defaults otherwise (both pretrain for 1000 steps).', '',
           table(entries), '']
  done = {(e['system'], e['seconds']) for e in entries}
  missing = [f'{n} {b} s' for n, b in GOALS if (n, b) not in done]
  lines += ['Goals: a ratio of evaluated errors of at most 0.5 for '
            + ', '.join(f'{n} {b} s' for n, b in GOALS) + ' (Ne 600 s also at most +35 mHa).'
            + (f' Not yet run: {", ".join(missing)}.' if missing else ''), '']
  for e in entries:
    lines.append(f'- {e["system"]}, {e["seconds"]:.0f} s: {e["date"][:10]}, {e["machine"]}; '
                 f'ours on {e["versions"]}; first training step after '
                 f'{e["ferminet_summary"].get("first_step_s", float("nan")):.0f} s (FermiNet) '
                 f'and {e["ours_summary"].get("first_step_s", float("nan")):.0f} s (ours). '
                 +
                 f'![{e["system"]} {e["seconds"]:.0f} s]({e["png"]})')
  return '\n'.join(lines) + '\n'


def write_section(path: str) -> None:
  """Replaces the race section at the end of ACCURACY.md (after MARKER) with section()."""
  with open(path) as f:
    text = f.read()
  with open(path, 'w') as f:
    f.write(text.split(MARKER)[0].rstrip('\n') + '\n' + MARKER + section())


def _machine() -> str:
  from ferminet_fast.environment import machine
  m = machine.machine()
  return f'{m["cpu"]}, {m["cpu_count"]} cores'


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--ferminet', help='directory made by ../shared/anchors/setup-ferminet.sh')
  p.add_argument('--system', nargs='+', default=['Ne'], choices=list(SOURCES))
  p.add_argument('--seconds', type=float, default=600.0, help='wall-time budget of each code')
  p.add_argument('--evaluate', action='store_true',
                 help="also evaluate both codes' final parameters (not timed)")
  p.add_argument('--eval-sweeps', type=int, default=2000, help='sweeps of each evaluation')
  p.add_argument('--goal', default='', help='text for the goal column')
  p.add_argument('--table-only', action='store_true')
  p.add_argument('--keep', metavar='DIR', help='keep both run directories in DIR/<system>_<s>s')
  args, extra = p.parse_known_args()  # --config.KEY=VALUE: passed to our training only.
  if any(not o.startswith('--config.') for o in extra):
    p.error(f'unrecognized arguments: {" ".join(extra)}')
  if not args.table_only and not args.ferminet:
    p.error('--ferminet DIR is needed (bash ../shared/anchors/setup-ferminet.sh DIR)')
  entries = json.load(open(JSON)) if os.path.exists(JSON) else []
  if args.table_only:
    for entry in entries:
      plot(entry, os.path.join(REPO, entry['png']))
  for name in ([] if args.table_only else args.system):
    source = SOURCES[name]
    our_config = cli.load_config_file(os.path.join(REPO, reference.SYSTEMS[name][0]))
    exact = systems.make_system(our_config.system).exact_energy
    with tempfile.TemporaryDirectory() as tmp:
      fn = race_ferminet(args.ferminet, name, args.seconds, os.path.join(tmp, 'fn'))
      ours_dir = os.path.join(tmp, 'ours')
      ours = race_ours(name, args.seconds, ours_dir, extra)
      evaluated = fn_evaluated = last = None
      if args.evaluate:
        last = evaluate_ours(ours_dir, args.eval_sweeps, EVAL_BURN_IN, 'last')
        evaluated = evaluate_ours(ours_dir, args.eval_sweeps, EVAL_BURN_IN)  # eval.json's.
        fn_evaluated = evaluate_ferminet(args.ferminet, name, os.path.join(tmp, 'fn'),
                                         os.path.join(tmp, 'fn_eval'), args.eval_sweeps,
                                         EVAL_BURN_IN, exact)
      with open(os.path.join(ours_dir, 'timings.json')) as f:
        versions = json.load(f)['versions']
      if args.keep:
        shutil.copytree(tmp, os.path.join(args.keep, f'{name}_{args.seconds:.0f}s'),
                        dirs_exist_ok=True)
    entry = {'system': name, 'seconds': args.seconds, 'exact': exact, 'exact_source': source,
             'date': datetime.datetime.now().isoformat(timespec='seconds'),
             'machine': _machine(), 'versions': ', '.join(f'{k} {v}' for k, v in versions.items()),
             'overrides': extra, 'goal': args.goal, 'ferminet': fn, 'ours': ours,
             'ferminet_summary': summary(fn, exact), 'ours_summary': summary(ours, exact),
             'ours_evaluated': evaluated, 'ours_evaluated_last': last,
             'ferminet_evaluated': fn_evaluated,
             'png': f'benchmarks/race_{name}_{args.seconds:.0f}s.png'}
    plot(entry, os.path.join(REPO, entry['png']))
    entries = [e for e in entries if (e['system'], e['seconds']) != (name, args.seconds)]
    entries.append(entry)
    entries.sort(key=lambda e: (list(SOURCES).index(e['system']), e['seconds']))
    os.makedirs(os.path.dirname(JSON), exist_ok=True)
    with open(JSON, 'w') as f:
      json.dump(entries, f)
    print(table([entry]), flush=True)
  write_section(ACCURACY_MD)
  print(table(entries))


if __name__ == '__main__':
  main()
