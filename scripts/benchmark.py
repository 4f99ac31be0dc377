"""Stage timers and whole-run wall time for a set of configs, each in a fresh process.

  python scripts/benchmark.py                      # the default set, markdown table to stdout
  python scripts/benchmark.py --json out.json --iterations 300 --repeats 3

Each run is `python -m ferminet_fast.train --config C ...` in its own process, so start-up
(imports, tracing, compilation) is measured cold, as a user sees it. The table reports the
median over repeats of each field of timings.json, and the steady-state seconds per
iteration from stats.csv (median step time after the first 20% of steps).
"""

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, config file, overrides). The FermiNet comparison settings: batch 256,
# hidden ((64, 8), (64, 8)), 2 determinants, 10 MCMC steps per iteration.
REFERENCE = ['--config.batch_size=256', '--config.network.ferminet.hidden_dims=((64,8),(64,8))',
             '--config.network.determinants=2', '--config.mcmc.steps=10']
DEFAULT_SET = [
    ('h2_quick', 'configs/h2_quick.py', []),
    ('He', 'configs/he.py', REFERENCE),
    ('H2', 'configs/h2.py', REFERENCE),
    ('Li', 'configs/li.py', REFERENCE),
    ('Be', 'configs/be.py', REFERENCE),
]
FIELDS = ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms',
          'compile_s', 'startup_s')


def run_one(config, overrides, iterations, extra):
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, 'run')
    cmd = [sys.executable, '-m', 'ferminet_fast.train', '--config', config, *overrides,
           f'--config.optim.iterations={iterations}', f'--config.log.save_path={out}',
           '--config.log.print_every=0', *extra]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
      raise RuntimeError(f'{" ".join(cmd)} failed:\n{proc.stderr[-2000:]}')
    with open(os.path.join(out, 'timings.json')) as f:
      timings = json.load(f)
    with open(os.path.join(out, 'stats.csv')) as f:
      steps = [float(r['step_time_ms']) for r in csv.DictReader(f)]
  timings['steady_ms_per_iter'] = statistics.median(steps[len(steps) // 5:])
  return timings


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--iterations', type=int, default=300)
  parser.add_argument('--repeats', type=int, default=1)
  parser.add_argument('--only', nargs='*', help='labels to run (default: all)')
  parser.add_argument('--json', help='write all results to this file')
  parser.add_argument('extra', nargs='*', help='more --config.KEY=VALUE for every run')
  args = parser.parse_args()

  results = {}
  for label, config, overrides in DEFAULT_SET:
    if args.only and label not in args.only:
      continue
    runs = [run_one(config, overrides, args.iterations, args.extra) for _ in range(args.repeats)]
    results[label] = {
        'config': config, 'overrides': overrides + args.extra, 'runs': runs,
        'median': {k: statistics.median(r[k] for r in runs)
                   for k in FIELDS + ('steady_ms_per_iter', 'iterations_per_s')}}
    print(f'{label}: ' + '  '.join(f'{k}={v:.3f}' for k, v in results[label]['median'].items()),
          file=sys.stderr, flush=True)

  head = ('config',) + FIELDS + ('steady_ms_per_iter', 'train_step / forward')
  print('| ' + ' | '.join(head) + ' |')
  print('|' + '---|' * len(head))
  for label, r in results.items():
    m = r['median']
    cells = [label] + [f'{m[k]:.2f}' for k in FIELDS] + [
        f'{m["steady_ms_per_iter"]:.2f}', f'{m["train_step_ms"] / m["forward_ms"]:.1f}']
    print('| ' + ' | '.join(cells) + ' |')
  if args.json:
    any_run = next(iter(results.values()))['runs'][0]
    with open(args.json, 'w') as f:
      json.dump({'machine': any_run['machine'], 'versions': any_run['versions'],
                 'python': platform.python_version(), 'iterations': args.iterations,
                 'repeats': args.repeats, 'results': results}, f, indent=2)


if __name__ == '__main__':
  main()
