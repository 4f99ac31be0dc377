"""Diffusion Monte Carlo goal table: for each row, VMC training within its budget, the
evaluation of the trained network, then DMC at several time steps within its budget and the
extrapolation to tau -> 0; every goal judged met or missed from the measured numbers.

  python -m scripts.dmc_goals --rows he,h2,li,be,lih,ne,n2,si_ccecp,heg,heg_rs5 \
      [--ferminet /tmp/fn] [--keep DIR]
  python -m scripts.render_docs                  # put the table into ACCURACY.md

Each stage is a fresh process, as a user runs it:
  python -m ferminet_fast.train --config configs/<row>.py --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR
  python -m ferminet_fast.dmc --run DIR --steps S --equilibration Q
He and H2 train for at most 60 s (SIGTERM at the budget: training checkpoints and stops),
Li, Be, LiH and Si (ccECP) for their configs' iterations (as scripts/accuracy.py does), Ne
and the electron gas at r_s = 1 and 5 (14 electrons at Gamma, configs/heg.py and
heg_rs5.py) for 600 s and N2 for 1800 s with the step limit raised so that the budget ends
the training (as scripts/race.py does). DMC runs at the time steps
its default picks for the system (dmc.tau = 'auto', plan.dmc_time_steps), with the steps
chosen from the step time of a short probe (its files removed) to fit the row's DMC budget.
The ECP row runs DMC with T-moves (the default) and again, from a copy of the trained run,
with the locality approximation and the same steps, reported beside. With --ferminet (the
directory ../shared/anchors/setup-ferminet.sh makes), DeepMind FermiNet trains Ne for
FERMINET_SECONDS in the same sitting (scripts/race.py's machinery) and the Ne row compares
with its VMC energy; without it that column says 'not run'.

Each row's run is appended to the artifact benchmarks/dmc_goals.json (scripts/artifacts.py:
every run kept, with its date, machine, versions, git commit and command line); TABLES
renders the newest run of each row into ACCURACY.md (scripts/render_docs.py). The verdicts
and errors are computed when rendering, from the recorded energies and the package's exact
energies (physics/systems.py and the configs, with their citations).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

from ferminet_fast import plan
from ferminet_fast.diffusion import stage
from scripts import artifacts
from scripts import race

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JSON = os.path.join(REPO, 'benchmarks', 'dmc_goals.json')
EQUILIBRATION = 0.2  # Fraction of each time step's DMC steps discarded.
PROBE_STEPS = 20
# A probe whose DMC loop took less than this is run again for about this much longer: the
# first block of DMC steps (one step, diffusion/stage.py) carries a first call's cost, which
# inflates a short probe's step time (He, 2026-12-08: 168 s used of a 240 s plan).
PROBE_SECONDS = 2.0
# Fraction of the DMC budget the steps are planned to fill: the step time of one time step
# moved by up to 50% from the probe's on the shared 2-core machine (H2, 2026-11-25: 81, 123
# and 89 s for the same steps at three time steps), so a budget planned to the second overran.
BUDGET_FILL = 0.8
# row -> (config, VMC budget in s or None for the config's iterations, DMC budget in s,
# the goal in words).
ROWS = {
    'he': ('configs/he.py', 60.0, 300.0, 'exact within 0.1 mHa'),
    'h2': ('configs/h2.py', 60.0, 300.0, 'exact within 0.1 mHa'),
    'li': ('configs/li.py', None, 600.0, 'below VMC; exact within 0.2 mHa'),
    'be': ('configs/be.py', None, 600.0, 'below VMC'),
    'lih': ('configs/lih.py', None, 600.0, 'below VMC; exact within 0.2 mHa'),
    'ne': ('configs/ne.py', 600.0, 1200.0, "error <= 1/2 of VMC's; below FermiNet's VMC at 1800 s"),
    'n2': ('configs/n2.py', 1800.0, 1800.0, "error <= 1/2 of VMC's"),
    'si_ccecp': ('configs/si_ccecp.py', None, 1200.0,
                 'T-move DMC below VMC beyond 3 combined errors; locality beside'),
    'heg': ('configs/heg.py', 600.0, 1200.0, 'below VMC beyond 3 combined errors'),
    'heg_rs5': ('configs/heg_rs5.py', 600.0, 1200.0, 'below VMC beyond 3 combined errors'),
}
FERMINET_SECONDS = 1800.0  # DeepMind FermiNet's VMC the Ne row is judged against.
ECP_ROWS = ('si_ccecp',)  # Rows whose DMC runs again with the locality approximation.
# Rows judged by DMC lying 3 combined standard errors below VMC (no exact energy, or one that
# the ECP's pseudo-Hamiltonian does not share).
THREE_ERRORS_BELOW = ('si_ccecp', 'heg', 'heg_rs5')


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


def time_steps(config: str) -> tuple:
  """The time steps (Ha^-1) DMC takes for the system of `config` at its default,
  dmc.tau = 'auto' (plan.dmc_time_steps): every row runs at them."""
  return plan.dmc_time_steps(race.cli.load_config_file(os.path.join(REPO, config)).system)


def dmc_steps(run: str, budget: float, taus: tuple, extra: tuple = ()) -> int:
  """DMC steps per time step that fit `budget` seconds, from a probe's step time (at the
  middle time step; a step costs the same at each), with the DMC flags `extra`; where the
  probe's loop took less than PROBE_SECONDS, from the difference of a second, longer
  probe's loop time and the first's."""

  def probe(steps: int) -> tuple:  # (process seconds, seconds of the DMC loop)
    cmd = [sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}', *extra,
           f'--tau={taus[len(taus) // 2]}', f'--steps={steps}', '--equilibration=0']
    wall = _run(cmd)
    loop = _read(run, 'dmc.json')['per_tau'][0]['wall_s']
    shutil.rmtree(os.path.join(run, 'dmc'))
    for name in ('dmc.json', 'dmc_stats.csv'):
      os.remove(os.path.join(run, name))
    return wall, loop

  first = PROBE_STEPS
  wall, loop = probe(first)
  steps, step_s = first, loop / first
  if loop < PROBE_SECONDS:
    # Again for longer: the difference of the two loops' times leaves out the first call's.
    steps = first + min(100 * first, int(math.ceil(PROBE_SECONDS / max(step_s, 1e-6))))
    wall, longer = probe(steps)
    # At least half the longer loop's mean: a first call dearer in the first process than in
    # the second would otherwise understate the step and overrun the budget.
    step_s = max((longer - loop) / (steps - first), 0.5 * longer / steps)
  overhead = wall - steps * step_s  # Start-up and compilation, once per process ...
  usable = BUDGET_FILL * budget - overhead - 2 * 5.0  # ... and a compilation per further tau.
  return max(10, int(usable / (len(taus) * step_s)))


def run_row(row: str, run: str, fn_dir) -> dict:
  """Trains, evaluates and runs DMC for one row in `run`; the figures measured (the
  artifact's data: no verdict, which is judged when rendering)."""
  config, vmc_s, dmc_s, goal = ROWS[row]
  train = [sys.executable, '-m', 'ferminet_fast.train', '--config', config,
           f'--config.log.save_path={run}', '--config.log.progress=False']
  if vmc_s:  # The budget, not the config's iterations, ends the training (as in the races).
    train.append(f'--config.optim.iterations={race.RACE_ITERATIONS}')
  train_s = _run(train, vmc_s)
  eval_s = _run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}'])
  vmc = _read(run, 'eval.json')
  steps = dmc_steps(run, dmc_s, time_steps(config))
  equilibration = int(EQUILIBRATION * steps)
  dmc_wall = _run([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}',
                   f'--steps={steps - equilibration}', f'--equilibration={equilibration}'])
  dmc = _read(run, 'dmc.json')
  if row in ECP_ROWS:  # The locality approximation beside, with the same steps, its own time.
    shutil.copytree(run, run + '_locality', ignore=shutil.ignore_patterns('dmc*'))
    locality_s = _run([sys.executable, '-m', 'ferminet_fast.dmc', f'--run={run}_locality',
                       '--ecp_moves=locality', f'--steps={steps - equilibration}',
                       f'--equilibration={equilibration}'])
  entry = {'row': row, 'config': config, 'goal': goal, 'vmc_budget_s': vmc_s,
           'dmc_budget_s': dmc_s, 'train_s': train_s, 'eval_s': eval_s, 'dmc_s': dmc_wall,
           'iterations': vmc['checkpoint_step'], 'vmc': vmc, 'dmc': dmc,
           'commands': [' '.join(train), f'python -m ferminet_fast.evaluate --run={run}',
                        f'python -m ferminet_fast.dmc --run={run} '
                        f'--steps={steps - equilibration} --equilibration={equilibration}']}
  if row in ECP_ROWS:
    entry['locality'] = {'dmc': _read(run + '_locality', 'dmc.json'), 'dmc_s': locality_s}
  if row == 'ne':
    entry['ferminet_seconds'] = FERMINET_SECONDS
    entry['ferminet'] = (race.summary(race.race_ferminet(fn_dir, 'Ne', FERMINET_SECONDS,
                                                         os.path.join(run + '_fn')),
                                      dmc['exact_energy']) if fn_dir else None)
  return entry


def exact_energy(config: str) -> Optional[float]:
  """The exact energy (Ha) the package gives the system of `config` (relative to the repo);
  None where there is none (the electron gas)."""
  cfg = race.cli.load_config_file(os.path.join(REPO, config))
  return race.systems.make_system(cfg.system).exact_energy


def extrapolated(dmc: dict) -> dict:
  """E(tau -> 0) (Ha) with its error and chi^2 per degree of freedom, fitted again from the
  recorded per-time-step estimates by the package's fit (diffusion/stage.py), so that every
  row is judged by the same fit whatever version recorded it; one time step: its estimate."""
  fit = stage.extrapolate(*zip(*[(r['tau'], r['energy'], r['error'])
                                     for r in dmc['per_tau']]))
  return fit or {'energy': dmc['energy'], 'error': dmc['error'], 'chi2_dof': None}


def verdict(e: dict, exact: Optional[float]) -> str:
  """'met' or 'missed: <figures>' for the row's goal, from the measured energies (Ha) of
  run `e` and the exact energy `exact` (Ha; None for the rows judged against VMC alone)."""
  dmc, vmc = extrapolated(e['dmc']), e['vmc']
  if exact is not None:
    err, stat = 1e3 * (dmc['energy'] - exact), 1e3 * dmc['error']
    vmc_err = 1e3 * (vmc['energy'] - exact)
  combined = (dmc['error'] ** 2 + vmc['error'] ** 2) ** 0.5
  below = dmc['energy'] + 2 * combined < vmc['energy']
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
  if e['row'] in ('ne', 'n2') and not err + stat <= 0.5 * vmc_err:  # Resolved, as above.
    misses.append(f'DMC error {err:.1f} mHa with a statistical error of {stat:.1f} mHa does '
                  f'not resolve half the VMC error, {0.5 * vmc_err:.1f} mHa')
  if e['row'] in THREE_ERRORS_BELOW and not dmc['energy'] + 3 * combined < vmc['energy']:
    misses.append(f'DMC {dmc["energy"]:.5f} ± {dmc["error"]:.5f} not 3 combined errors below '
                  f'VMC {vmc["energy"]:.5f} ± {vmc["error"]:.5f}')
  if e['row'] == 'ne':
    fn, seconds = e.get('ferminet'), e.get('ferminet_seconds', 1200.0)
    if fn is None:
      misses.append(f"FermiNet's {seconds:.0f} s VMC not run (no --ferminet)")
    elif not err < fn['error_mha']:
      misses.append(f"DMC error {err:.1f} mHa not below FermiNet's {fn['error_mha']:.1f} mHa")
  return 'met' if not misses else 'missed: ' + '; '.join(misses)


def row_line(e: dict, exact: Optional[float]) -> str:
  """One table row; every energy with its error in mHa from `exact` (Ha), or where that is
  None in Ha."""
  d, v, fit = e['dmc'], e['vmc'], extrapolated(e['dmc'])

  def mha(r):
    if exact is None:
      return f'{r["energy"]:.5f} ± {r["error"]:.5f} Ha'
    return f'{1e3 * (r["energy"] - exact):+.2f} ± {1e3 * r["error"]:.2f}'
  chi2 = fit['chi2_dof']
  scaled = f' (chi^2/dof {chi2:.1f}: error scaled)' if chi2 is not None and chi2 > 1 else ''
  per = ', '.join(f'{r["tau"]:g}: {mha(r)}' for r in d['per_tau'])
  if e.get('locality'):  # An ECP row: the locality approximation's DMC beside.
    per += f'; locality approximation, tau -> 0: {mha(extrapolated(e["locality"]["dmc"]))}'
  fn, seconds = e.get('ferminet'), e.get('ferminet_seconds', 1200.0)
  fn_text = ('not run' if fn is None else f'{fn["error_mha"]:+.1f} ± {fn["stat_mha"]:.1f}'
             ) + f' ({seconds:.0f} s)' if e['row'] == 'ne' else ''
  judged = verdict(e, exact).replace('|', r'\|')  # A bare | would split the cell.
  nodeless = ('none (fixed phase)' if d.get('sign_check') is None else
              'yes' if d['sign_check']['nodeless_over_samples'] else 'no')
  return (f'| {e["row"]} | {e["train_s"]:.0f} | {mha(v)} | {e["dmc_s"]:.0f} | '
          f'{mha(fit)}{scaled} | {per} | {nodeless} | {fn_text} | {e["goal"]} | {judged} |')


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's DMC table: the newest run of each row, judged now against the package's
  exact energies, and the provenance of those runs."""
  runs = artifacts.newest_runs(path, ROWS)
  if not runs:
    return 'Not measured yet: the table appears when the script has run.'
  head = ('system', 'VMC (s)', 'VMC error (mHa), or energy', 'DMC (s)',
          'DMC E(tau->0) error (mHa), or energy', 'per tau (mHa), or energies', 'nodeless',
          'FermiNet VMC (mHa)', 'goal', 'verdict')
  lines = [artifacts.table(head, [row_line(r.data, exact_energy(r.data['config']))
                                 for r in runs])]
  cmds = ''.join(f'\n- {r.data["row"]}: `{r.data["commands"][-1]}`' for r in runs)
  # The note names the newest runs: in the order they ran, not the rows'.
  dated = sorted(runs, key=lambda r: r.meta.get('date') or '')
  return '\n'.join(lines) + '\n\n' + artifacts.provenance(path, dated) + '\n' + cmds


TABLES = {'dmc_goals': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def adopt(old: str, command: str, path: str = JSON) -> None:
  """Appends the entries of a file of this script's format before artifacts (a JSON list,
  each entry with its own date, commit, machine and versions) to the artifact at `path`:
  those fields become the meta block (`recorded` where all are there; the date was the
  local time of the measuring machine), `command` the command line that ran them."""
  for e in json.load(open(old)):
    m = {k: e.pop(k, None) for k in ('date', 'commit', 'machine', 'versions')}
    e.pop('verdict', None), e.pop('exact', None)  # Judged, and taken from the package, now.
    versions = m['versions'] or {}
    artifacts.append(path, e, {
        'recorded': all(m.values()), 'date': m['date'], 'machine': m['machine'],
        'versions': {k: versions[k] for k in artifacts.LIBRARIES if k in versions} or None,
        'all_versions': m['versions'], 'peer': None, 'commit': m['commit'], 'dirty': None,
        'command': command, 'interpreter': e['commands'][0].split()[0],
        'note': f'converted from {old} (written before this script kept artifacts): '
                'the date is the local time of the measuring machine; whether the tree had '
                'uncommitted changes was not recorded'})


def main():
  p, args, rows = artifacts.row_arguments(__doc__, ROWS, JSON, (('--ferminet', {
      'help': 'DeepMind FermiNet directory (setup-ferminet.sh) for Ne'}),))
  try:  # An unreadable artifact stops here, before hours of runs.
    artifacts.read(args.json)
  except ValueError:
    p.error(f'{args.json} is this script\'s list from before artifacts: move it aside and '
            'append it with dmc_goals.adopt(old, command)')
  for row in rows:
    run_meta = artifacts.meta()
    with tempfile.TemporaryDirectory() as tmp:
      entry = run_row(row, os.path.join(args.keep or tmp, row), args.ferminet)
    artifacts.append(args.json, entry, run_meta)
    print(row_line(entry, exact_energy(entry['config'])), flush=True)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
