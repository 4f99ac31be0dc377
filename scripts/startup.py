"""Start-up of the systems of ten electrons and more in each environment: does the run start,
train and finish, and what ends a run that cannot.

  python -m scripts.startup --python .venv-0.10/bin/python --python .venv/bin/python

For each interpreter given (each a virtual environment with ferminet_fast installed), each
case below runs through the command line users call (`python -m ferminet_fast.train`, then
`evaluate` where the case says), in a temporary directory, with the machine's default CPU
devices (no JAX_NUM_CPU_DEVICES, no device count in XLA_FLAGS) and our stage timers off,
under a timeout that turns a hang into a recorded failure. Two cases provoke the fault on
purpose on the jaxlib builds that have it (two CPU devices asked for explicitly): one is
left to the watchdog, one is sent SIGTERM. Each outcome is recorded with its exit status
and wall time in the artifact, and RELIABILITY.md's table is rendered from it.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from scripts import artifacts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JSON = os.path.join(REPO, 'benchmarks', 'startup.json')
NE = ['--config', 'configs/he.py', '--config.system.atom=Ne', '--config.pretrain.iterations=0']
STANDARD = ["--config.network.ferminet.hidden_dims=((256,32),(256,32),(256,32),(256,32))",
            '--config.network.determinants=16']
S_PSIFORMER = ['--config', 'configs/he.py', '--config.system.atom=S',
               '--config.network.network_type=psiformer', '--config.network.psiformer.layers=1',
               '--config.network.psiformer.heads=2', '--config.network.psiformer.head_dim=4',
               '--config.batch_size=64', '--config.pretrain.iterations=0']
# (name, what it runs, training arguments, steps, evaluate afterwards with these flags,
#  SIGTERM this many seconds after the devices are printed).
CASES = [
    ('ne', '`configs/ne.py` (HF pretraining)', ['--config', 'configs/ne.py'], 5, None, None),
    ('ne_kfac', 'Ne through `he.py`, no pretraining, KFAC', NE, 5, None, None),
    ('ne_adam', 'the same with Adam', NE + ['--config.optim.optimizer=adam'], 5, None, None),
    ('ne_standard', "the same with FermiNet's standard network", NE + STANDARD, 5, None, None),
    ('n2', '`configs/n2.py` without pretraining',
     ['--config', 'configs/n2.py', '--config.pretrain.iterations=0'], 5, None, None),
    ('heg', '`configs/heg.py`', ['--config', 'configs/heg.py'], 5, None, None),
    ('s_psiformer', 'S, Psiformer, small network, 64 walkers, Adam; then evaluated with '
     '<S^2>',
     S_PSIFORMER + ['--config.optim.optimizer=adam'], 5,
     ['--steps=20', '--burn_in=5', '--observables=s2'], None),
    ('li', '`configs/li.py`', ['--config', 'configs/li.py'], 60, None, None),
    ('be', '`configs/be.py`', ['--config', 'configs/be.py'], 60, None, None),
    ('c', 'C atom through `he.py`', ['--config', 'configs/he.py', '--config.system.atom=C'], 60,
     None, None),
    ('ne_one_device', 'Ne with `distributed.cpu_devices=1`',
     NE + ['--config.distributed.cpu_devices=1'], 5, None, None),
    ('ne_two_devices', 'Ne with `distributed.cpu_devices=2` asked for (the fault provoked)',
     NE + ['--config.distributed.cpu_devices=2'], 5, None, None),
    ('ne_two_devices_sigterm', 'the same, sent SIGTERM 30 s after its devices are printed',
     NE + ['--config.distributed.cpu_devices=2'], 5, None, 30.0),
]
TIMEOUT_S = 600


def environment_of(python: str) -> dict:
  """Python, jax and jaxlib versions of an interpreter."""
  out = subprocess.run([python, '-c', 'import sys, jax, jaxlib; print(sys.version.split()[0], '
                        'jax.__version__, jaxlib.__version__)'], capture_output=True, text=True,
                       timeout=120, check=True).stdout.split()
  return {'python': out[0], 'jax': out[1], 'jaxlib': out[2], 'executable': python}


def default_devices_env() -> dict:
  env = {k: v for k, v in os.environ.items() if k != 'JAX_NUM_CPU_DEVICES'}
  env['XLA_FLAGS'] = ' '.join(f for f in env.get('XLA_FLAGS', '').split()
                              if not f.startswith('--xla_force_host_platform_device_count'))
  env['PYTHONUNBUFFERED'] = '1'
  return env


def run_case(python: str, work: str, name: str, args: list, steps: int, evaluate, sigterm_s):
  """One case: its outcome, exit status, wall seconds, devices and the last message."""
  run_dir = os.path.join(work, name)
  cmd = [python, '-m', 'ferminet_fast.train', *args, f'--config.optim.iterations={steps}',
         '--config.log.timers=False', '--config.log.progress=False',
         f'--config.log.save_path={run_dir}']
  log_path = os.path.join(work, name + '.log')
  t0 = time.monotonic()
  with open(log_path, 'w') as log:
    proc = subprocess.Popen(cmd, cwd=REPO, env=default_devices_env(), stdout=log,
                            stderr=subprocess.STDOUT)
    signalled_at = None
    while proc.poll() is None and time.monotonic() - t0 < TIMEOUT_S:
      time.sleep(0.5)
      if sigterm_s is not None and signalled_at is None:
        with open(log_path) as f:
          text = f.read()
        if 'Devices ' in text and time.monotonic() - t0 > sigterm_s:
          proc.send_signal(signal.SIGTERM)
          signalled_at = time.monotonic() - t0
    hung = proc.poll() is None
    if hung:
      proc.kill()
    proc.wait()
  wall = time.monotonic() - t0
  with open(log_path) as f:
    text = f.read()
  devices = next((line.split('Devices ')[1].split(' in ')[0] for line in text.splitlines()
                  if line.startswith('Devices ')), None)
  errors = [line for line in text.splitlines() if line.startswith('error:')]
  rec = {'case': name, 'exit_code': None if hung else proc.returncode, 'wall_s': wall,
         'devices': devices, 'hung': hung, 'sigterm_at_s': signalled_at,
         'finished': 'Trained steps' in text, 'message': errors[-1][:300] if errors else ''}
  if evaluate and rec['exit_code'] == 0:
    t1 = time.monotonic()
    try:
      ev = subprocess.run([python, '-m', 'ferminet_fast.evaluate', f'--run={run_dir}',
                           *evaluate], cwd=REPO, env=default_devices_env(), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
      rec['evaluate_exit_code'], rec['evaluate_hung'] = ev.returncode, False
    except subprocess.TimeoutExpired:
      rec['evaluate_exit_code'], rec['evaluate_hung'] = None, True
    rec['evaluate_wall_s'] = time.monotonic() - t1
  return rec


def outcome(rec: dict) -> str:
  """A table cell: what became of the run, and after how long."""
  if rec['hung']:
    return f'hung: killed at {rec["wall_s"]:.0f} s'
  code, wall = rec['exit_code'], rec['wall_s']
  if code == 0:
    text = f'finished in {wall:.0f} s'
    if 'evaluate_exit_code' in rec:
      ev = rec['evaluate_exit_code']
      text += ('; evaluated in {:.0f} s'.format(rec['evaluate_wall_s']) if ev == 0 else
               '; evaluation hung' if rec['evaluate_hung'] else f'; evaluation exit {ev}')
    return text
  if code == 4:
    return f'stalled: ended by the watchdog at {wall:.0f} s (exit 4)'
  if code == 75 and rec['sigterm_at_s'] is not None:
    return (f'SIGTERM at {rec["sigterm_at_s"]:.0f} s: ended at {wall:.0f} s (exit 75)')
  return f'exit {code} at {wall:.0f} s'


def newest_records(path: str = JSON) -> tuple:
  """([environment, by its Python and jax, with {case: its newest record}], the runs that
  hold them): a run of some cases (--only) replaces those cases' records alone."""
  envs, used = {}, []
  for run in artifacts.read(path):
    for e in run.data['environments']:
      key = (e['python'], e['jax'])
      entry = envs.setdefault(key, {'python': e['python'], 'jax': e['jax'], 'records': {}})
      for rec in e['records']:
        entry['records'][rec['case']] = rec
      if not any(run is r for r in used):
        used.append(run)
  return list(envs.values()), used


def render(path: str = JSON) -> str:
  """RELIABILITY.md's start-up table: one column per environment, each case's newest."""
  envs, runs = newest_records(path)
  if not envs:
    return f'*No start-up run in `{os.path.relpath(path, REPO)}` yet.*'
  head = ['case'] + [f'Python {e["python"]}, jax {e["jax"]}' for e in envs]
  out = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for name, what, *_ in CASES:
    cells = []
    for e in envs:
      rec = e['records'].get(name)
      cells.append('–' if rec is None else f'{outcome(rec)}; {rec["devices"] or "?"}')
    out.append(f'| {what} | ' + ' | '.join(cells) + ' |')
  commands = '; '.join(
      f'`{artifacts.runnable(r.meta.get("command"))}` ({r.data["wall_s"]:.0f} s)' for r in runs)
  return '\n'.join(out + ['', commands + '. ' + artifacts.provenance(path, runs)])


TABLES = {'startup': ('RELIABILITY.md', render)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--python', action='append', help='an interpreter to run (repeatable); '
                 'default: this one')
  p.add_argument('--only', action='append', help='a case to run (repeatable)')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  run_meta = artifacts.meta()
  t0 = time.time()
  work = tempfile.mkdtemp(prefix='ferminet_fast_startup_')
  envs = []
  for i, python in enumerate(args.python or [sys.executable]):
    env = environment_of(python)
    env['records'] = []
    for name, _, case_args, steps, evaluate, sigterm_s in CASES:
      if args.only and name not in args.only:
        continue
      os.makedirs(os.path.join(work, str(i)), exist_ok=True)
      rec = run_case(python, os.path.join(work, str(i)), name, case_args, steps, evaluate,
                     sigterm_s)
      print(f'jax {env["jax"]}: {name}: {outcome(rec)}; {rec["devices"]} {rec["message"]}',
            flush=True)
      env['records'].append(rec)
    envs.append(env)
  artifacts.append(args.json, {'wall_s': time.time() - t0, 'environments': envs,
                               'cases': [c[0] for c in CASES]}, run_meta)
  print(json.dumps({'written': os.path.relpath(args.json, REPO)}))
  shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  main()
