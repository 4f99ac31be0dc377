"""Reliability figures: kills, preemption signals, NaN injection and malformed input.

  python -m scripts.chaos                  # all four, ~10 min on 2 CPU cores
  python -m scripts.chaos --only kill --kills 5

Every trial drives the real command line (`python -m ferminet_fast.train`) on a tiny
helium config in a temporary directory and checks the outcome from the outside:

- kill:    SIGKILL at random moments (start-up, training, mid-checkpoint), restart each
           time; every restart must resume from the newest checkpoint on disk, every
           finished checkpoint must restore, and the completed run's stats.csv must hold
           each step exactly once.
- sigterm: SIGTERM (or SIGUSR1/SIGINT) during training; the process must exit with code
           75 after writing a checkpoint of the step it reports, which must restore.
- nan:     NaN injected into the parameters or walkers mid-run (tests/faults.py, the same
           command line with the fault put into its step); the run must finish, with
           finite parameters in its final checkpoint.
- input:   malformed configs, geometries, checkpoints, run files, paths and flags, given
           to each entry point (train, evaluate, dmc, plot); each must give exit status
           2, no traceback, a message naming the problem, and leave every earlier run's
           files byte-for-byte unchanged.

Writes the per-trial records to an artifact (--json, scripts/artifacts.py) and renders the
tables of RELIABILITY.md from it (render(); `python -m scripts.render_docs`).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import orbax.checkpoint as ocp

from scripts import artifacts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JSON = os.path.join(REPO, 'benchmarks', 'reliability.json')
TINY = ['--config.batch_size=64', '--config.network.ferminet.hidden_dims=((16,4),(16,4))',
        '--config.mcmc.burn_in=20', '--config.log.timers=False', '--config.log.print_every=10',
        '--config.log.save_every=5', '--config.log.save_frequency=0']
ENV = dict(os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=1',
           PYTHONUNBUFFERED='1')


# The training command line with NaN injected ('nan-params@STEP', 'nan-walkers@STEP'): the
# test suite's fault injection.
INJECT = os.path.join(REPO, 'tests', 'faults.py')


def train_cmd(run_dir, *extra):
  return [sys.executable, '-m', 'ferminet_fast.train', *TINY,
          f'--config.log.save_path={run_dir}', *extra]


def start(cmd, log_path):
  log = open(log_path, 'w')
  return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ENV, cwd=REPO), log


def checkpoint_steps(run_dir):
  d = os.path.join(run_dir, 'checkpoints')
  return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def restores_finite(run_dir, step) -> bool:
  """Whether checkpoint `step` restores and all its arrays are finite."""
  manager = ocp.CheckpointManager(os.path.join(os.path.abspath(run_dir), 'checkpoints'))
  try:
    tree = manager.restore(step, args=ocp.args.StandardRestore())
    leaves = [np.asarray(x) for x in _leaves(tree)]
    return all(np.isfinite(x).all() for x in leaves if x.dtype.kind == 'f')
  except Exception:  # Any failure to read it is what is being counted.
    return False
  finally:
    manager.close()


def _leaves(tree):
  if isinstance(tree, dict):
    for v in tree.values():
      yield from _leaves(v)
  elif isinstance(tree, (list, tuple)):
    for v in tree:
      yield from _leaves(v)
  else:
    yield tree


def stats_steps(run_dir):
  return np.loadtxt(os.path.join(run_dir, 'stats.csv'), delimiter=',', skiprows=1, usecols=0,
                    ndmin=1)


def continuous(run_dir, n) -> bool:
  steps = stats_steps(run_dir)
  return len(steps) == n and np.array_equal(steps, np.arange(n))


def _restored(text):
  m = re.search(r'Restored step (\d+) ', text)
  return int(m.group(1)) if m else None


def chaos_kill(work, trials, rng):
  """SIGKILL at random moments (start-up included); after each kill, the next run that
  gets as far as restoring must restore the newest checkpoint then on disk."""
  # Long enough that no life between kills finishes the run (about 100-200 steps each).
  run_dir, iterations = os.path.join(work, 'kill'), 3000
  records = []
  for i in range(trials):
    proc, log = start(train_cmd(run_dir, f'--config.optim.iterations={iterations}'),
                      os.path.join(work, f'kill_{i}.log'))
    delay = rng.uniform(3.0, 14.0)
    try:
      proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
    log.close()
    steps = checkpoint_steps(run_dir)
    records.append({'trial': i, 'kill_after_s': round(delay, 2),
                    'killed': proc.returncode == -signal.SIGKILL,
                    'restored_at_start': _restored(open(log.name).read()),
                    'checkpoints_after_kill': steps,
                    'corrupt': [s for s in steps if not restores_finite(run_dir, s)]})
  final = subprocess.run(train_cmd(run_dir, f'--config.optim.iterations={iterations}'),
                         capture_output=True, text=True, env=ENV, cwd=REPO)
  restores = [r['restored_at_start'] for r in records[1:]] + [_restored(final.stdout)]
  for i, r in enumerate(records):
    newest = r['checkpoints_after_kill'][-1] if r['checkpoints_after_kill'] else None
    later = next((x for x in restores[i:] if x is not None), None) if newest is not None else None
    r['next_restore'] = later
    r['resumed'] = later == newest  # Both None: killed before any checkpoint existed.
  return records, {'completed': final.returncode == 0,
                   'stats_continuous': final.returncode == 0 and continuous(run_dir, iterations),
                   'iterations': iterations}


def chaos_sigterm(work, trials, rng):
  run_dir = os.path.join(work, 'sigterm')
  names = ['SIGTERM', 'SIGUSR1', 'SIGINT']
  records = []
  for i in range(trials):
    sig = getattr(signal, names[i % 3] if i >= 7 else 'SIGTERM')
    proc, log = start(train_cmd(run_dir, '--config.optim.iterations=1000000'),
                      os.path.join(work, f'sigterm_{i}.log'))
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:  # Until training has started.
      if re.search(r'^step +\d+ +E', open(log.name).read(), re.M):
        break
      time.sleep(0.2)
    time.sleep(rng.uniform(0.0, 2.0))
    t0 = time.time()
    proc.send_signal(sig)
    try:
      proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
    log.close()
    text = open(log.name).read()
    m = re.search(r'checkpointed step (\d+)', text)
    step = int(m.group(1)) if m else None
    on_disk = step is not None and step in checkpoint_steps(run_dir)
    records.append({'trial': i, 'signal': signal.Signals(sig).name, 'exit_code': proc.returncode,
                    'exit_s': round(time.time() - t0, 2), 'checkpoint_step': step,
                    'checkpoint_on_disk': on_disk,
                    'restores': on_disk and restores_finite(run_dir, step)})
  steps = stats_steps(run_dir)
  return records, {'stats_continuous': bool(np.array_equal(steps, np.arange(len(steps))))}


def chaos_nan(work, trials, rng):
  records = []
  for i in range(trials):
    run_dir = os.path.join(work, f'nan_{i}')
    into = 'params' if i % 2 == 0 else 'walkers'
    at = int(rng.integers(20, 120))
    cmd = train_cmd(run_dir, '--config.optim.iterations=150', '--config.optim.snapshot_every=10')
    cmd[1:3] = [INJECT, f'nan-{into}@{at}']
    r = subprocess.run(cmd,
                       capture_output=True, text=True, env=ENV, cwd=REPO)
    last = checkpoint_steps(run_dir)
    timings = json.load(open(os.path.join(run_dir, 'timings.json'))) if r.returncode == 0 else {}
    records.append({'trial': i, 'into': into, 'at_step': at, 'exit_code': r.returncode,
                    'rewinds': timings.get('rewinds'), 'final_checkpoint': last[-1] if last else None,
                    'params_finite': bool(last) and last[-1] == 150 and restores_finite(run_dir, last[-1]),
                    'stats_continuous': r.returncode == 0 and continuous(run_dir, 150)})
  return records, {}


def tree_hash(path):
  h = hashlib.sha256()
  for root, dirs, files in sorted(os.walk(path)):
    dirs.sort()
    for name in sorted(files):
      p = os.path.join(root, name)
      h.update(p.encode())
      with open(p, 'rb') as f:
        h.update(f.read())
  return h.hexdigest()


def malformed_inputs(work):
  """(name, entry point, its arguments, expected words of the message) for 50-odd bad
  inputs; the training command's get TINY and a new save_path unless they name one. Needs
  two earlier runs: `ref` (He, complete) and `li` (Li, complete)."""
  ref, li = os.path.join(work, 'ref'), os.path.join(work, 'li')
  cfgs = os.path.join(work, 'configs')
  os.makedirs(cfgs, exist_ok=True)
  files = {
      'syntax.py': 'def get_config(:\n',
      'noget.py': 'x = 1\n',
      'raises.py': 'def get_config():\n  raise ValueError("no basis")\n',
      'unknown_key.py': ('from ferminet_fast import config\ndef get_config():\n'
                         '  c = config.default()\n  c.optim.learning_rate = 1\n  return c\n'),
  }
  for name, text in files.items():
    with open(os.path.join(cfgs, name), 'w') as f:
      f.write(text)
  # Damaged copies of the reference run.
  truncated = os.path.join(work, 'truncated')
  shutil.copytree(ref, truncated)
  for root, _, names in os.walk(os.path.join(truncated, 'checkpoints')):
    for n in names:
      p = os.path.join(root, n)
      if os.path.getsize(p) > 0:
        with open(p, 'r+b') as f:
          f.truncate(os.path.getsize(p) // 2)
  bad_json = os.path.join(work, 'bad_json')
  shutil.copytree(ref, bad_json)
  with open(os.path.join(bad_json, 'config.json'), 'w') as f:
    f.write('{"batch_size": 6')
  foreign = os.path.join(work, 'foreign')
  os.makedirs(foreign)
  with open(os.path.join(foreign, 'stats.csv'), 'w') as f:
    f.write('step,energy\n0,-1.0\n')
  a_file = os.path.join(work, 'a_file')
  with open(a_file, 'w') as f:
    f.write('not a directory\n')
  new = os.path.join(work, 'new')
  listed = os.path.join(work, 'listed')  # config.json holds JSON, but not settings.
  shutil.copytree(ref, listed)
  with open(os.path.join(listed, 'config.json'), 'w') as f:
    f.write('[1, 2]')
  unnamed = os.path.join(work, 'unnamed')  # Checkpoints without their config.json.
  shutil.copytree(ref, unnamed)
  os.remove(os.path.join(unnamed, 'config.json'))
  edited = os.path.join(work, 'edited')  # A result.json edited by hand.
  shutil.copytree(ref, edited)
  with open(os.path.join(edited, 'result.json'), 'w') as f:
    f.write('{"exact_energy": "abc"}')
  latin1 = os.path.join(work, 'latin1.xyz')
  with open(latin1, 'wb') as f:
    f.write('2\nH\xe9lium\nH 0 0 0\nH 0 0 0.74\n'.encode('latin-1'))
  h2 = "--config.system.geometries=('H 0 0 0; H 0 0 1.4', 'He 0 0 0; H 0 0 1.6')"
  scan = ['--config.system.atom=', '--config.system.molecule=H 0 0 0; H 0 0 1.4',
          '--config.system.scan.atoms=(0,1)', '--config.system.scan.start=1.0',
          '--config.system.scan.stop=3.0', '--config.system.scan.points=65']
  train = [(name, 'train', args, words) for name, args, words in _training_inputs(
      ref, li, cfgs, truncated, bad_json, foreign, a_file, new)] + [
      ('infinite number', 'train', ['--config.mcmc.move_width=inf'],
       'must be a finite number'),
      ('seed beyond 64 bits', 'train', ['--config.debug.seed=18446744073709551616'],
       'debug.seed must lie in'),
      ('--dry-run with a value', 'train', ['--dry-run=maybe'], 'dry'),
      ('resume a config.json that is not settings', 'train',
       [f'--config.log.save_path={listed}'], 'config.json'),
      ('checkpoints without config.json', 'train', [f'--config.log.save_path={unnamed}'],
       'holds checkpoints but no config.json'),
      ('process index beyond the count', 'train',
       ['--config.distributed.coordinator=localhost:1', '--config.distributed.num_processes=2',
        '--config.distributed.process_id=2'], 'process_id'),
      ('both restored and fine-tuned', 'train', [f'--config.log.restore_path={ref}',
                                                 f'--config.log.fine_tune_from={ref}'],
       'both given'),
      ('geometries of different elements', 'train', ['--config.system.atom=', h2], 'element'),
      ('.xyz file not UTF-8', 'train', ['--config.system.atom=',
                                       f'--config.system.geometries={latin1}'],
       'is not a text file'),
      ('scan of more geometries than walkers', 'train', scan, 'scan.points = 65 exceeds'),
      ('an ECP named twice for one element', 'train',
       ['--config.system.atom=S', '--config.system.ecp=S:ccecp,S:crenbl'], 'more than once'),
  ]
  return train + [
      ('no checkpoint', 'evaluate', [f'--run={foreign}'], 'no checkpoint'),
      ('unknown flag', 'evaluate', [f'--run={ref}', '--walkerz=5'], 'walkerz'),
      ('stray argument', 'evaluate', [f'--run={ref}', 'stray'], 'stray'),
      ('seed beyond 64 bits', 'evaluate', [f'--run={ref}',
                                                     '--seed=18446744073709551616'], '--seed'),
      ('config.json not settings', 'evaluate', [f'--run={listed}'], 'config.json'),
      ('zero walkers', 'evaluate', [f'--run={ref}', '--walkers=0'], 'walkers'),
      ('run missing', 'dmc', [f'--run={os.path.join(work, "none")}'], 'not a directory'),
      ('negative time step', 'dmc', [f'--run={ref}', '--tau=-0.01'], 'config.dmc.tau'),
      ('infinite time step', 'dmc', [f'--run={ref}', '--tau=inf'], 'config.dmc.tau'),
      ('unknown moves', 'dmc', [f'--run={ref}', '--moves=both'], 'config.dmc.moves'),
      ('unknown flag', 'dmc', [f'--run={ref}', '--no_such_flag'], 'no_such_flag'),
      ('run missing', 'plot', [os.path.join(work, 'none')], 'does not exist'),
      ('result.json edited by hand', 'plot', [edited, os.path.join(work, 'plots')],
       'exact_energy'),
  ]


def _training_inputs(ref, li, cfgs, truncated, bad_json, foreign, a_file, new):
  """The training command's bad inputs as (name, arguments, expected words)."""
  return [
      ('unknown key', ['--config.optim.foo=1', f'--config.log.save_path={new}'], 'optim.foo'),
      ('misspelt section', ['--config.sytem.atom=Li'], 'sytem'),
      ('wrong type', ['--config.batch_size=many'], 'batch_size'),
      ('zero batch', ['--config.batch_size=0'], 'batch_size must be a positive integer'),
      ('negative iterations', ['--config.optim.iterations=-3'], 'optim.iterations must be >= 0'),
      ('negative MCMC steps', ['--config.mcmc.steps=-1'], 'mcmc.steps'),
      ('target pmove > 1', ['--config.mcmc.target_pmove=1.5'], 'target_pmove'),
      ('unknown optimizer', ['--config.optim.optimizer=adamw'], 'adamw'),
      ('unknown Laplacian', ['--config.optim.laplacian=magic'], 'magic'),
      ('unknown precision', ['--config.precision=float16'], 'float16'),
      ('bad hidden dims', ['--config.network.ferminet.hidden_dims=((16,),)'], 'hidden_dims'),
      ('unknown element', ['--config.system.atom=Xx'], "'Xx'"),
      ('impossible spin', ['--config.system.spin=1'], 'spin 1'),
      ('charge removes all electrons', ['--config.system.charge=3'], 'charge'),
      ('electrons disagree', ['--config.system.electrons=(2,1)'], '3 electrons'),
      ('molecule missing a coordinate', ['--config.system.atom=',
                                         '--config.system.molecule=H 0 0; H 0 0 1.4'], 'molecule'),
      ('molecule unknown element', ['--config.system.atom=',
                                    '--config.system.molecule=Qq 0 0 0'], "'Qq'"),
      ('nuclei on top of each other', ['--config.system.atom=',
                                       '--config.system.molecule=H 0 0 0; H 0 0 0'], 'nuclei'),
      # Both on the command line: a molecule alone replaces the config's atom (runtime/cli.py).
      ('atom and molecule both set', ['--config.system.atom=He',
                                      '--config.system.molecule=H 0 0 0; H 0 0 1.4'], 'molecule'),
      ('bad units', ['--config.system.units=furlong'], 'furlong'),
      ('missing config file', ['--config', os.path.join(cfgs, 'none.py')], 'no such file'),
      ('config file syntax error', ['--config', os.path.join(cfgs, 'syntax.py')], 'SyntaxError'),
      ('config file without get_config', ['--config', os.path.join(cfgs, 'noget.py')],
       'get_config'),
      ('get_config raises', ['--config', os.path.join(cfgs, 'raises.py')], 'no basis'),
      ('config file sets unknown key', ['--config', os.path.join(cfgs, 'unknown_key.py')],
       'learning_rate'),
      ('unknown flag', ['--no_such_flag'], 'no_such_flag'),
      ('stray argument', ['stray'], 'stray'),
      ('save_path is a file', [f'--config.log.save_path={a_file}'], 'not a directory'),
      ('save_path cannot be created', [f'--config.log.save_path={a_file}/run'], 'cannot be created'),
      ('save_path holds another run', [f'--config.log.save_path={foreign}'], "another run's files"),
      ('resume with another network', [f'--config.log.save_path={ref}',
                                       '--config.network.determinants=3'], 'determinants'),
      ('resume as another system', [f'--config.log.save_path={ref}', '--config.system.atom=Li'],
       'system.atom'),
      ('restore_path without checkpoint', [f'--config.log.save_path={new}',
                                           f'--config.log.restore_path={foreign}'], 'no checkpoint'),
      ('restore_path from another system', [f'--config.log.save_path={new}',
                                            f'--config.log.restore_path={li}'], 'system.atom'),
      ('truncated checkpoint files', [f'--config.log.save_path={truncated}'], 'can be restored'),
      ('corrupt config.json', [f'--config.log.save_path={bad_json}'], 'config.json'),
      ('coordinator without process count', [f'--config.log.save_path={new}',
                                             '--config.distributed.coordinator=localhost:1'],
       'num_processes'),
  ]


def chaos_input(work):
  ref, li = os.path.join(work, 'ref'), os.path.join(work, 'li')
  for path, extra in ((ref, []), (li, ['--config.system.atom=Li'])):
    subprocess.run(train_cmd(path, '--config.optim.iterations=10', *extra), check=True,
                   capture_output=True, env=ENV, cwd=REPO)
  cases = malformed_inputs(work)
  records = []
  for name, command, args, expected in cases:
    before = {d: tree_hash(os.path.join(work, d)) for d in sorted(os.listdir(work))
              if os.path.isdir(os.path.join(work, d))}
    argv = [sys.executable, '-m', f'ferminet_fast.{command}', *args]
    if command == 'train':
      argv[3:3] = TINY
      if not any(a.startswith('--config.log.save_path') for a in args):
        argv.append(f'--config.log.save_path={os.path.join(work, "new")}')
    r = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    after = {d: tree_hash(os.path.join(work, d)) for d in before}
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    message = next((ln for ln in lines if ln.startswith(('error:', 'FATAL'))), '')
    records.append({'input': name, 'command': command, 'exit_code': r.returncode,
                    'message': message, 'stderr_tail': r.stderr[-1500:] if not message else '',
                    'names_problem': expected in message, 'traceback': 'Traceback' in r.stderr,
                    'files_unchanged': before == after,
                    'new_dir_created': any(os.path.exists(os.path.join(work, d))
                                           for d in ('new', 'plots'))})
    for d in ('new', 'plots'):
      shutil.rmtree(os.path.join(work, d), ignore_errors=True)
  return records, {}


def passed(kind, rec) -> bool:
  if kind == 'kill':
    return rec['killed'] and rec['resumed'] and not rec['corrupt']
  if kind == 'sigterm':
    return rec['exit_code'] == 75 and rec['checkpoint_on_disk'] and rec['restores']
  if kind == 'nan':
    return rec['exit_code'] == 0 and rec['params_finite'] and rec['stats_continuous']
  return (rec['exit_code'] == 2 and rec['names_problem'] and not rec['traceback']
          and rec['files_unchanged'] and not rec['new_dir_created'])


CRITERIA = {
    'kill': 'the next run to restore takes the newest checkpoint on disk after the kill; '
            'every checkpoint restores',
    'sigterm': 'exit code 75 with a checkpoint of the reported step on disk, restorable',
    'nan': 'run completes; final checkpoint finite; stats.csv continuous',
    'input': 'exit status 2, one message naming the problem, no traceback, no files changed',
}


def latest_by_kind(path: str = JSON) -> dict:
  """{kind: (run, its records)} from the newest run that measured each kind (a run with
  --only measures some kinds; every run is kept in the artifact)."""
  out = {}
  for run in artifacts.read(path):
    for kind, res in run.data['results'].items():
      out[kind] = (run, res)
  return {k: out[k] for k in CRITERIA if k in out}


def _runs_used(by_kind: dict) -> list:
  runs = []
  for run, _ in by_kind.values():
    if not any(run is r for r in runs):
      runs.append(run)
  return runs


def render_summary(path: str = JSON) -> str:
  """RELIABILITY.md's table of trial kinds: how many passed, from the newest run of each."""
  by_kind = latest_by_kind(path)
  out = ['| trial kind | passed | criterion |', '|---|---|---|']
  for kind, (_, res) in by_kind.items():
    n = sum(passed(kind, r) for r in res['trials'])
    extra = ''.join(f'; {k}: {v}' for k, v in res['final'].items())
    out.append(f'| {kind} | {n}/{len(res["trials"])} | {CRITERIA[kind]}{extra} |')
  runs = _runs_used(by_kind)
  commands = '; '.join(
      f'`{artifacts.runnable(r.meta.get("command") or r.data.get("command"))}`'
      + (f' ({r.data["wall_s"]:.0f} s)' if r.data.get('wall_s') else '') for r in runs)
  out += ['', commands + '. ' + artifacts.provenance(path, runs)]
  return '\n'.join(out)


def render_inputs(path: str = JSON) -> str:
  """RELIABILITY.md's table of malformed inputs: exit status and message of each."""
  by_kind = latest_by_kind(path)
  if 'input' not in by_kind:
    return f'*No malformed-input run in `{os.path.relpath(path, REPO)}` yet.*'
  run, res = by_kind['input']
  out = ['| command | malformed input | exit | message |', '|---|---|---|---|']
  work = re.compile(r'/tmp/ferminet_fast_chaos_[^/]+/')
  for r in res['trials']:
    msg = work.sub('…/', r['message']).replace('|', '\\|')
    out.append(f'| {r.get("command", "train")} | {r["input"]} | {r["exit_code"]} | '
               f'`{msg[:160]}` |')
  return '\n'.join(out + ['', artifacts.provenance(path, [run])])


TABLES = {  # Rendered into the docs by scripts/render_docs.py.
    'reliability-summary': ('RELIABILITY.md', render_summary),
    'reliability-inputs': ('RELIABILITY.md', render_inputs),
}


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--only', choices=['kill', 'sigterm', 'nan', 'input'], action='append')
  p.add_argument('--kills', type=int, default=20)
  p.add_argument('--sigterms', type=int, default=10)
  p.add_argument('--nans', type=int, default=10)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--json', default=JSON)
  p.add_argument('--render', action='store_true',
                 help='rewrite the tables of RELIABILITY.md from the artifact afterwards')
  args = p.parse_args()
  rng = np.random.default_rng(args.seed)
  run_meta = artifacts.meta()  # The tree as it was when the trials started.
  t0 = time.time()
  work = tempfile.mkdtemp(prefix='ferminet_fast_chaos_')
  results = {}
  kinds = args.only or ['kill', 'sigterm', 'nan', 'input']
  for kind in kinds:
    print(f'== {kind}', flush=True)
    if kind == 'kill':
      trials, final = chaos_kill(work, args.kills, rng)
    elif kind == 'sigterm':
      trials, final = chaos_sigterm(work, args.sigterms, rng)
    elif kind == 'nan':
      trials, final = chaos_nan(work, args.nans, rng)
    else:
      os.makedirs(os.path.join(work, 'input'))
      trials, final = chaos_input(os.path.join(work, 'input'))
    for r in trials:
      print(('PASS ' if passed(kind, r) else 'FAIL ') + json.dumps(r), flush=True)
    print(f'{kind}: {sum(passed(kind, r) for r in trials)}/{len(trials)} {final}', flush=True)
    results[kind] = {'trials': trials, 'final': final}
  artifacts.append(args.json, {'wall_s': time.time() - t0, 'seed': args.seed,
                               'results': results}, run_meta)
  if args.render:
    from scripts import render_docs
    render_docs.main([])
  shutil.rmtree(work, ignore_errors=True)
  ok = all(passed(k, r) for k, res in results.items() for r in res['trials']) and all(
      v is not False for res in results.values() for v in res['final'].values())
  sys.exit(0 if ok else 1)


if __name__ == '__main__':
  main()
