"""Accuracy table: trains and evaluates the shipped configs; the tables of ACCURACY.md are
rendered from the artifacts it writes (scripts/render_docs.py).

  python -m scripts.accuracy                      # all systems -> benchmarks/accuracy.json
  python -m scripts.accuracy --systems he h2      # a subset (a run of its own in the artifact)
  python -m scripts.accuracy --matched --ferminet /tmp/fn   # at FermiNet's wall time
  python -m scripts.accuracy --systems si_ccecp   # -> benchmarks/accuracy_ecp.json
  python -m scripts.render_docs                   # the tables into ACCURACY.md

Each system is two fresh processes, as a user runs them:
  python -m ferminet_fast.train --config configs/<system>.py --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR
The energy is the evaluation's (parameters frozen, reblocked standard error), not the
running mean of training; the wall time is both processes from start to exit. Every
invocation is appended to the artifact (scripts/artifacts.py); the table takes each
system's latest row.

--matched runs DeepMind FermiNet (from ../shared/anchors/setup-ferminet.sh DIR, at its best
settings unless --peer-settings default) and then ours in the same sitting with the
settings both codes share (ferminet_reference.SHARED, no pretraining): FermiNet trains
--matched-iterations steps and its whole-process wall time is our budget. Both are
reported as FermiNet reports itself: the mean of the last 20% of training steps with its
reblocked error (not an evaluation). Nothing of FermiNet's is a constant here.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

from scripts import artifacts
from scripts import ferminet_reference as reference

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# (config file stem, label, goal in mHa): the targets of the table.
SYSTEMS = {
    'he': ('He', 0.5),
    'h2': ('H2 (R = 1.4 bohr)', 0.5),
    'li': ('Li', 1.0),
    'lih': ('LiH (R = 3.015 bohr)', 1.0),
    'be': ('Be', 1.6),
}
# Pseudopotential atoms: a table of their own (ACCURACY.md, effective core potentials);
# not run unless named (`--systems si_ccecp`, into benchmarks/accuracy_ecp.json).
ECP_SYSTEMS = {
    'si_ccecp': ('Si, ccECP', 2.0),
}
NAMES = {'he': 'He', 'h2': 'H2', 'li': 'Li', 'lih': 'LiH', 'be': 'Be'}  # ferminet_reference's.
BUDGET_S = 600.0  # Training + evaluation wall time allowed per system.
JSON = os.path.join(REPO, 'benchmarks', 'accuracy.json')
JSON_JAX012 = os.path.join(REPO, 'benchmarks', 'accuracy_jax0.12.json')
MATCHED_JSON = os.path.join(REPO, 'benchmarks', 'accuracy_matched.json')
ECP_JSON = os.path.join(REPO, 'benchmarks', 'accuracy_ecp.json')


def run_timed(cmd: list, cwd: str = REPO, env=None):
  """(seconds from start to exit, the finished process with its output) of `cmd` run in
  `cwd` (by default the repository: `-m` imports from there); raises with the end of its
  output if it fails."""
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
  seconds = time.perf_counter() - t0
  if proc.returncode:
    raise RuntimeError(f'{" ".join(cmd)} failed ({proc.returncode}):\n'
                       f'{(proc.stderr or proc.stdout)[-2000:]}')
  return seconds, proc


def timed(cmd: list, cwd: str = REPO, env=None) -> float:
  """Seconds a process takes from start to exit (run_timed)."""
  return run_timed(cmd, cwd, env)[0]


def run_rows(names: list, run_row, path: str, at_once: bool, runs_dir: str = '') -> None:
  """Runs `run_row(name, runs_dir)` for each name (side by side when `at_once`, each row
  recording how many ran at once) and appends each row to the artifact at `path` as it
  finishes, so that a run cut short keeps what it finished."""
  run_meta, lock, width = artifacts.meta(), threading.Lock(), len(names) if at_once else 1

  def one(name, where):
    row = {**run_row(name, where), 'rows_at_once': width}
    with lock:
      print(json.dumps({k: v for k, v in row.items() if not isinstance(v, dict)}), flush=True)
      artifacts.append(path, {'rows': [row]}, run_meta)

  with tempfile.TemporaryDirectory() as tmp, futures.ThreadPoolExecutor(width) as pool:
    for done in [pool.submit(one, name, runs_dir or tmp) for name in names]:
      done.result()


def wall_cell(row: dict) -> str:
  """'train + eval s', and how many rows shared the machine when more than one."""
  wall = f'{row["train_s"]:.0f} + {row["eval_s"]:.0f} s'
  if row.get('rows_at_once', 1) > 1:
    wall += f' ({row["rows_at_once"]} rows at once)'
  return wall


def new_run_dir(runs_dir: str, stem: str) -> str:
  """A directory of its own (an existing one would be resumed, not retrained)."""
  stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
  return os.path.join(runs_dir, f'{stem}_{stamp}')


def run_matched(stem: str, fn_dir: str, iterations: int, settings: str, tmp: str,
                extra: list = ()) -> dict:
  """FermiNet for `iterations` steps, timed whole; then ours stopped at that wall time, with
  the same shared settings and no pretraining. Both as the mean of their last 20% of steps."""
  from scripts import race
  name = NAMES[stem]
  exact = race.systems.make_system(race.cli.load_config_file(
      os.path.join(REPO, reference.SYSTEMS[name][0])).system).exact_energy
  keys = {'optim.iterations': str(iterations), 'pretrain.iterations': '0'}
  fn = race._ferminet_steps(fn_dir, name, os.path.join(tmp, 'fn'), keys, None, settings)
  ours = race.race_ours(name, fn['wall_s'], os.path.join(tmp, 'ours'),
                        ['--config.pretrain.iterations=0', '--config.optim.iterations=1000000',
                         *extra])
  return {'system': SYSTEMS[stem][0], 'config': f'configs/{stem}.py', 'exact': exact,
          'ferminet_iterations': iterations, 'ferminet_wall_s': fn['wall_s'],
          'ours_wall_s': ours['wall_s'], 'peer_settings': settings,
          'ferminet_summary': race.summary(fn, exact), 'ours_summary': race.summary(ours, exact)}


def render_matched(path: str = MATCHED_JSON) -> str:
  """ACCURACY.md's table at FermiNet's wall time, from runs of both codes in one sitting."""
  runs = artifacts.read(path)
  if not runs:
    return ('*Not yet measured with both codes in one sitting: '
            '`python -m scripts.accuracy --matched --ferminet DIR`.*')
  rows = {}
  for run in runs:
    for r in run.data['rows']:
      rows[r['config']] = (run, r)
  lines = ['| system | FermiNet settings | FermiNet steps, wall (s), training error (mHa) | '
           'ours steps, wall (s), training error (mHa) |', '|---|---|---|---|']
  for run, r in rows.values():
    f, o = r['ferminet_summary'], r['ours_summary']
    lines.append(f'| {r["system"]} | {r["peer_settings"]} | {f["steps"]}, '
                 f'{r["ferminet_wall_s"]:.0f}, {f["error_mha"]:+.2f} ± {f["stat_mha"]:.2f} | '
                 f'{o["steps"]}, {r["ours_wall_s"]:.0f}, {o["error_mha"]:+.2f} ± '
                 f'{o["stat_mha"]:.2f} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, [run for run, _ in rows.values()])])


def train_and_evaluate(run: str, config: str, settings=(), eval_args=()) -> tuple:
  """Trains `config` into the new run directory `run` and evaluates it, each a fresh process
  as a user runs them: (eval.json, config.json, timings.json, training s, evaluation s)."""
  train_s = timed([sys.executable, '-m', 'ferminet_fast.train', '--config', config,
                   f'--config.log.save_path={run}', '--config.log.progress=False', *settings])
  eval_s = timed([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}', *eval_args])
  out = []
  for name in ('eval.json', 'config.json', 'timings.json'):
    with open(os.path.join(run, name)) as f:
      out.append(json.load(f))
  return (*out, train_s, eval_s)


def run_system(stem: str, runs_dir: str, extra: list) -> dict:
  ev, cfg, timings, train_s, eval_s = train_and_evaluate(
      new_run_dir(runs_dir, stem), f'configs/{stem}.py', extra)
  label, goal = {**SYSTEMS, **ECP_SYSTEMS}[stem]
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


def render_spring_matched(kfac: str = JSON, spring: str = os.path.join(
    REPO, 'benchmarks', 'accuracy_spring.json')) -> str:
  """KFAC against SPRING over the same steps (the running mean of the last 20% of
  training), from our runs of the earlier --matched mode; no FermiNet figure here."""
  rows = {}
  for label, path in (('KFAC', kfac), ('SPRING', spring)):
    for run in artifacts.read(path):
      for r in run.data.get('matched', []):
        rows.setdefault(r['system'], {})[label] = r
  lines = ['| system | steps | KFAC | SPRING |', '|---|---|---|---|']
  for system, by in rows.items():
    if len(by) < 2:
      continue
    def cell(r):
      return f'{r["error_mha"]:+.2f} ± {r["stat_mha"]:.2f} mHa in {r["train_s"]:.0f} s'
    lines.append(f'| {system} | {by["KFAC"]["iterations"]} | {cell(by["KFAC"])} | '
                 f'{cell(by["SPRING"])} |')
  return '\n'.join(lines + ['', artifacts.provenance(kfac) + ' '
                              + artifacts.provenance(spring)])


def latest_rows(path: str) -> list:
  """Each system's latest row over the runs of an artifact, in SYSTEMS order, with its run."""
  return artifacts.newest_rows(path, [f'configs/{s}.py' for s in SYSTEMS], 'full', 'config')


def _measured(rows: list) -> str:
  """Machine, date and versions as each row recorded them (rows predating meta blocks)."""
  seen = []
  for _, r in rows:
    m, v = r['machine'], r['versions']
    text = (f'{m["cpu"]}, {m["cpu_count"]} cores, measured {r["date"][:10]}; python '
            f'{v.get("python")}, jax {v.get("jax")}, jaxlib {v.get("jaxlib")}'
            + (f', kfac-jax {v["kfac-jax"]}' if 'kfac-jax' in v else ''))
    if text not in seen:
      seen.append(text)
  return 'As the rows recorded themselves: ' + '; '.join(seen) + '.'


def render_full(path: str = JSON) -> str:
  """ACCURACY.md's main table: each system's latest evaluated energy against exact."""
  rows = latest_rows(path)
  runs = [run for run, _ in rows]
  note = artifacts.provenance(path, runs)
  if any(not run.meta.get('recorded', True) for run in runs):
    note += ' ' + _measured(rows)
  return table([r for _, r in rows]) + '\n\n' + note


def render_jax012() -> str:
  return render_full(JSON_JAX012)


def as_shipped(row: dict) -> bool:
  """Whether a row trained its config as shipped (no --config overrides)."""
  return not row.get('overrides')


def render_ecp(path: str = ECP_JSON) -> str:
  """The pseudopotential table: every row of every run (a longer training is a row of its
  own, its settings beside the system)."""
  runs = artifacts.read(path)
  if not runs:
    return f'*No runs in `{os.path.relpath(path, REPO)}` yet.*'
  rows = []
  for run in runs:
    for r in run.data['full']:
      extra = '' if as_shipped(r) else f', `{" ".join(r["overrides"])}`'
      rows.append({**r, 'system': r['system'] + extra})
  return table(rows) + '\n\n' + artifacts.provenance(path, runs)


TABLES = {  # Rendered into the docs by scripts/render_docs.py.
    'accuracy': ('ACCURACY.md', render_full),
    'accuracy-jax0.12': ('ACCURACY.md', render_jax012),
    'accuracy-matched': ('ACCURACY.md', render_matched),
    'accuracy-ecp': ('ACCURACY.md', render_ecp),
    'kfac-spring-matched': ('BENCHMARKS.md', render_spring_matched),
}


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--systems', nargs='+', default=list(SYSTEMS),
                 choices=list(SYSTEMS) + list(ECP_SYSTEMS))
  p.add_argument('--matched', action='store_true',
                 help="ours at FermiNet's wall time, both run now (needs --ferminet)")
  p.add_argument('--ferminet', help='directory made by ../shared/anchors/setup-ferminet.sh')
  p.add_argument('--matched-iterations', type=int, default=2000)
  p.add_argument('--peer-settings', default='best', choices=list(reference.PEER_SETTINGS))
  p.add_argument('--json', default='', help='the artifact (default: benchmarks/accuracy.json, '
                 'or accuracy_matched.json with --matched)')
  p.add_argument('--render', action='store_true',
                 help='run python -m scripts.render_docs afterwards')
  p.add_argument('--runs-dir', default='', help='Keep the run directories here (default: a '
                 'temporary directory, deleted afterwards).')
  args, overrides = p.parse_known_args()  # --config.KEY=VALUE: passed to every training.
  if any(not o.startswith('--config.') for o in overrides):
    p.error(f'unrecognized arguments: {" ".join(overrides)}')
  if args.matched and not args.ferminet:
    p.error('--matched needs --ferminet DIR: both codes run in this invocation')
  ecp = [s in ECP_SYSTEMS for s in args.systems]
  if any(ecp) and (args.matched or not all(ecp)):
    p.error(f'{", ".join(ECP_SYSTEMS)}: a table of its own, without --matched and without the '
            'all-electron systems')
  path = args.json or (MATCHED_JSON if args.matched else ECP_JSON if all(ecp) else JSON)
  peer = ({**reference.peer_versions(args.ferminet),
           'settings': reference.peer_settings_record(args.peer_settings)}
          if args.matched else None)
  run_meta, rows = artifacts.meta(peer=peer), []
  with tempfile.TemporaryDirectory() as tmp:
    for stem in args.systems:
      if args.matched:
        r = run_matched(stem, args.ferminet, args.matched_iterations, args.peer_settings,
                        tempfile.mkdtemp(dir=tmp), overrides)
      else:
        r = run_system(stem, args.runs_dir or tmp, overrides)
      r['date'] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
      r['overrides'] = overrides
      rows.append(r)
      print(json.dumps({k: v for k, v in r.items() if not isinstance(v, dict)}), flush=True)
  artifacts.append(path, {'rows': rows} if args.matched else {'full': rows}, run_meta)
  print(render_matched(path) if args.matched else render_ecp(path) if all(ecp)
        else render_full(path))
  if args.render:
    from scripts import render_docs
    render_docs.main([])


if __name__ == '__main__':
  main()
