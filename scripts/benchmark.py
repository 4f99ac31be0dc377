"""Benchmarks: stage timers, start-up, memory and throughput per config, Laplacian method
and optimizer; an N-scaling sweep over atoms; the naive baseline of the FermiNeuT profile.

  python scripts/benchmark.py                 # everything, markdown to stdout
  python scripts/benchmark.py --quick         # a small subset (a smoke test)
  python scripts/benchmark.py --suite configs --methods folx jacfwd --json out.json
  python scripts/benchmark.py --suite ecp --optimizers kfac   # ccECP against all electrons
  python scripts/benchmark.py --suite states --optimizers kfac  # K states against one
  python scripts/benchmark.py --against-ferminet /tmp/fn --systems He Ne N2 --json out.json
  python scripts/benchmark.py --against-ferminet /tmp/fn --systems Ne --network standard --batch 4096
  python scripts/benchmark.py --against-ours /tmp/old_checkout --systems He Ne  # a regression check

Every run is `python -m ferminet_fast.train --config C ...` in a fresh process, so start-up
(imports, tracing, compilation) is measured cold, as a user sees it. Reported per run:
the stage timers of timings.json (medians of 5 `block_until_ready` calls on the real
state), `compile_s`, `startup_s` (process start to first step), the planned memory of one
step and the process's peak RSS, and the steady state: the median step time of the loop
after its first 20% of steps (`steady_ms`) and its inverse (`it_per_s`).

`--against-ferminet DIR` runs DeepMind FermiNet (from ../shared/anchors/setup-ferminet.sh
DIR) and ours with the same settings, alternately, in this one invocation: per system and
optimizer, the time of one step is (T(long) - T(short)) / (long - short) of whole processes
trained `long` and `short` steps (start-up, compilation and burn-in cancel), the median over
`--repeats`; no pretraining (`--pretrain N`: N steps of each code's Hartree-Fock
pretraining, so that the start-up includes it), our stage timers off; the small network at
256 walkers unless `--network standard` (FermiNet's default size) and `--batch` say
otherwise. Printed: both, and ours / FermiNet's; also each code's start-up, T(short) -
short x (time of one step): process start to the first step, plus the exit.
`--against-ours DIR` does the same with another checkout of this repository (run from DIR
with this interpreter) in FermiNet's place: whether a change made the step slower.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ferminet_reference as reference  # noqa: E402

# The FermiNet comparison settings: batch 256, hidden ((64,8),(64,8)), 2 dets, 10 MCMC steps.
REFERENCE = [f'--config.{k}={v}' for k, v in reference.SHARED.items()]
CONFIGS = [
    ('h2_quick', 'configs/h2_quick.py', []),
    ('He', 'configs/he.py', REFERENCE),
    ('H2', 'configs/h2.py', REFERENCE),
    ('Li', 'configs/li.py', REFERENCE),
    ('Be', 'configs/be.py', REFERENCE),
    ('LiH', 'configs/lih.py', REFERENCE),
]
# N-scaling: atoms at a fixed small network.
SWEEP_ATOMS = ('H', 'He', 'Li', 'Be', 'B', 'C', 'N', 'O', 'F', 'Ne')
SWEEP = ['--config.batch_size=256', '--config.network.ferminet.hidden_dims=((32,8),(32,8))',
         '--config.network.determinants=2', '--config.mcmc.steps=10']
# ECP cost: these atoms with ccECP and with all electrons, at the FermiNet comparison settings.
ECP_ATOMS = ('Si', 'S', 'Ar')
# Several states: these atoms with K = 1 (the ground state alone) and more states.
STATES_ATOMS, STATES_K = ('He', 'Li', 'Be'), (1, 2, 4)
FIELDS = ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms',
          'compile_s', 'startup_s', 'step_memory_mb', 'peak_rss_mb', 'steady_ms', 'it_per_s',
          'step_per_forward')


def run_one(config, overrides, iterations):
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, 'run')
    cmd = [sys.executable, '-m', 'ferminet_fast.train', '--config', config, *overrides,
           f'--config.optim.iterations={iterations}', f'--config.log.save_path={out}',
           '--config.log.print_every=0', '--config.log.timers=true']
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
      return {'error': proc.stderr.strip().splitlines()[-1] if proc.stderr else 'failed'}
    with open(os.path.join(out, 'timings.json')) as f:
      t = json.load(f)
    with open(os.path.join(out, 'stats.csv')) as f:
      steps = [float(r['step_time_ms']) for r in csv.DictReader(f)]
  # Steady state: after the first 20% of steps.
  t['steady_ms'] = statistics.median(steps[len(steps) // 5:])
  t['it_per_s'] = 1e3 / t['steady_ms']
  t['step_per_forward'] = t['train_step_ms'] / t['forward_ms']
  return t


def _wall(cmd: list, cwd: str = REPO) -> float:
  """Seconds a process takes from start to exit (run in `cwd`); raises if it fails."""
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)  # `-m` imports from cwd.
  if proc.returncode:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    raise RuntimeError(f'{" ".join(cmd[:4])} ... failed: ' + ' | '.join(tail))
  return time.perf_counter() - t0


def side_by_side(baseline: str, name: str, optimizer: str, short: int, long: int,
                 repeats: int, ours_baseline: bool = False, pretrain: int = 0,
                 network: str = 'small', batch: int = 256) -> dict:
  """ms per step of a baseline and ours on system `name`, by differences of whole processes.
  The baseline is FermiNet set up in the directory `baseline`, or with `ours_baseline`
  another checkout of this repository there. `pretrain`: pretraining steps of both;
  `network`: a name in `reference.NETWORKS`; `batch`: walkers."""
  keys = {'optim.optimizer': optimizer, 'pretrain.iterations': str(pretrain),
          'batch_size': str(batch), **reference.NETWORKS[network]}
  ours_keys = {'log.timers': 'false', 'log.progress': 'false', 'log.print_every': '0'}
  ms, startup = {'baseline': [], 'ours': []}, {'baseline': [], 'ours': []}
  for _ in range(repeats):
    for who in ('baseline', 'ours'):  # Alternated, so that drifts of the machine hit both.
      walls = []
      for n in (short, long):
        with tempfile.TemporaryDirectory() as tmp:
          run = os.path.join(tmp, 'run')
          if who == 'baseline' and not ours_baseline:
            cmd = reference.command(baseline, name, run, {**keys, 'optim.iterations': str(n)})
          else:
            cmd = [sys.executable, '-m', 'ferminet_fast.train', *reference.ours(
                name, run, {**keys, 'optim.iterations': str(n), **ours_keys})]
          walls.append(_wall(cmd, cwd=baseline if who == 'baseline' and ours_baseline
                             else REPO))
      step_s = (walls[1] - walls[0]) / (long - short)
      ms[who].append(1e3 * step_s)
      startup[who].append(walls[0] - short * step_s)
  out = {who: statistics.median(v) for who, v in ms.items()}
  out['ratio'] = out['ours'] / out['baseline']
  out['startup_s'] = {who: statistics.median(v) for who, v in startup.items()}
  out['runs_ms'], out['runs_startup_s'] = ms, startup
  return out


def table(rows, key_names):
  head = list(key_names) + list(FIELDS)
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for keys, r in rows:
    if 'error' in r:
      cells = list(keys) + [f'failed: {r["error"]}'] + [''] * (len(FIELDS) - 1)
    else:
      cells = list(keys) + [f'{r[k]:.2f}' if k in r else '' for k in FIELDS]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def main():
  from ferminet_fast import config as settings
  from ferminet_fast.physics import hamiltonian  # Table of Laplacian methods.

  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--suite', nargs='*', default=['configs', 'sweep', 'naive'],
                      choices=['configs', 'sweep', 'naive', 'ecp', 'states'])
  parser.add_argument('--methods', nargs='*', default=hamiltonian.available_laplacians())
  parser.add_argument('--optimizers', nargs='*', default=['adam', 'kfac'])
  parser.add_argument('--kfac-methods', nargs='*', default=['best'],
                      help='Laplacian methods run with KFAC (its cost does not depend on them)')
  parser.add_argument('--configs', nargs='*', default=[c[0] for c in CONFIGS])
  parser.add_argument('--iterations', type=int, default=1000)
  parser.add_argument('--sweep-iterations', type=int, default=60)
  parser.add_argument('--quick', action='store_true', help='He, H-Li sweep, few steps')
  parser.add_argument('--json', help='write all results to this file')
  parser.add_argument('--against-ferminet', metavar='DIR',
                      help='time FermiNet (set up in DIR) and ours side by side, then stop')
  parser.add_argument('--against-ours', metavar='DIR',
                      help='time another checkout of ours (in DIR) and this one side by side')
  parser.add_argument('--systems', nargs='*', default=['He', 'Ne'], choices=list(reference.SYSTEMS),
                      help='with --against-ferminet / --against-ours')
  parser.add_argument('--steps', nargs=2, type=int, default=[60, 300], metavar=('SHORT', 'LONG'),
                      help='with --against-ferminet / --against-ours: the two run lengths')
  parser.add_argument('--repeats', type=int, default=3,
                      help='with --against-ferminet / --against-ours')
  parser.add_argument('--pretrain', type=int, default=0, metavar='N',
                      help='with --against-ferminet / --against-ours: N Hartree-Fock '
                      'pretraining steps in both codes (start-up includes them)')
  parser.add_argument('--network', default='small', choices=list(reference.NETWORKS),
                      help='with --against-ferminet / --against-ours: small = hidden '
                      '((64,8),(64,8)), 2 determinants; standard = FermiNet\'s default, '
                      '(256,32) x 4, 16 determinants')
  parser.add_argument('--batch', type=int, default=256, metavar='WALKERS',
                      help='with --against-ferminet / --against-ours: walkers per step')
  args = parser.parse_args()
  if args.against_ferminet or args.against_ours:
    baseline = args.against_ferminet or os.path.abspath(args.against_ours)
    label = 'FermiNet' if args.against_ferminet else 'baseline checkout'
    rows = []
    print(f'| system | optimizer | {label} (ms/step) | ours (ms/step) | ours / {label} | '
          f'start-up {label} (s) | start-up ours (s) | ratio |\n' + '|---' * 8 + '|', flush=True)
    for name in args.systems:
      for opt in args.optimizers:
        r = side_by_side(baseline, name, opt, *args.steps, args.repeats,
                         ours_baseline=bool(args.against_ours), pretrain=args.pretrain,
                         network=args.network, batch=args.batch)
        rows.append({'system': name, 'optimizer': opt, **r})
        st = r['startup_s']
        print(f'| {name} | {opt} | {r["baseline"]:.1f} | {r["ours"]:.1f} | {r["ratio"]:.2f} | '
              f'{st["baseline"]:.1f} | {st["ours"]:.1f} | {st["ours"] / st["baseline"]:.2f} |',
              flush=True)
    if args.json:
      with open(args.json, 'w') as f:
        json.dump({'baseline': baseline, 'label': label, 'rows': rows, 'steps': args.steps,
                   'repeats': args.repeats, 'pretrain': args.pretrain,
                   'network': {'name': args.network, **reference.NETWORKS[args.network]},
                   'batch': args.batch}, f, indent=2)
    return
  if args.quick:
    args.configs, args.iterations, args.sweep_iterations = ['He'], 40, 20
    global SWEEP_ATOMS
    SWEEP_ATOMS = ('H', 'He', 'Li')

  results = {'configs': [], 'sweep': [], 'ecp': [], 'states': [], 'naive': None}
  if 'configs' in args.suite:
    for label, config, overrides in CONFIGS:
      if label not in args.configs:
        continue
      for opt in args.optimizers:
        for method in (args.kfac_methods if opt == 'kfac' else args.methods):
          method = settings.resolve_laplacian(method)
          r = run_one(config, overrides + [f'--config.optim.laplacian={method}',
                                           f'--config.optim.optimizer={opt}'], args.iterations)
          results['configs'].append(((label, opt, method), r))
          print(f'{label} {opt} {method}: ' + ('  '.join(f'{k}={r[k]:.2f}' for k in FIELDS)
                                               if 'error' not in r else r['error']),
                file=sys.stderr, flush=True)
  if 'sweep' in args.suite:
    for atom in SWEEP_ATOMS:
      for method in args.methods:
        r = run_one('configs/he.py', SWEEP + [f'--config.system.atom={atom}',
                                              f'--config.optim.laplacian={method}'],
                    args.sweep_iterations)
        results['sweep'].append(((atom, method), r))
        print(f'sweep {atom} {method}: ' + (f'{r["train_step_ms"]:.2f} ms' if 'error' not in r
                                             else r['error']), file=sys.stderr, flush=True)
  if 'ecp' in args.suite:
    for atom in ECP_ATOMS:
      for opt in args.optimizers:
        for ecp in ('', 'ccecp'):
          r = run_one('configs/he.py', REFERENCE + [
              f'--config.system.atom={atom}', f'--config.system.ecp={ecp}',
              f'--config.optim.optimizer={opt}'], args.sweep_iterations)
          results['ecp'].append(((atom, ecp or 'all electrons', opt), r))
          print(f'ecp {atom} {ecp or "all electrons"} {opt}: ' + (
              f'{r["train_step_ms"]:.2f} ms' if 'error' not in r else r['error']),
              file=sys.stderr, flush=True)
  if 'states' in args.suite:
    for atom in STATES_ATOMS:
      for opt in args.optimizers:
        for k in STATES_K:
          r = run_one('configs/he.py', REFERENCE + [
              f'--config.system.atom={atom}', f'--config.system.states={k}',
              f'--config.optim.optimizer={opt}'], args.sweep_iterations)
          results['states'].append(((atom, str(k), opt), r))
          print(f'states {atom} K={k} {opt}: ' + (
              f'{r["train_step_ms"]:.2f} ms' if 'error' not in r else r['error']),
              file=sys.stderr, flush=True)
  if 'naive' in args.suite:
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, 'naive.json')
      subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'naive_baseline.py'),
                      '--json', path], check=True, cwd=REPO, capture_output=True)
      with open(path) as f:
        results['naive'] = json.load(f)

  if results['configs']:
    print('### Configs (batch 256, hidden ((64,8),(64,8)), 2 determinants, 10 MCMC steps; '
          'h2_quick as shipped)\n')
    print(table(results['configs'], ('config', 'optimizer', 'laplacian')) + '\n')
  if results['sweep']:
    print('### N-scaling (batch 256, hidden ((32,8),(32,8)), 2 determinants, 10 MCMC steps)\n')
    print(table(results['sweep'], ('atom', 'laplacian')) + '\n')
  if results['ecp']:
    print('### ECP against all electrons (batch 256, hidden ((64,8),(64,8)), 2 determinants, '
          '10 MCMC steps)\n')
    print(table(results['ecp'], ('atom', 'electrons', 'optimizer')) + '\n')
  if results['states']:
    print('### Several states against one (batch 256, hidden ((64,8),(64,8)), 2 determinants '
          'per state, 10 MCMC steps)\n')
    print(table(results['states'], ('atom', 'states', 'optimizer')) + '\n')
  if results['naive']:
    n = results['naive']
    print('### Naive baseline (FermiNeuT profile), configs/h2_quick.py\n')
    print(f'Naive step timed on {n["walkers_timed"]} of {n["batch_size"]} walkers and scaled: '
          + ', '.join(f'{k} {v:.0f}' for k, v in n['naive_extrapolated'].items())
          + f'; ferminet_fast train_step_ms {n["ours_train_step_ms"]:.2f}; '
          f'speed-up {n["speedup"]:.0f}x\n')
  if args.json:
    with open(args.json, 'w') as f:
      json.dump({'configs': [{'keys': k, **r} for k, r in results['configs']],
                 'sweep': [{'keys': k, **r} for k, r in results['sweep']],
                 'ecp': [{'keys': k, **r} for k, r in results['ecp']],
                 'states': [{'keys': k, **r} for k, r in results['states']],
                 'naive': results['naive']}, f, indent=2)


if __name__ == '__main__':
  main()
