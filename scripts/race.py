"""Time to energy: ours and DeepMind FermiNet trained for the same wall time, one after the
other on the same machine, and the energy each has when its time is up; repeated.

  bash ../shared/anchors/setup-ferminet.sh /tmp/fn        # FermiNet, once
  python -m scripts.race --ferminet /tmp/fn --system Ne --seconds 600
  python -m scripts.race --ferminet /tmp/fn --system Ne N2 --seconds 1800 --repeats 3
  python -m scripts.render_docs                           # the tables in ACCURACY.md
  python -m scripts.race --replot      # each group's latest curves again, from the artifact

Both are whole processes started cold (imports, HF pretraining, compilation and burn-in
count against the budget) with the settings of configs/ne.py and configs/n2.py: KFAC,
batch 256, hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC moves per step; each code's
other settings are its defaults (FermiNet pretrains for 1000 steps); both codes' step
limits are raised (RACE_ITERATIONS) so that the budget, not the config, ends each run.
FermiNet runs at its best settings on a CPU machine unless `--peer-settings default`
(ferminet_reference.py: its folx Laplacian, its BLAS held to one thread as ours is). When
the budget is spent the process gets SIGTERM.

Each (system, budget) pair is raced `--repeats` more times (default 3) with different seeds
(ours: debug.seed = --seed + repeat; FermiNet seeds itself from the clock), alternating
which code goes first; the repeats continue the numbering of the races the artifact already
holds for that system, budget and FermiNet settings, so races added later keep alternating.
After each race each code's default output is evaluated the same way, not timed (the
same sweeps after the same burn-in): ours the parameters averaged over the last updates,
what `python -m ferminet_fast.evaluate` takes by default, and FermiNet's last parameters
(it does not average), by its own inference mode restored from its last checkpoint, which
it is asked to write every 15 s. These are the headline; our last parameters are evaluated
too (--parameters last) and compared with FermiNet's beside it, last against last. The
training mean (the last 20% of steps, as FermiNet reports it) is kept too; it is biased
low at these sizes (BENCHMARKS.md).

Every race is appended to benchmarks/race.json (scripts/artifacts.py: all runs kept, with
the machine, versions of both codes, commit, command and FermiNet's settings); the table
gives per (system, budget, FermiNet settings) the ratio of evaluated errors as mean ±
standard deviation over the races, and judges the goals race by race (GOAL_TEXT).
"""

import argparse
import contextlib
import csv
import json
import statistics
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

import jax
import numpy as np

from ferminet_fast.physics import periodic_hartree_fock
from ferminet_fast.physics import systems
from ferminet_fast.runtime import cli
from ferminet_fast.vmc import stats
from scripts import artifacts
from scripts import ferminet_reference as reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The electron gas has no exact energy in our configs: its errors are measured from the
# Hartree-Fock energy of its cell (negative: the correlation energy each code recovers).
HARTREE_FOCK = 'Hartree-Fock energy of the cell, periodic_hartree_fock.electron_gas_energy'
SOURCES = {  # Where the exact energy in our config (physics/systems.py for atoms) comes from.
    'Ne': 'Chakravorty et al. 1993',
    'N2': 'Pfau et al. 2020, Table 1',
    'HEG': HARTREE_FOCK,
}
# The goals, judged race by race on the codes' default outputs (default_ratio): each of our
# evaluated errors at most ABSOLUTE_GOAL_MHA and at most RATIO_GOAL times FermiNet's in the
# same race; for the electron gas (DIFFERENCE_GOALS) ours lower than FermiNet's by more than
# the combined standard error.
GOALS = (('Ne', 600), ('Ne', 1800), ('N2', 1800))
LOWER = 'ours lower, beyond the combined error bar, in every race'
RATIO_GOAL = {('Ne', 600): 0.2, ('Ne', 1800): 0.15, ('N2', 1800): 0.2}
ABSOLUTE_GOAL_MHA = {('Ne', 600): 15.0, ('Ne', 1800): 5.0, ('N2', 1800): 30.0}
GOAL_TEXT = {**{k: f'≤ +{ABSOLUTE_GOAL_MHA[k]:.0f} mHa and ≤ {RATIO_GOAL[k]}× FermiNet in every '
                   'race' for k in GOALS},
             ('HEG', 600): LOWER, ('HEG', 1800): LOWER}
# Races judged on the difference of the evaluated energies instead of the ratio of errors:
# the electron gas has no exact energy of its own to measure errors from.
DIFFERENCE_GOALS = (('HEG', 600), ('HEG', 1800))
JSON = os.path.join(REPO, 'benchmarks', 'race.json')
EVAL_BURN_IN = 100  # Sweeps discarded before each evaluation (both codes' default).
# Settings of FermiNet in races recorded before the artifact said: the script then passed
# no Laplacian key and no BLAS thread variables, so FermiNet ran with its defaults.
LEGACY_PEER_SETTINGS = 'default'


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
    _stop(proc)
  except BaseException:  # This script interrupted or stopped: the run is not left behind.
    _stop(proc)
    raise
  reader.join(timeout=10)
  return time.perf_counter() - t0


def _stop(proc: subprocess.Popen) -> None:
  """SIGTERM to `proc` (a training checkpoints and exits), SIGKILL if alive 60 s later."""
  proc.send_signal(signal.SIGTERM)
  try:
    proc.wait(timeout=60)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()


def _rows(path: str) -> list:
  try:
    with open(path) as f:
      return list(csv.DictReader(f))
  except FileNotFoundError:
    return []


RACE_ITERATIONS = '1000000'  # Both codes' step limit in a race: the budget ends each run.


def race_ours(name: str, seconds: float, run_dir: str, extra: list, seed: int = 0) -> dict:
  """Our training for `seconds` with debug.seed = `seed`, its step limit raised as
  FermiNet's is (the learning-rate schedule and the parameter average depend on the steps
  done, not on the limit); steps timed by polling stats.csv once a second."""
  stats_csv = os.path.join(run_dir, 'stats.csv')
  times, stop = [], threading.Event()  # times[i]: when step i was first seen, s.

  def poll(t0):
    while not stop.is_set():
      n = len(_rows(stats_csv))
      times.extend([time.perf_counter() - t0] * (n - len(times)))
      stop.wait(1.0)

  cmd = [sys.executable, '-m', 'ferminet_fast.train',
         *reference.ours(name, run_dir, {'log.timers': 'false', 'log.progress': 'false',
                                         'debug.seed': str(seed),
                                         'optim.iterations': RACE_ITERATIONS}),
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


def _ferminet_steps(fn_dir: str, name: str, run_dir: str, keys: dict, seconds: float,
                    settings: str = 'best') -> dict:
  """Runs FermiNet; its per-step log lines as times, energies and `ew_variance` (FermiNet's
  exponentially weighted variance of the step energies, not our local-energy variance)."""
  t, energy, variance = [], [], []

  def on_line(now, line):
    m = reference.STEP_LINE.search(line)
    if m:
      t.append(now)
      energy.append(float(m.group(2)))
      variance.append(float(m.group(3)))

  wall = _run(reference.command(fn_dir, name, run_dir, keys, settings), seconds, on_line,
              env=reference.peer_env(settings))
  return {'t': t, 'energy': energy, 'ew_variance': variance, 'wall_s': wall}


def race_ferminet(fn_dir: str, name: str, seconds: float, run_dir: str,
                  settings: str = 'best') -> dict:
  """FermiNet's training for `seconds`, checkpointing every FERMINET_SAVE_MINUTES."""
  return _ferminet_steps(fn_dir, name, run_dir,
                         {'optim.iterations': RACE_ITERATIONS,
                          'log.save_frequency': str(FERMINET_SAVE_MINUTES)}, seconds, settings)


def checkpoint_step(path: str) -> int:
  """The step of FermiNet's checkpoint file qmcjax_ckpt_NNNNNN.npz."""
  return int(re.search(r'qmcjax_ckpt_(\d+)\.npz$', path).group(1))


def evaluate_ferminet(fn_dir: str, name: str, run_dir: str, out_dir: str, sweeps: int,
                      burn_in: int, exact: float, settings: str = 'best') -> Optional[dict]:
  """FermiNet's inference mode on its newest checkpoint in run_dir: `burn_in` sweeps, then
  `sweeps` sweeps with the parameters fixed; their energies reblocked, as ours are. A sweep
  whose logged energy (FermiNet's mean over its walkers) is not finite is left out and
  counted in 'nonfinite': ours leaves out each non-finite local energy, but FermiNet's log
  holds only the mean, so the whole sweep goes."""
  files = sorted(f for f in os.listdir(run_dir) if f.startswith('qmcjax_ckpt_'))
  if not files:
    return None
  run = _ferminet_steps(fn_dir, name, out_dir,
                        {'optim.optimizer': 'none', 'optim.iterations': str(sweeps),
                         'mcmc.burn_in': str(burn_in), 'log.restore_path': run_dir,
                         'log.save_frequency': '1000'}, None, settings)
  energies = np.asarray(run['energy'], float)
  finite = energies[np.isfinite(energies)]
  if len(finite) < 2:
    return None
  est = stats.reblock(finite)
  return {'error_mha': 1e3 * (est.mean - exact), 'stat_mha': 1e3 * est.error,
          'checkpoint_step': checkpoint_step(files[-1]), 'sweeps': len(finite),
          'nonfinite': int(len(energies) - len(finite))}


def evaluate_ours(run_dir: str, sweeps: int, burn_in: int, exact: Optional[float],
                  parameters: str = 'average') -> Optional[dict]:
  """python -m ferminet_fast.evaluate on our newest checkpoint: its `parameters` ('average',
  what a user evaluates by default, or 'last'); the energy (Ha) and its error from `exact`
  (Ha), as FermiNet's (None without a reference)."""
  if not os.path.exists(os.path.join(run_dir, 'checkpoints')):
    return None
  subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run_dir}',
                  f'--steps={sweeps}', f'--burn_in={burn_in}', f'--parameters={parameters}'],
                 cwd=REPO, check=True, capture_output=True)
  with open(os.path.join(run_dir, 'eval.json')) as f:
    ev = json.load(f)
  return {'energy_ha': ev['energy'],
          'error_mha': None if exact is None else 1e3 * (ev['energy'] - exact),
          'stat_mha': 1e3 * ev['error'],
          'checkpoint_step': ev['checkpoint_step'], 'sweeps': ev['steps'],
          'parameters': ev.get('parameters', 'last'),
          'average_updates': ev.get('average_updates', 1.0)}


def summary(run: dict, exact: float) -> dict:
  """Mean of the last 20% of steps with its reblocked error, as mHa from exact (steps whose
  logged energy is not finite left out)."""
  e = np.asarray(run['energy'], float)
  e = e[np.isfinite(e)]
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
    ev = entry.get('ferminet_evaluated') if who == 'ferminet' else last_evaluated(entry)
    if ev:  # The last parameters evaluated, drawn at the end of the run.
      ax.errorbar([run['wall_s']], [ev['error_mha']], yerr=[ev['stat_mha']], fmt='o',
                  color=style, capsize=3, label=f'{name} evaluated ({ev["error_mha"]:+.0f} mHa)')
  ax.axhline(0, color='k', lw=0.5)
  ax.set_yscale('symlog', linthresh=10)
  ax.set_xlabel('wall time since process start (s)')
  zero = 'exact' if from_exact(entry) else 'Hartree-Fock'
  ax.set_ylabel(f'energy - {zero} (mHa), median per 2.5% of steps')
  ax.set_title(f'{entry["system"]}, {entry["seconds"]:.0f} s, race {entry.get("repeat", 0) + 1}')
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def first_code(repeat: int) -> str:
  """Which code races first in repeat `repeat`: they alternate, FermiNet first in repeat 0,
  so that a drift of the shared machine does not always hit the same code."""
  return 'ferminet' if repeat % 2 == 0 else 'ours'


def seed_of(base: int, repeat: int) -> int:
  """Our debug.seed in repeat `repeat` (FermiNet's own seed comes from its clock)."""
  return base + repeat


def spread(values: list) -> dict:
  """Mean and sample standard deviation (n - 1) of `values`; no deviation for one value."""
  n = len(values)
  return {'mean': statistics.fmean(values) if n else float('nan'),
          'sd': statistics.stdev(values) if n > 1 else float('nan'), 'n': n}


def last_evaluated(entry: dict) -> Optional[dict]:
  """Our evaluation of the last parameters (what FermiNet's evaluation takes), or None."""
  if entry.get('ours_evaluated_last'):
    return entry['ours_evaluated_last']
  ev = entry.get('ours_evaluated')
  return ev if ev and ev.get('parameters', 'last') == 'last' else None


def averaged_evaluated(entry: dict) -> Optional[dict]:
  ev = entry.get('ours_evaluated')
  return ev if ev and ev.get('parameters') == 'average' else None


def _ratio(ours: Optional[dict], entry: dict) -> Optional[float]:
  theirs = entry.get('ferminet_evaluated')
  if not ours or not theirs or not theirs['error_mha'] > 0 or not from_exact(entry):
    return None
  return ours['error_mha'] / theirs['error_mha']


def default_ratio(entry: dict) -> Optional[float]:
  """The headline: our evaluated error over FermiNet's, each code's default output (ours the
  averaged parameters `evaluate` takes by default, FermiNet its last, as it does not
  average); None if either evaluation is missing or FermiNet's error is not positive."""
  return _ratio(averaged_evaluated(entry), entry)


def like_for_like_ratio(entry: dict) -> Optional[float]:
  """Our evaluated error over FermiNet's, both from their last parameters (beside the
  headline; None as default_ratio)."""
  return _ratio(last_evaluated(entry), entry)


def from_exact(entry: dict) -> bool:
  """Whether the race's errors are from an exact energy (a ratio of errors means something)
  rather than from the Hartree-Fock energy."""
  return entry.get('exact_source') != HARTREE_FOCK


def races(path: str = JSON) -> list:
  """Every race in the artifact as (meta, entry), oldest first. Runs recorded before the
  artifact format hold a list of entries (one race each, FermiNet at its defaults)."""
  out = []
  for run in artifacts.read(path):
    for entry in (run.data if isinstance(run.data, list) else [run.data]):
      entry = dict(entry)
      entry.setdefault('peer_settings', LEGACY_PEER_SETTINGS)
      out.append((run.meta, entry))
  return out


def groups(path: str = JSON) -> dict:
  """{(system, budget s, FermiNet settings): [(meta, entry), ...]} in GOALS order first."""
  out = {}
  for meta, e in races(path):
    out.setdefault((e['system'], float(e['seconds']), e['peer_settings']), []).append((meta, e))
  order = lambda k: (list(SOURCES).index(k[0]), k[1], k[2] != 'best')  # noqa: E731
  return {k: out[k] for k in sorted(out, key=order)}


def replot(path: str = JSON) -> list:
  """Draws the latest race of each (system, budget, FermiNet settings) in the artifact at
  `path` to its curves file (png_name); returns the files written."""
  written = []
  for (name, seconds, settings), held in groups(path).items():
    png = png_name(name, seconds, settings)
    plot(held[-1][1], os.path.join(REPO, png))
    written.append(png)
  return written


def difference(entry: dict, ours_of=None) -> Optional[tuple]:
  """Our evaluated energy minus FermiNet's and their combined standard error, mHa (None if
  either evaluation is missing); ours the default output (averaged parameters) unless
  `ours_of` picks another evaluation (last_evaluated: last against last)."""
  ours, theirs = (ours_of or averaged_evaluated)(entry), entry.get('ferminet_evaluated')
  if not ours or not theirs:
    return None
  return (ours['error_mha'] - theirs['error_mha'],
          float(np.hypot(ours['stat_mha'], theirs['stat_mha'])))


def ended_early(entry: dict) -> Optional[str]:
  """Why our run ended well before the budget, None if it ran to it: 'limit' when it reached
  its step limit (in races before both codes' limits were raised to RACE_ITERATIONS, which
  record no 'step_limit', ours ran with its config's: a handicap for ours), 'failed' when it
  stopped short of it."""
  t, limit = entry.get('ours', {}).get('t') or [], entry.get('step_limit')
  if t and t[-1] >= 0.9 * float(entry['seconds']):
    return None  # It ran to the budget.
  if not t and limit is None:
    return None  # An early race that recorded no steps to judge by.
  return 'limit' if limit is None or len(t) >= limit else 'failed'


def verdict(system: str, seconds: float, entries: list) -> str:
  """The goal judged race by race on the default outputs (ours averaged, FermiNet's last):
  met when every race with both evaluations is within it (our error within
  ABSOLUTE_GOAL_MHA and the ratio within RATIO_GOAL; for DIFFERENCE_GOALS ours lower than
  FermiNet's by more than the combined standard error), and at least 3 races are judged."""
  key = (system, int(seconds))
  if key not in GOAL_TEXT:
    return 'no goal'
  if key in DIFFERENCE_GOALS:
    diffs = [d for d in map(difference, entries) if d is not None]
    if not diffs:
      return 'not judged (no evaluation of both default outputs)'
    word = 'met' if all(d + err < 0 for d, err in diffs) else 'missed'
    n = len(diffs)
    text = ', '.join(_plus_minus(d, err) for d, err in diffs)
    word += f' (ours − FermiNet: {text} mHa)'
  else:
    judged = [(averaged_evaluated(e)['error_mha'], r) for e in entries
              for r in [default_ratio(e)] if r is not None]
    if not judged:
      return 'not judged (no evaluation of both default outputs)'
    met = all(err <= ABSOLUTE_GOAL_MHA[key] and r <= RATIO_GOAL[key] for err, r in judged)
    word, n = ('met' if met else 'missed'), len(judged)
    word += (' (ours ' + ', '.join(f'{err:+.1f}' for err, _ in judged) + ' mHa; ratios ' +
             ', '.join(f'{r:.2f}' for _, r in judged) + ')')
  why = [ended_early(e) for e in entries]
  if why.count('limit'):
    word += (f'; ours stopped at its config\'s step limit before the budget in '
             f'{why.count("limit")} of {len(entries)}')
  if why.count('failed'):
    word += f'; ours failed before the budget in {why.count("failed")} of {len(entries)}'
  if len(entries) > n:
    word += f'; {len(entries) - n} race{"s" if len(entries) - n > 1 else ""} without both'
  return word if n >= 3 else f'{word}, {n} race{"s" if n > 1 else ""} of the 3 needed'


def _plus_minus(value: float, error: float) -> str:
  """An energy difference or error with its standard error, mHa, as the tables write it."""
  return f'{value:+.1f} ± {error:.1f}'


def _mean_sd(values: list, digits: int = 1, sign: str = '+') -> str:
  if not values:
    return '–'
  s = spread(values)
  text = f'{s["mean"]:{sign}.{digits}f}'
  return text + (f' ± {s["sd"]:.{digits}f}' if s['n'] > 1 else '') + f' (n = {s["n"]})'


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's race table: per (system, budget, FermiNet settings), means ± standard
  deviations over the races of the evaluated errors and of their ratios, the codes' default
  outputs first (ours averaged, FermiNet's last), last against last beside."""
  lines = ['| system | budget (s) | FermiNet settings | races | steps: FermiNet, ours | '
           'FermiNet evaluated, its last parameters (mHa) | ours evaluated, averaged '
           'parameters (mHa) | ratio, default outputs | ours evaluated, last parameters '
           '(mHa) | ratio, last against last | ratio of training means | goal | goal judged '
           'on default outputs, race by race |', '|' + '---|' * 13]
  metas = []
  for (system, seconds, settings), group in groups(path).items():
    es = [e for _, e in group]
    metas += [m for m, _ in group if not any(m is x for x in metas)]
    ev = lambda f: [x['error_mha'] for x in map(f, es) if x]  # noqa: E731
    ratios = lambda f: [r for r in map(f, es) if r is not None]  # noqa: E731
    steps = (f'{statistics.fmean(e["ferminet_summary"]["steps"] for e in es):.0f}, '
             f'{statistics.fmean(e["ours_summary"]["steps"] for e in es):.0f}')
    train = [e['ours_summary']['error_mha'] / e['ferminet_summary']['error_mha'] for e in es
             if e['ferminet_summary'].get('error_mha', 0) > 0 and from_exact(e)]
    lines.append(' | '.join([
        f'| {system}', f'{seconds:.0f}', settings, str(len(es)), steps,
        _mean_sd(ev(lambda e: e.get('ferminet_evaluated'))), _mean_sd(ev(averaged_evaluated)),
        _mean_sd(ratios(default_ratio), 2, ''), _mean_sd(ev(last_evaluated)),
        _mean_sd(ratios(like_for_like_ratio), 2, ''), _mean_sd(train, 2, ''),
        GOAL_TEXT.get((system, int(seconds)), '–'), verdict(system, seconds, es)]) + ' |')
  legacy = [e for m, group in groups(path).items() for meta, e in group
            if not meta.get('recorded', True)]
  metas.sort(key=lambda m: m.get('date') or '')  # Oldest first: the note names the latest.
  lines += ['', 'Means ± sample standard deviations over the races (n). ' +
            artifacts.provenance(path, [artifacts.Run(m, None) for m in metas])]
  if legacy:
    lines[-1] += (' Races recorded before the meta block, as each recorded itself: ' + '; '.join(
        f'{e["system"]} {float(e["seconds"]):.0f} s on {e["date"][:10]}, {e["machine"]}'
        for e in legacy) + '.')
  return '\n'.join(lines)


def ms_per_step(run: dict) -> Optional[float]:
  """Training time per step, ms: first to last logged step (start-up excluded)."""
  t = run.get('t') or []
  return 1e3 * (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None


def _pair(a, b, fmt: str) -> str:
  return ', '.join('–' if x is None else format(x, fmt) for x in (a, b))


def _evaluated(ev: Optional[dict]) -> str:
  if not ev:
    return '–'
  bad = ev.get('nonfinite', 0)
  return _plus_minus(ev['error_mha'], ev['stat_mha']) + (
      f' ({bad} non-finite sweeps left out)' if bad else '')


def render_each(path: str = JSON) -> str:
  """ACCURACY.md's table of every race, one row each, grouped as in render_table: when and
  in which order it ran, our seed, each code's steps, start-up and time per step, and the
  evaluated energies with what the goal compares (ratio of errors, or difference) for the
  default outputs, and last against last beside."""
  lines = ['| system | budget (s) | FermiNet settings | race | date | first | our seed | '
           'steps: FermiNet, ours | first step (s): FermiNet, ours | ms per step: FermiNet, '
           'ours | FermiNet evaluated, its last parameters (mHa) | ours evaluated, averaged '
           'parameters (mHa) | compared, default outputs: ratio, or ours − FermiNet (mHa) | '
           'ours evaluated, last parameters (mHa) | last against last |', '|' + '---|' * 15]

  def compared(e, ratio_of, ours_of) -> str:
    # No ratio where errors are from Hartree-Fock: the gas compares the difference instead.
    ratio, diff = ratio_of(e), difference(e, ours_of)
    return (f'{ratio:.2f}' if ratio is not None else
            _plus_minus(*diff) if diff and not from_exact(e) else '–')

  for (system, seconds, settings), group in groups(path).items():
    for i, (meta, e) in enumerate(group):
      date = (meta.get('date') if meta.get('recorded', True) else e.get('date')) or ''
      headline = compared(e, default_ratio, averaged_evaluated)
      why = ended_early(e)
      if why:
        headline += ('; ours stopped at its step limit' if why == 'limit' else
                     '; ours failed before the budget')
      fs, os_ = e['ferminet_summary'], e['ours_summary']
      lines.append(' | '.join([
          f'| {system}', f'{seconds:.0f}', settings, str(i + 1), date[:10] or '–',
          {'ferminet': 'FermiNet', 'ours': 'ours'}.get(e.get('first'), '–'),
          str(e['seed_ours']) if 'seed_ours' in e else '–',
          f'{fs["steps"]}, {os_["steps"]}',
          _pair(fs.get('first_step_s'), os_.get('first_step_s'), '.0f'),
          _pair(ms_per_step(e['ferminet']), ms_per_step(e['ours']), '.0f'),
          _evaluated(e.get('ferminet_evaluated')), _evaluated(averaged_evaluated(e)),
          headline, _evaluated(last_evaluated(e)),
          compared(e, like_for_like_ratio, last_evaluated)]) + ' |')
  lines += ['', 'Errors from the exact energy (Ne, N2) or from the cell\'s Hartree–Fock '
            'energy (HEG), each evaluated energy ± its reblocked standard error; ms per step '
            'from the first to the last logged step, start-up excluded; – where the race did '
            'not record it. ' + artifacts.provenance(path)]
  return '\n'.join(lines)


TABLES = {'race': ('ACCURACY.md', render_table),  # Rendered by scripts/render_docs.py.
          'race-each': ('ACCURACY.md', render_each)}


def reference_energy(system) -> Optional[float]:
  """The energy (Ha) errors are measured from: the system's exact energy, or the electron
  gas's Hartree-Fock energy (SOURCES); None for a molecule without an exact energy."""
  if system.exact_energy is not None:
    return system.exact_energy
  if system.lattice is None:
    return None
  jax.config.update('jax_enable_x64', True)  # The Madelung term in float64.
  return periodic_hartree_fock.electron_gas_energy(system.lattice, system.n_up, system.n_down,
                                                   system.twist)


def reference_of(name: str) -> Optional[float]:
  """`reference_energy` of the system of our config for `name` (reference.SYSTEMS)."""
  our_config = cli.load_config_file(os.path.join(REPO, reference.SYSTEMS[name][0]))
  return reference_energy(systems.make_system(our_config.system))


@contextlib.contextmanager
def run_directories(keep: Optional[str], prefix: str):
  """fresh(name) -> the path of a new run directory in the folder of a script's runs,
  `keep` (kept) or a temporary one (removed after); it exits with a message if that
  directory exists (a kept run is never overwritten)."""
  work = keep or tempfile.mkdtemp(prefix=prefix)
  os.makedirs(work, exist_ok=True)

  def fresh(name: str) -> str:
    path = os.path.join(work, name)
    if os.path.exists(path):
      sys.exit(f'{path} exists: give another --keep directory or remove it')
    return path

  try:
    yield fresh
  finally:
    if not keep:
      shutil.rmtree(work, ignore_errors=True)


def one_race(args, name: str, repeat: int, extra: list, tmp: str) -> dict:
  """Both codes for `args.seconds` in the order of first_code(repeat), then both codes'
  last parameters evaluated the same way, and ours averaged beside."""
  exact = reference_of(name)
  seed, fn_dir, ours_dir = seed_of(args.seed, repeat), os.path.join(tmp, 'fn'), \
      os.path.join(tmp, 'ours')
  runs = {}
  first = first_code(repeat)
  for who in (first, 'ours' if first == 'ferminet' else 'ferminet'):
    runs[who] = (race_ferminet(args.ferminet, name, args.seconds, fn_dir, args.peer_settings)
                 if who == 'ferminet' else
                 race_ours(name, args.seconds, ours_dir, extra, seed))
  last = evaluate_ours(ours_dir, args.eval_sweeps, EVAL_BURN_IN, exact, 'last')
  averaged = evaluate_ours(ours_dir, args.eval_sweeps, EVAL_BURN_IN, exact, 'average')
  fn_evaluated = evaluate_ferminet(args.ferminet, name, fn_dir, os.path.join(tmp, 'fn_eval'),
                                   args.eval_sweeps, EVAL_BURN_IN, exact, args.peer_settings)
  return {'system': name, 'seconds': args.seconds, 'exact': exact,
          'exact_source': SOURCES[name], 'repeat': repeat, 'seed_ours': seed,
          'seed_ferminet': 'from its clock (its default)', 'first': first,
          'peer_settings': args.peer_settings,
          'peer_settings_detail': reference.peer_settings_record(args.peer_settings),
          'overrides': extra, 'step_limit': int(RACE_ITERATIONS),
          'ferminet': runs['ferminet'], 'ours': runs['ours'],
          'ferminet_summary': summary(runs['ferminet'], exact),
          'ours_summary': summary(runs['ours'], exact), 'ours_evaluated': averaged,
          'ours_evaluated_last': last, 'ferminet_evaluated': fn_evaluated,
          'eval_sweeps': args.eval_sweeps, 'eval_burn_in': EVAL_BURN_IN}


def png_name(name: str, seconds: float, settings: str) -> str:
  """The curves' file of a race: by system and budget, and by FermiNet's settings where they
  are not its best, so that races of other settings do not overwrite each other."""
  suffix = '' if settings == 'best' else f'_{settings}'
  return f'benchmarks/race_{name}_{seconds:.0f}s{suffix}.png'


def races_held(path: str, name: str, seconds: float, settings: str) -> int:
  """How many races of (system, budget, FermiNet settings) the artifact at `path` holds: the
  next race continues their numbering (which code goes first, our seed), so that races
  added in later sittings keep alternating."""
  if not os.path.exists(path):
    return 0
  return len(groups(path).get((name, float(seconds), settings), []))


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--ferminet', help='directory made by ../shared/anchors/setup-ferminet.sh')
  p.add_argument('--system', nargs='+', default=['Ne'], choices=list(SOURCES))
  p.add_argument('--seconds', type=float, default=600.0, help='wall-time budget of each code')
  p.add_argument('--repeats', type=int, default=3, help='races per system (at least 1)')
  p.add_argument('--seed', type=int, default=0, help='our debug.seed of the first race')
  p.add_argument('--peer-settings', default='best', choices=list(reference.PEER_SETTINGS),
                 help="FermiNet's settings (ferminet_reference.PEER_SETTINGS)")
  p.add_argument('--eval-sweeps', type=int, default=2000, help='sweeps of each evaluation')
  p.add_argument('--keep', metavar='DIR', help='keep the run directories in DIR')
  p.add_argument('--json', default=JSON)
  p.add_argument('--replot', action='store_true',
                 help="draw each group's latest race from --json again, and race nothing")
  args, extra = p.parse_known_args()  # --config.KEY=VALUE: passed to our training only.
  if any(not o.startswith('--config.') for o in extra):
    p.error(f'unrecognized arguments: {" ".join(extra)}')
  if args.replot:
    print('\n'.join(replot(args.json)))
    return
  if not args.ferminet:
    p.error('--ferminet DIR is needed (bash ../shared/anchors/setup-ferminet.sh DIR)')
  if args.repeats < 1:
    p.error('--repeats must be at least 1')
  peer = {**reference.peer_versions(args.ferminet),
          'settings': reference.peer_settings_record(args.peer_settings)}
  for name in args.system:
    held = races_held(args.json, name, args.seconds, args.peer_settings)
    for repeat in range(held, held + args.repeats):
      run_meta = artifacts.meta(peer=peer)
      with tempfile.TemporaryDirectory() as tmp:
        entry = one_race(args, name, repeat, extra, tmp)
        if args.keep:
          shutil.copytree(tmp, os.path.join(args.keep, f'{name}_{args.seconds:.0f}s_{repeat}'),
                          dirs_exist_ok=True)
      artifacts.append(args.json, entry, run_meta)
      plot(entry, os.path.join(REPO, png_name(name, args.seconds, args.peer_settings)))
      print(f'{name} {args.seconds:.0f} s race {repeat + 1}: ratio like for like '
            f'{like_for_like_ratio(entry)}', flush=True)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the tables into ACCURACY.md')


if __name__ == '__main__':
  main()
