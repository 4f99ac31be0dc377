"""Peak memory of training, ours and DeepMind FermiNet's, and the largest system each trains.

  bash ../shared/anchors/setup-ferminet.sh /tmp/fn         # FermiNet, once
  python -m scripts.peak_memory --ferminet /tmp/fn         # Ne, C2H4, C4H4, C6H6, batch 256
  python -m scripts.peak_memory --ferminet /tmp/fn --systems Ne C4H4 --network standard
  python -m scripts.render_docs                            # the table in BENCHMARKS.md

Each code trains each system in a process of its own with the comparison's settings
(ferminet_reference.SHARED: batch 256, the small network, 10 MCMC moves; FermiNet at its
best settings), a few pretraining steps and a few training steps: enough for every stage a
run holds in memory at once (pretraining, compilation, the step) to have run. Kept per
process: its peak resident memory as the kernel counts it (the high-water mark of its
resident set, JAX's buffers and compiled code included; Linux), its exit status and its
wall time.
The systems run from the fewest electrons up. A process that fails (on a machine without
swap the kernel's out-of-memory killer ends it with signal 9) ends that code's ladder, so
the last system it trained is the largest that fits the machine's memory; when neither
fails, the limit lies beyond the largest system tried, and the table says so.

Every invocation is appended to benchmarks/peak_memory_cpu2.json (scripts/artifacts.py: the
machine's memory, both codes' versions, the command).
"""

import argparse
import os
import subprocess
import tempfile
import time

from scripts import artifacts
from scripts import benchmark
from scripts import benchmark_tables
from scripts import ferminet_reference as reference

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

JSON = os.path.join(REPO, 'benchmarks', 'peak_memory_cpu2.json')
CODES = ('ours', 'ferminet')
GIB = 2.0**30


def measure(cmd: list, cwd: str, env=None, every: float = 0.05) -> dict:
  """Runs `cmd` to its end; its peak resident memory (GiB), exit status (negative: the
  signal that ended it) and wall time (s), and the end of its output when it failed.
  The peak is the kernel's high-water mark of the process's resident set (VmHWM in
  /proc/PID/status), read every `every` s while it runs, so growth in its last `every` s
  would be missed; not wait4's ru_maxrss, which also counts the pages of this process that
  the child holds between fork and exec."""
  with tempfile.TemporaryFile() as log:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    peak_kib = 0
    while proc.poll() is None:
      peak_kib = max(peak_kib, high_water_kib(proc.pid))
      time.sleep(every)
    out = {'peak_gib': peak_kib * 1024 / GIB, 'exit': proc.returncode,
           'seconds': time.perf_counter() - t0}
    if proc.returncode:
      log.seek(0)
      out['output_tail'] = log.read().decode(errors='replace')[-1500:]
  return out


def high_water_kib(pid: int) -> int:
  """The peak resident set of process `pid` so far, in KiB (0 once it has exited)."""
  try:
    with open(f'/proc/{pid}/status') as f:
      for line in f:
        if line.startswith('VmHWM:'):
          return int(line.split()[1])
  except OSError:
    pass
  return 0


def commands(fn_dir: str, name: str, run_dir: str, keys: dict) -> dict:
  """{code: (command, environment, working directory)} of one short training of `name`
  (benchmark.training's, FermiNet at its best settings)."""
  steps = int(keys['optim.iterations'])
  return {'ours': benchmark.training(fn_dir, name, 'ours', None, keys, steps, False,
                                     run_dir + '_ours'),
          'ferminet': benchmark.training(fn_dir, name, 'baseline', 'best', keys, steps, False,
                                         run_dir + '_ferminet')}


def ladder(fn_dir: str, systems: list, keys: dict) -> list:
  """One row per system, fewest electrons first: each code's measure(), or None for a
  code that failed on a smaller system."""
  rows, failed = [], set()
  for name in sorted(systems, key=benchmark_tables.ELECTRONS.get):
    row = {'system': name, 'electrons': benchmark_tables.ELECTRONS[name]}
    with tempfile.TemporaryDirectory() as tmp:
      for code, (cmd, env, cwd) in commands(fn_dir, name, os.path.join(tmp, 'run'),
                                             keys).items():
        row[code] = None if code in failed else measure(cmd, cwd, env)
        if row[code] and row[code]['exit']:
          failed.add(code)
    rows.append(row)
    print(f'{name}: ' + ', '.join(f'{c} {_cell(row[c])}' for c in CODES), flush=True)
  return rows


def _cell(r) -> str:
  if r is None:
    return 'not tried (failed on a smaller system)'
  if r['exit']:
    return f'failed (exit {r["exit"]}) at {r["peak_gib"]:.2f} GiB'
  return f'{r["peak_gib"]:.2f}'


def largest(rows: list, code: str):
  """The row of the most electrons that `code` trained, or None."""
  trained = [r for r in rows if r[code] and not r[code]['exit']]
  return max(trained, key=lambda r: r['electrons']) if trained else None


def limit_reached(rows: list, code: str) -> bool:
  """Whether `code` failed on a system of the ladder, i.e. its memory limit was found."""
  return any(r[code] and r[code]['exit'] for r in rows)


def limit_text(run) -> str:
  """The largest system each code trained in the run's machine memory, in words."""
  memory = run.meta['machine'].get('memory_gib')
  rows = run.data['rows']
  words = []
  for code, label in (('ours', 'ours'), ('ferminet', 'FermiNet')):
    top, ended = largest(rows, code), limit_reached(rows, code)
    trained = f'{top["system"]} ({top["electrons"]} electrons)' if top else 'nothing'
    words.append(f'{label} {trained}' + ('' if ended else ', its limit not reached'))
  return f'largest trained in {memory:.1f} GiB: ' + '; '.join(words)


def newest_per_network(path: str = JSON) -> list:
  """The newest run of each network, in the order the networks were first measured."""
  out = {}
  for run in artifacts.read(path):
    out[run.data['network']] = run
  return list(out.values())


def _render_run(run, path: str) -> str:
  d = run.data
  lines = ['| system | electrons | ours peak (GiB) | FermiNet peak (GiB) | ours / FermiNet |',
           '|---|---|---|---|---|']
  for r in d['rows']:
    ok = all(r[c] and not r[c]['exit'] for c in CODES)
    ratio = f'{r["ours"]["peak_gib"] / r["ferminet"]["peak_gib"]:.2f}' if ok else '–'
    lines.append(f'| {r["system"]} | {r["electrons"]} | {_cell(r["ours"])} | '
                 f'{_cell(r["ferminet"])} | {ratio} |')
  keys = d['keys']
  return '\n'.join(lines) + (
      f'\n\nBatch {keys["batch_size"]}, the {d["network"]} network, '
      f'{keys["pretrain.iterations"]} pretraining and {keys["optim.iterations"]} training '
      f'steps, FermiNet at its best '
      f'settings; {limit_text(run)}. Peak resident memory of each whole process. '
      f'From `{os.path.relpath(path, REPO)}`, {run.meta["date"][:10]}, '
      f'{run.meta["machine"].get("cpu_count")} cores.')


def render(path: str = JSON) -> str:
  """The newest run of each network: peak memory per system and code."""
  runs = newest_per_network(path)
  if not runs:
    return 'Not measured yet: python -m scripts.peak_memory --ferminet DIR'
  return '\n\n'.join(_render_run(run, path) for run in runs)


TABLES = {'peak-memory': ('BENCHMARKS.md', render)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--ferminet', required=True,
                 help='directory made by ../shared/anchors/setup-ferminet.sh')
  p.add_argument('--systems', nargs='+', default=['Ne', 'C2H4', 'C4H4', 'C6H6'],
                 choices=[s for s in reference.SYSTEMS if s in benchmark_tables.ELECTRONS])
  p.add_argument('--network', default='small', choices=list(reference.NETWORKS))
  p.add_argument('--batch', type=int, default=int(reference.SHARED['batch_size']))
  p.add_argument('--pretrain', type=int, default=5, help='pretraining steps of each code')
  p.add_argument('--steps', type=int, default=5, help='training steps of each code')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  keys = {'batch_size': str(args.batch), **reference.NETWORKS[args.network],
          'pretrain.iterations': str(args.pretrain), 'optim.iterations': str(args.steps)}
  peer = {**reference.peer_versions(args.ferminet),
          'settings': reference.peer_settings_record('best', args.batch)}
  run_meta = artifacts.meta(peer=peer)
  rows = ladder(args.ferminet, args.systems, keys)
  artifacts.append(args.json, {'rows': rows, 'keys': keys, 'network': args.network}, run_meta)
  print(render(args.json))


if __name__ == '__main__':
  main()
