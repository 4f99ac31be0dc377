"""Diffusion Monte Carlo goal table: for each row, VMC training within its budget, the
evaluation of the trained network, then DMC at several time steps within its budget and the
extrapolation to tau -> 0; every goal judged met or missed from the measured numbers.

  python scripts/dmc_goals.py --rows he,h2,li,be,lih,ne [--ferminet /tmp/fn] [--keep DIR]
  python scripts/dmc_goals.py --table-only       # rewrite ACCURACY.md from the JSON

Each stage is a fresh process, as a user runs it:
  python -m ferminet_fast.train --config configs/<row>.py --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR
  python -m ferminet_fast.dmc --run DIR --tau T1,T2,T3 --steps S --equilibration Q
He and H2 train for at most VMC_SECONDS (SIGTERM at the budget: training checkpoints and
stops), Li, Be and LiH for their configs' iterations (as scripts/accuracy.py does), Ne for
600 s (as scripts/race.py does). The DMC steps are chosen from the step time of a short
probe (its files removed) to fit the row's DMC budget. With --ferminet (the directory
../shared/anchors/setup-ferminet.sh makes), DeepMind FermiNet trains Ne for 1200 s in the
same session (scripts/race.py's machinery) and the Ne row compares with its VMC energy;
without it that column says 'not run'.

Every run is appended to benchmarks/dmc_goals.json with the date, machine, versions and git
commit; the newest run of each row is rendered into ACCURACY.md between the markers below.
The exact energies are the package's (physics/systems.py and the configs, with their
citations).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import race  # noqa: E402

JSON = os.path.join(REPO, 'benchmarks', 'dmc_goals.json')
ACCURACY_MD = os.path.join(REPO, 'ACCURACY.md')
BEGIN = '<!-- scripts/dmc_goals.py writes from here -->'
END = '<!-- scripts/dmc_goals.py writes up to here -->'
TAUS = (0.02, 0.01, 0.005)  # Ha^-1: the time steps of every row, extrapolated linearly.
EQUILIBRATION = 0.2  # Fraction of each time step's DMC steps discarded.
PROBE_STEPS = 20
# row -> (config, VMC budget in s or None for the config's iterations, DMC budget in s,
# the goal in words).
ROWS = {
    'he': ('configs/he.py', 60.0, 300.0, 'exact within 0.1 mHa'),
    'h2': ('configs/h2.py', 60.0, 300.0, 'exact within 0.1 mHa'),
    'li': ('configs/li.py', None, 600.0, 'below VMC; exact within 0.2 mHa'),
    'be': ('configs/be.py', None, 600.0, 'below VMC'),
    'lih': ('configs/lih.py', None, 600.0, 'below VMC; exact within 0.2 mHa'),
    'ne': ('configs/ne.py', 600.0, 600.0, "error <= 1/2 of VMC's; below FermiNet's VMC at 1200 s"),
}
FERMINET_SECONDS = 1200.0


def _run(cmd: list, seconds=None) -> float:
  """Runs cmd (SIGTERM at `seconds`, scripts/race.py's way); the seconds it lived. Raises
  if it failed other than by that signal (status 75: checkpointed and stopped)."""
  t0 = time.perf_counter()
  if seconds is None:
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
      raise RuntimeError(f'{" ".join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}')
    return time.perf_counter() - t0
  return race._run(cmd, seconds)


def _read(run: str, name: str) -> dict:
  with open(os.path.join(run, name)) as f:
    return json.load(f)


def dmc_steps(run: str, budget: float) -> int:
  """DMC steps per time step that fit `budget` seconds, from a probe's step time."""
  cmd = [sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}', '--tau=0.01',
         f'--steps={PROBE_STEPS}', '--equilibration=0']
  wall = _run(cmd)
  step_s = _read(run, 'dmc.json')['per_tau'][0]['wall_s'] / PROBE_STEPS
  shutil.rmtree(os.path.join(run, 'dmc'))
  for name in ('dmc.json', 'dmc_stats.csv'):
    os.remove(os.path.join(run, name))
  overhead = wall - PROBE_STEPS * step_s  # Start-up and compilation, once per process ...
  usable = budget - overhead - 2 * 5.0  # ... and a compilation per further time step.
  return max(10, int(usable / (len(TAUS) * step_s)))


def run_row(row: str, run: str, fn_dir) -> dict:
  config, vmc_s, dmc_s, goal = ROWS[row]
  train = [sys.executable, '-m', 'ferminet_fast.train', '--config', config,
           f'--config.log.save_path={run}', '--config.log.progress=False']
  train_s = _run(train, vmc_s)
  eval_s = _run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}'])
  vmc = _read(run, 'eval.json')
  steps = dmc_steps(run, dmc_s)
  equilibration = int(EQUILIBRATION * steps)
  dmc_wall = _run([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}',
                   '--tau=' + ','.join(map(str, TAUS)), f'--steps={steps - equilibration}',
                   f'--equilibration={equilibration}'])
  dmc = _read(run, 'dmc.json')
  timings = _read(run, 'timings.json')
  entry = {'row': row, 'config': config, 'goal': goal, 'vmc_budget_s': vmc_s,
           'dmc_budget_s': dmc_s, 'train_s': train_s, 'eval_s': eval_s, 'dmc_s': dmc_wall,
           'iterations': vmc['checkpoint_step'], 'vmc': vmc, 'dmc': dmc,
           'exact': dmc['exact_energy'], 'machine': timings['machine'],
           'versions': timings['versions'],
           'commands': [' '.join(train), f'python -m ferminet_fast.evaluate --run={run}',
                        f'python -m ferminet_fast.dmc --run={run} --tau='
                        + ','.join(map(str, TAUS)) + f' --steps={steps - equilibration} '
                        f'--equilibration={equilibration}']}
  if row == 'ne':
    entry['ferminet'] = (race.summary(race.race_ferminet(fn_dir, 'Ne', FERMINET_SECONDS,
                                                         os.path.join(run + '_fn')),
                                      dmc['exact_energy']) if fn_dir else None)
  entry['verdict'] = verdict(entry)
  return entry


def verdict(e: dict) -> str:
  """'met' or 'missed: <figures>' for the row's goal, from the measured numbers."""
  dmc, vmc, exact = e['dmc'], e['vmc'], e['exact']
  err, stat = dmc['error_mha'], 1e3 * dmc['error']
  vmc_err = 1e3 * (vmc['energy'] - exact)
  below = dmc['energy'] + 2 * (dmc['error'] ** 2 + vmc['error'] ** 2) ** 0.5 < vmc['energy']
  misses = []
  if e['dmc_s'] > 1.05 * e['dmc_budget_s']:
    misses.append(f'DMC took {e["dmc_s"]:.0f} s of a {e["dmc_budget_s"]:.0f} s budget')
  if e['vmc_budget_s'] and e['train_s'] > 1.05 * e['vmc_budget_s'] + 60:  # 60 s: SIGKILL wait.
    misses.append(f'VMC took {e["train_s"]:.0f} s of a {e["vmc_budget_s"]:.0f} s budget')
  if e['row'] in ('he', 'h2', 'li', 'lih'):
    limit = 0.1 if e['row'] in ('he', 'h2') else 0.2
    if abs(err) + stat > limit:
      misses.append(f'|error| {abs(err):.2f} mHa with a statistical error of {stat:.2f} mHa '
                    f'does not resolve {limit} mHa')
  if e['row'] in ('li', 'be', 'lih') and not below:
    misses.append(f'DMC {dmc["energy"]:.5f} not 2 error bars below VMC {vmc["energy"]:.5f}')
  if e['row'] == 'ne':
    if not err <= 0.5 * vmc_err:
      misses.append(f'DMC error {err:.1f} mHa > half the VMC error {vmc_err:.1f} mHa')
    fn = e.get('ferminet')
    if fn is None:
      misses.append("FermiNet's 1200 s VMC not run (no --ferminet)")
    elif not 1e3 * (dmc['energy'] - exact) < fn['error_mha']:
      misses.append(f"DMC error {err:.1f} mHa not below FermiNet's {fn['error_mha']:.1f} mHa")
  return 'met' if not misses else 'missed: ' + '; '.join(misses)


def table(entries: list) -> str:
  head = ('system', 'VMC (s)', 'VMC error (mHa)', 'DMC (s)', 'DMC E(tau->0) error (mHa)',
          'per tau (mHa)', 'nodeless', "FermiNet 1200 s (mHa)", 'goal', 'verdict')
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for e in entries:
    d, v = e['dmc'], e['vmc']
    per = ', '.join(f'{r["tau"]:g}: {1e3 * (r["energy"] - e["exact"]):+.2f} ± '
                    f'{1e3 * r["error"]:.2f}' for r in d['per_tau'])
    fn = e.get('ferminet')
    fn_text = ('not run' if fn is None else f'{fn["error_mha"]:+.1f} ± {fn["stat_mha"]:.1f}'
               ) if e['row'] == 'ne' else ''
    lines.append(
        f'| {e["row"]} | {e["train_s"]:.0f} | {v["error_mha"]:+.2f} ± {1e3 * v["error"]:.2f} '
        f'| {e["dmc_s"]:.0f} | {d["error_mha"]:+.2f} ± {1e3 * d["error"]:.2f} | {per} | '
        f'{"yes" if d["sign_check"]["nodeless_over_samples"] else "no"} | {fn_text} | '
        f'{e["goal"]} | {verdict(e)} |')
  return '\n'.join(lines)


def section(entries: list) -> str:
  """The ACCURACY.md section, markers included: the newest run of each row."""
  newest = {}
  for e in entries:
    newest[e['row']] = e
  rows = [newest[r] for r in ROWS if r in newest]
  facts = ''.join(f'\n- {e["row"]}: {e["date"][:10]}, {e["machine"]["cpu"]}, '
                  f'{e["machine"]["cpu_count"]} cores, commit {e["commit"][:10]}; '
                  f'`{e["commands"][-1]}`' for e in rows)
  return f"""{BEGIN}
## Diffusion Monte Carlo

Fixed-node DMC (`python -m ferminet_fast.dmc`, [guide](docs/guides/dmc.md)) on the network
VMC trained within each row's budget, at tau = {', '.join(map(str, TAUS))} Ha^-1 and
extrapolated linearly to tau -> 0; errors against the exact energies of the configs. A goal
"within X mHa" is met when |error| plus one standard error is at most X; "below VMC" when
DMC lies two combined standard errors below the evaluated VMC energy. Measured by

    python scripts/dmc_goals.py --rows {','.join(ROWS)}

{table(rows) if rows else 'Not measured yet: the table appears when the script has run.'}
{facts}
{END}"""


def write_section(path: str, entries: list) -> None:
  """Replaces the section between the markers (or puts it before scripts/race.py's)."""
  with open(path) as f:
    text = f.read()
  if BEGIN in text:
    head, rest = text.split(BEGIN, 1)
    text = head + section(entries) + rest.split(END, 1)[1]
  elif race.MARKER in text:
    head, tail = text.split(race.MARKER, 1)
    text = head.rstrip('\n') + '\n\n' + section(entries) + '\n' + race.MARKER + tail
  else:
    text = text.rstrip('\n') + '\n\n' + section(entries) + '\n'
  with open(path, 'w') as f:
    f.write(text)


def kept_section(path: str) -> str:
  """The section as ACCURACY.md has it now ('' if none), for scripts that rewrite the file."""
  if not os.path.exists(path):
    return ''
  with open(path) as f:
    text = f.read()
  return (BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END + '\n') if BEGIN in text else ''


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--rows', default=','.join(ROWS), help='comma-separated, of ' + ','.join(ROWS))
  p.add_argument('--ferminet', help='DeepMind FermiNet directory (setup-ferminet.sh) for Ne')
  p.add_argument('--keep', metavar='DIR', help='keep the run directories in DIR/<row>')
  p.add_argument('--table-only', action='store_true')
  args = p.parse_args()
  rows = [r.strip() for r in args.rows.split(',') if r.strip()]
  unknown = [r for r in rows if r not in ROWS]
  if unknown:
    p.error(f'unknown rows {unknown} (known: {", ".join(ROWS)})')
  entries = json.load(open(JSON)) if os.path.exists(JSON) else []
  commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()
  for row in ([] if args.table_only else rows):
    with tempfile.TemporaryDirectory() as tmp:
      run = os.path.join(args.keep or tmp, row)
      entry = run_row(row, run, args.ferminet)
    entry.update(date=datetime.datetime.now().isoformat(timespec='seconds'), commit=commit)
    entries.append(entry)  # Every run is kept; the table shows each row's newest.
    os.makedirs(os.path.dirname(JSON), exist_ok=True)
    with open(JSON, 'w') as f:
      json.dump(entries, f, indent=1)
    print(table([entry]), flush=True)
  write_section(ACCURACY_MD, entries)


if __name__ == '__main__':
  main()
