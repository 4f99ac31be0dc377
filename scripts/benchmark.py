"""Benchmarks: stage timers, start-up, memory and throughput per config, Laplacian method
and optimizer; an N-scaling sweep over atoms; the naive baseline of the FermiNeuT profile.

  python -m scripts.benchmark                 # everything, markdown to stdout
  python -m scripts.benchmark --quick         # a small subset (a smoke test)
  python -m scripts.benchmark --suite configs --methods folx jacfwd --json out.json
  python -m scripts.benchmark --suite ecp --optimizers kfac   # ccECP against all electrons
  python -m scripts.benchmark --suite states --optimizers kfac  # K states against one
  python -m scripts.benchmark --against-ferminet /tmp/fn --systems He Ne N2 --json out.json
  python -m scripts.benchmark --against-ferminet /tmp/fn --systems Ne --network standard --batch 4096
  python -m scripts.benchmark --against-ferminet DIR --systems Ne --network standard --batch 4096 \
      --measure loop --steps 20 170 --set matmul_precision=default   # on a GPU
  python -m scripts.benchmark --against-ferminet /tmp/fn --systems He Li Be C N O Ne N2 C2H4 C4H4 \
      --optimizers adam --measure loop --steps 20 70 \
      --json benchmarks/scaling_against_ferminet_cpu2.json \
      --plot-scaling benchmarks/scaling_against_ferminet_cpu2.png   # the size sweep
  python -m scripts.benchmark --against-ours /tmp/old_checkout --systems He Ne  # a regression check
  python -m scripts.benchmark --alone --systems Ne --network standard --batch 4096  # ours only
  python -m scripts.benchmark --timers --systems Ne --network standard --batch 4096 \
      --set matmul_precision=highest   # one training's stage timers, kept in an artifact
  python -m scripts.benchmark --sitting gpu   # the GPU sitting (scripts/sitting.py), 480 s

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
FermiNet runs at its best settings on a CPU machine by default (its folx Laplacian, its BLAS
held to one thread as ours is: ferminet_reference.PEER_SETTINGS); `--peer-settings
best,split,default` measures each (split: its best with the cores split into devices, as
ours runs), alternated within each repeat, and gives the ratio per setting. Each
invocation is appended to an artifact (scripts/artifacts.py; default
benchmarks/against_ferminet.json) with the machine, both codes' versions and the settings.
`--measure loop` times each code instead by the period of its own training loop between
steps SHORT and LONG of one process of LONG steps (FermiNet's per-step log times, our
stats.csv), for devices where process start-up varies by more than the steps take (a GPU);
`--set KEY=VALUE` gives ours further settings (e.g. the matmul precision FermiNet runs at);
`--peer-note` records how the peer was installed when not by the setup script (on a JAX
without `jax.device_put_replicated`, FermiNet runs through scripts/ferminet_launch.py).
`--against-ours DIR` does the same with another checkout of this repository (run from DIR
with this interpreter) in FermiNet's place: whether a change made the step slower; with
this repository as DIR, `--set` and `--baseline-set` time ours with one setting against ours
with another (e.g. `--set network.network_type=lapnet`: LapNet against our FermiNet of the
same width, benchmarks/lapnet_against_ferminet_cpu2.json).
`--alone` times ours the same way with no peer (where the peer cannot run, e.g. an
accelerator whose JAX its dependencies do not support); benchmarks/step_alone.json.
`--timers` trains ours once per system and optimizer with its stage timers on, `--iterations`
steps, and keeps the training's timings.json, with its steady-state step time from stats.csv,
in an artifact (default benchmarks/stage_timers_gpu.json): where a stage's time goes, not a
comparison between codes.

`--sitting gpu` runs the GPU sitting of scripts/sitting.py with its own options (ms per
step, compilation and the FLOP rate of four systems at FermiNet's standard network, batch
4096, both optimizers, float32, TF32 and bfloat16 products, within a time budget), then stops.

The tables of these artifacts, their goals and default paths are in
scripts/benchmark_tables.py.
"""

import argparse
import csv
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from scripts import accuracy
from scripts import artifacts
from scripts import benchmark_tables as tables
from scripts import ferminet_reference as reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def order_of(repeat: int, settings: list) -> list:
  """The runs of one repeat: each baseline setting and ours, the order reversed in every
  other repeat so that a drift of the shared machine hits both codes alike."""
  runs = [('baseline', s) for s in settings] + [('ours', None)]
  return runs if repeat % 2 == 0 else runs[::-1]


def training(baseline, name, who, setting, keys, steps, ours_baseline, run):
  """(command, environment, working directory) of one training of `steps` steps into the
  directory `run`: FermiNet's at `setting`, another checkout of ours, or ours (stage
  timers, progress bar and printing off)."""
  if who == 'baseline' and not ours_baseline:
    return (reference.command(baseline, name, run, {**keys, 'optim.iterations': str(steps)},
                              setting),
            reference.peer_env(setting, batch=int(keys.get('batch_size', 256))), REPO)
  ours_keys = {'log.timers': 'false', 'log.progress': 'false', 'log.print_every': '0'}
  cmd = [sys.executable, '-m', 'ferminet_fast.train', *reference.ours(
      name, run, {**keys, 'optim.iterations': str(steps), **ours_keys})]
  return cmd, None, baseline if who == 'baseline' else REPO


def _process_ms(baseline, name, who, setting, keys, short, long, ours_baseline):
  """ms per step and start-up (s) of one code by the difference of two whole processes."""
  walls = []
  for n in (short, long):
    with tempfile.TemporaryDirectory() as tmp:
      cmd, env, cwd = training(baseline, name, who, setting, keys, n, ours_baseline,
                                os.path.join(tmp, 'run'))
      walls.append(accuracy.timed(cmd, cwd=cwd, env=env))
  step_s = (walls[1] - walls[0]) / (long - short)
  return 1e3 * step_s, walls[0] - short * step_s


# FermiNet's absl log prefix: month, day and time of day of each line.
ABSL_TIME = re.compile(r'^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+)')


def step_times(text: str) -> dict:
  """{step: seconds} at which FermiNet logged each training step (its absl timestamps;
  the day is kept so that a run across midnight still counts forward)."""
  out = {}
  for line in text.splitlines():
    t, s = ABSL_TIME.match(line), reference.STEP_LINE.search(line)
    if t and s:
      mo, d, h, m, sec = (float(x) for x in t.groups())
      out[int(s.group(1))] = (((mo * 31 + d) * 24 + h) * 60 + m) * 60 + sec
  return out


def loop_period_ms(times: dict, short: int, long: int) -> float:
  """ms per step in the training loop between steps `short` and `long` - 1 (zero-based)
  from {step: time in seconds} of each step's end."""
  last = long - 1
  missing = [k for k in (short, last) if k not in times]
  if missing:
    raise RuntimeError(f'steps {missing} were not recorded (got {len(times)} steps)')
  return 1e3 * (times[last] - times[short]) / (last - short)


def _loop_ms(baseline, name, who, setting, keys, short, long, ours_baseline):
  """ms per step and start-up (s) of one code from ONE whole process of `long` steps: the
  period of its training loop between steps `short` and `long` - 1, read from each code's
  own record of its steps (FermiNet's per-step log lines, our stats.csv: both written as a
  step's results reach the host), and start-up = process time - long x (time of a step)."""
  peer = who == 'baseline' and not ours_baseline
  with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, 'run')
    cmd, env, cwd = training(baseline, name, who, setting, keys, long, ours_baseline, run)
    wall, proc = accuracy.run_timed(cmd, cwd=cwd, env=env)
    if peer:
      times = step_times(proc.stderr + proc.stdout)
    else:
      with open(os.path.join(run, 'stats.csv')) as f:
        rows = list(csv.DictReader(f))
      ends = itertools.accumulate(float(r['step_time_ms']) / 1e3 for r in rows)
      times = {int(r['step']): t for r, t in zip(rows, ends)}
  step_ms = loop_period_ms(times, short, long)
  return step_ms, wall - long * step_ms / 1e3


# How a step is timed: 'processes', by the difference of two whole processes (nothing of
# either code's own timing is trusted); 'loop', by the period of one process's training
# loop (for devices where process start-up varies by more than hundreds of steps take).
MEASURES = {'processes': _process_ms, 'loop': _loop_ms}


def side_by_side(baseline: str, name: str, optimizer: str, short: int, long: int,
                 repeats: int, ours_baseline: bool = False, pretrain: int = 0,
                 network: str = 'small', batch: int = 256, settings=('best',),
                 measure: str = 'processes', extra=None, baseline_extra=None) -> list:
  """ms per step of a baseline and ours on system `name`, timed as `measure` (a name in
  MEASURES): one result per baseline setting (FermiNet's `settings`, names in
  reference.PEER_SETTINGS; one with `ours_baseline`, another checkout of ours in the
  directory `baseline`), each with ours measured in the same repeats. `pretrain`:
  pretraining steps of both; `network`: a name in `reference.NETWORKS`; `batch`: walkers;
  `extra`: further keys of ours only; `baseline_extra`: of the other checkout of ours
  only (with `ours_baseline`)."""
  settings = ['ours'] if ours_baseline else list(settings)
  keys = {'optim.optimizer': optimizer, 'pretrain.iterations': str(pretrain),
          'batch_size': str(batch), **reference.NETWORKS[network]}
  timed_by = MEASURES[measure]
  ms = {s: [] for s in settings + [None]}
  startup = {s: [] for s in settings + [None]}
  for repeat in range(repeats):
    for who, setting in order_of(repeat, settings):
      step_ms, start_s = timed_by(baseline, name, who, setting,
                                  {**keys, **(baseline_extra or {})} if who == 'baseline'
                                  else {**keys, **(extra or {})},
                                  short, long, ours_baseline)
      ms[setting].append(step_ms)
      startup[setting].append(start_s)
  out = []
  for s in settings:
    ratios = [o / b for o, b in zip(ms[None], ms[s])]
    out.append({'peer_settings': s, 'baseline': statistics.median(ms[s]),
                'ours': statistics.median(ms[None]),
                'ratio': statistics.median(ms[None]) / statistics.median(ms[s]),
                'ratio_per_repeat': ratios,
                'startup_s': {'baseline': statistics.median(startup[s]),
                              'ours': statistics.median(startup[None])},
                'runs_ms': {'baseline': ms[s], 'ours': ms[None]},
                'runs_startup_s': {'baseline': startup[s], 'ours': startup[None]}})
  return out



def key_value(text: str) -> str:
  """A 'KEY=VALUE' setting of ours, checked to have both parts."""
  key, sep, _ = text.partition('=')
  if not sep or not key:
    raise argparse.ArgumentTypeError(f'{text!r}: give KEY=VALUE (a config key of ours)')
  return text


def peer_settings(text: str) -> list:
  """'best,default' -> ['best', 'default'], each a name in reference.PEER_SETTINGS."""
  names = [n.strip() for n in text.split(',') if n.strip()]
  bad = [n for n in names if n not in reference.PEER_SETTINGS]
  if not names or bad:
    raise argparse.ArgumentTypeError(
        f'{text!r}: give names among {", ".join(reference.PEER_SETTINGS)}')
  return names


def against(args) -> None:
  """--against-ferminet / --against-ours: both codes side by side, appended to an artifact."""
  baseline = args.against_ferminet or os.path.abspath(args.against_ours)
  label = 'FermiNet' if args.against_ferminet else 'baseline checkout'
  peer = ({**reference.peer_versions(baseline), 'settings': [
      reference.peer_settings_record(s, args.batch) for s in args.peer_settings]}
          if args.against_ferminet else {'name': 'ferminet_fast checkout', 'dir': baseline})
  if args.peer_note:
    peer['note'] = args.peer_note
  extra = dict(kv.split('=', 1) for kv in args.set)
  baseline_extra = dict(kv.split('=', 1) for kv in args.baseline_set)
  run_meta, rows = artifacts.meta(peer=peer), []
  for name in args.systems:
    for opt in args.optimizers:
      for r in side_by_side(baseline, name, opt, *args.steps, args.repeats,
                            ours_baseline=bool(args.against_ours), pretrain=args.pretrain,
                            network=args.network, batch=args.batch,
                            settings=args.peer_settings, measure=args.measure, extra=extra,
                            baseline_extra=baseline_extra):
        rows.append({'system': name, 'optimizer': opt, **r})
        print(f'{name} {opt} {label} ({r["peer_settings"]}): {r["baseline"]:.1f} ms, ours '
              f'{r["ours"]:.1f} ms, ratio {r["ratio"]:.2f}', flush=True)
  path = args.json or (tables.AGAINST_JSON if args.against_ferminet
                       else tables.AGAINST_OURS_JSON)
  artifacts.append(path, {'baseline': baseline, 'label': label, 'rows': rows,
                          'steps': args.steps, 'repeats': args.repeats,
                          'pretrain': args.pretrain, 'measure': args.measure, 'set': extra,
                          'baseline_set': baseline_extra,
                          'network': {'name': args.network, **reference.NETWORKS[args.network]},
                          'batch': args.batch}, run_meta)
  print(tables.render_against([path]))


def alone(args) -> None:
  """--alone: our ms per step and start-up by differences of whole processes, as in
  side_by_side, with no peer (where it cannot run), appended to an artifact."""
  extra = dict(kv.split('=', 1) for kv in args.set)
  keys = {'pretrain.iterations': str(args.pretrain), 'batch_size': str(args.batch),
          **reference.NETWORKS[args.network], **extra}
  run_meta, rows = artifacts.meta(), []
  for name in args.systems:
    for opt in args.optimizers:
      runs = [_process_ms(None, name, 'ours', None, {**keys, 'optim.optimizer': opt},
                          *args.steps, False) for _ in range(args.repeats)]
      ms, start = [r[0] for r in runs], [r[1] for r in runs]
      rows.append({'system': name, 'optimizer': opt, 'ours': statistics.median(ms),
                   'startup_s': statistics.median(start), 'runs_ms': ms,
                   'runs_startup_s': start})
      print(f'{name} {opt}: ours {rows[-1]["ours"]:.1f} ms per step (runs '
            f'{", ".join(f"{m:.1f}" for m in ms)}), start-up {rows[-1]["startup_s"]:.1f} s',
            flush=True)
  artifacts.append(args.json or tables.ALONE_JSON,
                   {'rows': rows, 'steps': args.steps, 'repeats': args.repeats,
                    'pretrain': args.pretrain, 'batch': args.batch, 'set': extra,
                    'network': {'name': args.network, **reference.NETWORKS[args.network]}},
                   run_meta)


def timers(args) -> None:
  """--timers: one training per system and optimizer with its stage timers on (run_one); its
  timings.json and steady-state step time appended to an artifact, one run per training."""
  extra = dict(kv.split('=', 1) for kv in args.set)
  keys = {**reference.SHARED, 'pretrain.iterations': str(args.pretrain),
          'batch_size': str(args.batch), **reference.NETWORKS[args.network], **extra,
          'log.progress': 'false'}
  for name in args.systems:
    for opt in args.optimizers:
      run_meta = artifacts.meta()
      t = run_one(reference.SYSTEMS[name][0], [f'--config.{k}={v}' for k, v in {
          **reference.OUR_KEYS.get(name, {}), **keys, 'optim.optimizer': opt}.items()],
                  args.iterations)
      if 'error' in t:
        sys.exit(f'{name} {opt}: {t["error"]}')
      steady = t.pop('steady_ms')
      for k in ('it_per_s', 'step_per_forward'):
        t.pop(k)
      artifacts.append(args.json or tables.TIMERS_JSON,
                       {'system': name, 'network': args.network, 'set': extra,
                        'iterations': args.iterations, 'steady_ms': steady, 'timings': t},
                       run_meta)
      print(f'{name} {opt} {extra}: step {t["train_step_ms"]:.1f} ms (MCMC {t["mcmc_ms"]:.1f}, '
            f'energy and gradient {t["energy_grad_ms"]:.1f}, optimizer '
            f'{t["optimizer_ms"]:.1f}); in the loop {steady:.1f} ms', flush=True)


def main(argv=None):
  """The command line: the GPU sitting with its own options (scripts/sitting.py), or the
  measurements of this module."""
  argv = sys.argv[1:] if argv is None else list(argv)
  if any(a == '--sitting' or a.startswith('--sitting=') for a in argv):
    from scripts import sitting
    return sitting.main(argv)
  return measure(argv)


def measure(argv):
  from ferminet_fast.physics import laplacians

  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--suite', nargs='*', default=['configs', 'sweep', 'naive'],
                      choices=['configs', 'sweep', 'naive', 'ecp', 'states'])
  parser.add_argument('--methods', nargs='*', default=[m.name for m in laplacians.available()])
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
  parser.add_argument('--alone', action='store_true',
                      help='time ours alone as --against-ferminet times both, then stop')
  parser.add_argument('--timers', action='store_true',
                      help='keep the stage timers of one training per system and optimizer '
                      '(--iterations steps) in an artifact, then stop')
  parser.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE', type=key_value,
                      help='with --alone, --timers or --against-ferminet: further settings of '
                      'ours (config keys)')
  parser.add_argument('--baseline-set', nargs='*', default=[], metavar='KEY=VALUE',
                      type=key_value, help='with --against-ours: further settings of the '
                      'baseline checkout (ours with one setting against ours with another)')
  parser.add_argument('--measure', default='processes', choices=list(MEASURES),
                      help='with --against-ferminet / --against-ours: processes = T(long) - '
                      'T(short) of two whole processes; loop = the training loop\'s period '
                      'between steps SHORT and LONG of one process (each code\'s own per-step '
                      'record), where start-up varies too much for differences')
  parser.add_argument('--peer-note', default='',
                      help='with --against-ferminet: how the peer was installed, if not by '
                      'setup-ferminet.sh (kept in the artifact)')
  parser.add_argument('--systems', nargs='*', default=['He', 'Ne'], choices=list(reference.SYSTEMS),
                      help='with --against-ferminet / --against-ours / --alone / --timers')
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
  parser.add_argument('--peer-settings', default='best', type=peer_settings,
                      help="with --against-ferminet: FermiNet's settings, comma-separated "
                      f"names of {', '.join(reference.PEER_SETTINGS)} (default best)")
  parser.add_argument('--plot-scaling', metavar='PNG',
                      help='draw the size sweep (ms per step against electrons, log-log, '
                      'fitted exponents) of the --json artifact (default '
                      'benchmarks/scaling_against_ferminet_cpu2.json) into PNG; with '
                      '--against-ferminet, after measuring')
  parser.add_argument('--sitting', choices=['gpu'],
                      help='run the GPU sitting (scripts/sitting.py, whose options follow it: '
                      'python -m scripts.sitting --help), then stop')
  args = parser.parse_args(argv)
  if args.baseline_set and not args.against_ours:
    parser.error('--baseline-set goes with --against-ours')
  if args.against_ferminet or args.against_ours:
    against(args)
    if args.plot_scaling:
      tables.plot_scaling(args.json or tables.AGAINST_JSON, args.plot_scaling)
    return None
  if args.plot_scaling:
    return tables.plot_scaling(args.json or tables.SCALING_JSON, args.plot_scaling)
  if args.alone:
    return alone(args)
  if args.timers:
    return timers(args)
  if args.set:
    parser.error('--set goes with --alone or --timers')
  if args.quick:
    args.configs, args.iterations, args.sweep_iterations = ['He'], 40, 20
    global SWEEP_ATOMS
    SWEEP_ATOMS = ('H', 'He', 'Li')

  run_meta = artifacts.meta()  # The tree as it was when the runs started.
  results = {'configs': [], 'sweep': [], 'ecp': [], 'states': [], 'naive': None}
  if 'configs' in args.suite:
    for label, config, overrides in CONFIGS:
      if label not in args.configs:
        continue
      for opt in args.optimizers:
        for method in (args.kfac_methods if opt == 'kfac' else args.methods):
          r = run_one(config, overrides + [f'--config.optim.laplacian={method}',
                                           f'--config.optim.optimizer={opt}'], args.iterations)
          method = r.get('laplacian', method)  # What 'best' became for this system.
          results['configs'].append(((label, opt, method), r))
          print(f'{label} {opt} {method}: ' + (
              '  '.join(f'{k}={r[k]:.2f}' for k in tables.FIELDS)
              if 'error' not in r else r['error']), file=sys.stderr, flush=True)
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
      subprocess.run([sys.executable, '-m', 'scripts.naive_baseline', '--json', path],
                     check=True, cwd=REPO, capture_output=True)
      with open(path) as f:
        results['naive'] = json.load(f)

  if results['configs']:
    print('### Configs (batch 256, hidden ((64,8),(64,8)), 2 determinants, 10 MCMC steps; '
          'h2_quick as shipped)\n')
    print(tables.table(results['configs'], ('config', 'optimizer', 'laplacian')) + '\n')
  if results['sweep']:
    print('### N-scaling (batch 256, hidden ((32,8),(32,8)), 2 determinants, 10 MCMC steps)\n')
    print(tables.table(results['sweep'], ('atom', 'laplacian')) + '\n')
  if results['ecp']:
    print('### ECP against all electrons (batch 256, hidden ((64,8),(64,8)), 2 determinants, '
          '10 MCMC steps)\n')
    print(tables.table(results['ecp'], ('atom', 'electrons', 'optimizer')) + '\n')
  if results['states']:
    print('### Several states against one (batch 256, hidden ((64,8),(64,8)), 2 determinants '
          'per state, 10 MCMC steps)\n')
    print(tables.table(results['states'], ('atom', 'states', 'optimizer')) + '\n')
  if results['naive']:
    n = results['naive']
    print('### Naive baseline (FermiNeuT profile), configs/h2_quick.py\n')
    print(f'Naive step timed on {n["walkers_timed"]} of {n["batch_size"]} walkers and scaled: '
          + ', '.join(f'{k} {v:.0f}' for k, v in n['naive_extrapolated'].items())
          + f'; ferminet_fast train_step_ms {n["ours_train_step_ms"]:.2f}; '
          f'speed-up {n["speedup"]:.0f}x\n')
  if args.json:  # Appended: every invocation is kept (scripts/artifacts.py).
    artifacts.append(args.json, {'configs': [{'keys': k, **r} for k, r in results['configs']],
                 'sweep': [{'keys': k, **r} for k, r in results['sweep']],
                 'ecp': [{'keys': k, **r} for k, r in results['ecp']],
                 'states': [{'keys': k, **r} for k, r in results['states']],
                 'naive': results['naive']}, run_meta)


if __name__ == '__main__':
  main()
