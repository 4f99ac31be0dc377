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
with this interpreter) in FermiNet's place: whether a change made the step slower.
`--alone` times ours the same way with no peer (where the peer cannot run, e.g. an
accelerator whose JAX its dependencies do not support); benchmarks/step_alone.json.
`--timers` trains ours once per system and optimizer with its stage timers on, `--iterations`
steps, and keeps the training's timings.json, with its steady-state step time from stats.csv,
in an artifact (default benchmarks/stage_timers_gpu.json): where a stage's time goes, not a
comparison between codes.
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

import numpy as np

from scripts import accuracy
from scripts import artifacts
from scripts import ferminet_reference as reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AGAINST_JSON = os.path.join(REPO, 'benchmarks', 'against_ferminet.json')
AGAINST_OURS_JSON = os.path.join(REPO, 'benchmarks', 'against_ours.json')
AGAINST_GPU_JSON = os.path.join(REPO, 'benchmarks', 'against_ferminet_gpu.json')
ALONE_JSON = os.path.join(REPO, 'benchmarks', 'step_alone.json')
TIMERS_JSON = os.path.join(REPO, 'benchmarks', 'stage_timers_gpu.json')
# Per-step goals against FermiNet at its best settings (ours / FermiNet), by network: the
# small network for every system, FermiNet's standard network at Ne.
STEP_GOALS = {'small': {'He': 0.6, 'Li': 0.6, 'Be': 0.6, 'Ne': 0.35, 'N2': 0.35, 'C2H4': 0.35,
                        'HEG': 0.4},
              'standard': {'Ne': 0.35}}
ELECTRONS = {'He': 2, 'Li': 3, 'Be': 4, 'B': 5, 'C': 6, 'N': 7, 'O': 8, 'F': 9, 'Ne': 10,
             'H2': 2, 'LiH': 4, 'N2': 14, 'C2H4': 16, 'HEG': 14, 'C4H4': 28}


def step_goal(system: str, network: str):
  """The per-step goal of `system` with `network` (a name in reference.NETWORKS), or None."""
  return STEP_GOALS.get(network, {}).get(system)


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
                 measure: str = 'processes', extra=None) -> list:
  """ms per step of a baseline and ours on system `name`, timed as `measure` (a name in
  MEASURES): one result per baseline setting (FermiNet's `settings`, names in
  reference.PEER_SETTINGS; one with `ours_baseline`, another checkout of ours in the
  directory `baseline`), each with ours measured in the same repeats. `pretrain`:
  pretraining steps of both; `network`: a name in `reference.NETWORKS`; `batch`: walkers;
  `extra`: further keys of ours only."""
  settings = ['ours'] if ours_baseline else list(settings)
  keys = {'optim.optimizer': optimizer, 'pretrain.iterations': str(pretrain),
          'batch_size': str(batch), **reference.NETWORKS[network]}
  timed_by = MEASURES[measure]
  ms = {s: [] for s in settings + [None]}
  startup = {s: [] for s in settings + [None]}
  for repeat in range(repeats):
    for who, setting in order_of(repeat, settings):
      step_ms, start_s = timed_by(baseline, name, who, setting,
                                  keys if who == 'baseline' else {**keys, **(extra or {})},
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


def _against_rows(path: str) -> list:
  """Every row of every run of an against-FermiNet (or against-ours) artifact, with the
  run's network, the FermiNet settings it ran (legacy runs: its defaults) and the run."""
  out = []
  for run in artifacts.read(path):
    d = run.data
    net = d.get('network', {}).get('name', 'small') if isinstance(d.get('network'), dict) \
        else 'small'
    for r in d['rows']:
      out.append((run, {**r, 'network': net, 'batch': d.get('batch', 256),
                        'pretrain': d.get('pretrain', 0), 'label': d.get('label', 'FermiNet'),
                        'measure': d.get('measure', 'processes'), 'set': d.get('set') or {},
                        'peer_settings': r.get('peer_settings', 'default' if d.get(
                            'label', 'FermiNet') == 'FermiNet' else 'this repository')}))
  return out


def render_against(paths: list, systems=None, newest_only: bool = False) -> str:
  """A per-step table against FermiNet (or another checkout) from artifacts: medians of
  the repeats, the ratio, and its spread over the repeats (min–max of ours / baseline);
  only the rows of `systems` (names) when given. With `newest_only`, a comparison measured
  again (same system, optimizer, network, batch and baseline settings) shows its newest
  run only (paths are oldest first; the earlier runs stay in the artifact)."""
  lines = ['| system (electrons) | optimizer | network, batch | baseline settings | baseline '
           '(ms/step) | ours (ms/step) | ours / baseline | per repeat | goal | start-up '
           'baseline (s) | start-up ours (s) | start-up ratio |', '|' + '---|' * 12]
  newest = {}
  for path in paths:
    for run, r in _against_rows(path):
      if systems is None or r['system'] in systems:
        key = (r['system'], r['optimizer'], r['network'], r['batch'], r['label'],
               r['peer_settings'], tuple(r['set'].items()), r['measure'], r['pretrain'],
               _device(run)) if newest_only else len(newest)
        newest.pop(key, None)  # Re-inserted last: the table keeps the order of measurement.
        newest[key] = (path, run, r)
  for _, _, r in newest.values():
    per = r.get('ratio_per_repeat') or [o / b for o, b in zip(r['runs_ms']['ours'],
                                                               r['runs_ms']['baseline'])]
    goal = step_goal(r['system'], r['network']) if r['label'] == 'FermiNet' else None
    st = r['startup_s']
    how = ''.join([f'; ours {k}={v}' for k, v in r['set'].items()]
                  + (['; loop period'] if r['measure'] == 'loop' else [])
                  + ([f'; {r["pretrain"]} pretraining steps'] if r['pretrain'] else []))
    lines.append(
        f'| {r["system"]} ({ELECTRONS.get(r["system"], "?")}) | {r["optimizer"]} | '
        f'{r["network"]}, {r["batch"]} | {r["label"]}, {r["peer_settings"]}{how} | '
        f'{r["baseline"]:.1f} | {r["ours"]:.1f} | **{r["ratio"]:.2f}** | '
        f'{min(per):.2f}–{max(per):.2f} (n = {len(per)}) | '
        + (f'≤ {goal}' if goal else '–') + f' | {st["baseline"]:.1f} | {st["ours"]:.1f} | '
        f'{st["ours"] / st["baseline"]:.2f} |')
  notes = []
  for path in paths:
    used = [run for p, run, _ in newest.values() if p == path]
    if used:
      notes.append(artifacts.provenance(path, used))
  return '\n'.join(lines + ['', ' '.join(notes)])


def _device(run) -> str:
  """The device a run timed: its GPUs, or its CPU and cores."""
  m = run.meta.get('machine') or {}
  return ', '.join(m.get('gpus') or []) or f'{m.get("cpu", "?")}, {m.get("cpu_count")} cores'


# The size sweep against FermiNet: atoms, molecules and one of 20-30 electrons, each code's
# ms per step against the number of electrons N, and the exponent p of ms ~ N^p fitted to
# every size and to the larger ones (where per-step overheads of a few ms no longer count).
SCALING_JSON = os.path.join(REPO, 'benchmarks', 'scaling_against_ferminet_cpu2.json')
SCALING_LARGER = 10  # Electrons from which the second fit starts.


def scaling_fit(electrons, ms) -> tuple:
  """(p, its standard error) of the least-squares line log(ms) = a + p log(N); the error is
  None with fewer than four sizes."""
  x, y = np.log(np.asarray(electrons, float)), np.log(np.asarray(ms, float))
  if len(x) < 4:
    return float(np.polyfit(x, y, 1)[0]), None
  coef, cov = np.polyfit(x, y, 1, cov=True)
  return float(coef[0]), float(np.sqrt(cov[0, 0]))


def scaling_fits(rows: list) -> list:
  """[(label, electrons, [(p, error) of FermiNet, of ours])] of the size sweep's rows (sorted
  by electrons): fitted to every size and to those of SCALING_LARGER electrons and more,
  each where it has at least three sizes."""
  out = []
  for label, keep in ((f'all {len(rows)} sizes', lambda n: True),
                      (f'N ≥ {SCALING_LARGER}', lambda n: n >= SCALING_LARGER)):
    chosen = [r for r in rows if keep(ELECTRONS[r['system']])]
    if len(chosen) >= 3:
      n = [ELECTRONS[r['system']] for r in chosen]
      out.append((label, n, [scaling_fit(n, [r[who] for r in chosen])
                             for who in ('baseline', 'ours')]))
  return out


def _scaling_rows(path: str) -> dict:
  """{(optimizer, FermiNet settings): {system: row}}: each system's newest row."""
  out = {}
  for run, r in _against_rows(path):
    out.setdefault((r['optimizer'], r['peer_settings']), {})[r['system']] = (run, r)
  return out


def render_scaling(path: str) -> str:
  """The size sweep's table (ms per step of both codes by system, sorted by electrons) and
  each code's fitted exponents, per optimizer and FermiNet setting."""
  if not artifacts.read(path):
    return artifacts.provenance(path)
  lines, used = [], []
  for (opt, setting), by_system in _scaling_rows(path).items():
    rows = sorted(by_system.values(), key=lambda t: ELECTRONS[t[1]['system']])
    used += [run for run, _ in rows]
    lines += [f'{opt}, FermiNet {setting} ({reference.describe(setting)}):', '',
              '| system (electrons) | FermiNet (ms/step) | ours (ms/step) | ours / FermiNet | '
              'per repeat |', '|---|---|---|---|---|']
    for _, r in rows:
      per = r['ratio_per_repeat']
      lines.append(f'| {r["system"]} ({ELECTRONS[r["system"]]}) | {r["baseline"]:.1f} | '
                   f'{r["ours"]:.1f} | {r["ratio"]:.2f} | {min(per):.2f}–{max(per):.2f} '
                   f'(n = {len(per)}) |')
    lines += ['', '| fitted to | FermiNet p | ours p | ours grows |', '|---|---|---|---|']
    for label, n, fits in scaling_fits([r for _, r in rows]):
      cells = [f'{p:.2f}' + (f' ± {e:.2f}' if e is not None else '') for p, e in fits]
      verdict = 'no faster' if fits[1][0] <= fits[0][0] else '**faster**'
      lines.append(f'| {label} ({", ".join(map(str, n))} electrons) | {cells[0]} | '
                   f'{cells[1]} | {verdict} |')
    lines.append('')
  return '\n'.join(lines + [artifacts.provenance(path, used)])


def plot_scaling(path: str, png: str) -> None:
  """Both codes' ms per step against N on log-log axes, with the fitted lines, into `png`."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)
  fig, ax = plt.subplots(figsize=(6, 4.5))
  for (opt, setting), by_system in _scaling_rows(path).items():
    rows = sorted((r for _, r in by_system.values()), key=lambda r: ELECTRONS[r['system']])
    n = np.array([ELECTRONS[r['system']] for r in rows])
    for who, label, marker in (('baseline', f'FermiNet ({setting})', 's'),
                               ('ours', 'ferminet_fast', 'o')):
      ms = np.array([r[who] for r in rows])
      a = np.polyfit(np.log(n), np.log(ms), 1)  # The slope is scaling_fit's p.
      line = ax.loglog(n, ms, marker, label=f'{label}, {opt}: p = {a[0]:.2f}')[0]
      ax.loglog(n, np.exp(np.polyval(a, np.log(n))), '-', color=line.get_color(), alpha=0.5)
    for r, x in zip(rows, n):
      ax.annotate(r['system'], (x, r['baseline']), fontsize=7, xytext=(3, 3),
                  textcoords='offset points')
  ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
  ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
  ax.set_xticks([2, 3, 4, 6, 8, 10, 14, 20, 28])
  ax.set_xlabel('electrons N')
  ax.set_ylabel('ms per training step')
  ax.set_title('Step time against size (batch 256, small network, 2-core CPU)', fontsize=9)
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(png, dpi=120, metadata={'Software': None})
  plt.close(fig)


def render_alone(path: str) -> str:
  """Ours alone (--alone) from its artifact: ms per step and start-up, each run's device."""
  lines = ['| system (electrons) | optimizer | network, batch | settings | device | steps | '
           'ours (ms/step) | each repeat | start-up (s) |', '|' + '---|' * 9]
  runs, notes = artifacts.read(path), []
  for run in runs:
    d, device = run.data, _device(run)
    settings = _settings_text(run, notes)
    for r in d['rows']:
      lines.append(f'| {r["system"]} ({ELECTRONS.get(r["system"], "?")}) | {r["optimizer"]} | '
                   f'{d["network"]["name"]}, {d["batch"]} | {settings} | {device} | '
                   f'{d["steps"][0]} and {d["steps"][1]} | {r["ours"]:.1f} | '
                   + ', '.join(f'{x:.1f}' for x in r['runs_ms'])
                   + f' | {r["startup_s"]:.1f} |')
  return '\n\n'.join(['\n'.join(lines)] + notes + [artifacts.provenance(path, runs)])


def _settings_text(run, notes: list) -> str:
  """The settings a run passed (`set`), or those its meta says it ran with although its
  script did not record them (`amended`, marked † with the reason added to `notes`)."""
  given = run.data.get('set') or {}
  if given:
    return ', '.join(f'{k}={v}' for k, v in given.items())
  amended = run.meta.get('amended')
  if not amended:
    return '–'
  note = f'† {amended["why"]}'
  if note not in notes:
    notes.append(note)
  return ', '.join(f'{k}={v}' for k, v in amended['set'].items()) + ' †'


def render_timers(path: str) -> str:
  """Stage timers of trainings (timings.json kept in an artifact, one run each): each
  stage's ms, the step time in the training loop, compilation, start-up and memory."""
  runs, notes = artifacts.read(path), []
  if not runs:
    return f'*No runs in `{os.path.relpath(path, REPO)}` yet.*'
  lines = ['| system, network, batch | optimizer | settings | device | step | MCMC | '
           'energy and gradient | optimizer update | forward pass | in the loop | compile (s) | '
           'start-up (s) | step memory (MiB) |', '|' + '---|' * 13]
  for run in runs:
    t, d = run.data['timings'], run.data
    loop = f'{d["steady_ms"]:.1f}' if 'steady_ms' in d else '–'
    lines.append(
        f'| {d["system"]}, {d["network"]}, {t["batch_size"]} | {t["optimizer"]} | '
        + _settings_text(run, notes) + f' | {t["machine"].get("device", "?")} | '
        f'{t["train_step_ms"]:.1f} | {t["mcmc_ms"]:.1f} | {t["energy_grad_ms"]:.1f} | '
        f'{t["optimizer_ms"]:.1f} | {t["forward_ms"]:.2f} | {loop} | {t["compile_s"]:.1f} | '
        f'{t["startup_s"]:.1f} | {t["step_memory_mb"]:.0f} |')
  return '\n\n'.join(['\n'.join(lines), 'ms per stage: medians of 5 timed calls on the real '
                      'state; in the loop: the median step time of the training loop after its '
                      'first 20% of steps (stats.csv).'] + notes
                     + [artifacts.provenance(path, runs)])


def _suite(path: str, kind: str) -> list:
  """[(keys, result)] of one suite ('configs', 'sweep', 'ecp', 'states') from the newest
  run of the artifact that has it, and that run."""
  runs = [r for r in artifacts.read(path) if r.data.get(kind)]
  return [(tuple(x['keys']), x) for x in runs[-1].data[kind]], runs[-1]


def render_suite(path: str, kind: str, key_names: tuple) -> str:
  """The stage timers, start-up, memory and steady step of a suite, one row per run."""
  rows, run = _suite(path, kind)
  return table(rows, key_names) + '\n\n' + artifacts.provenance(path, [run])


def render_ecp(path: str) -> str:
  """ccECP against all electrons: the same atom and network, KFAC."""
  rows, run = _suite(path, 'ecp')
  from ferminet_fast.physics import systems
  lines = ['| atom | electrons | train step (ms) | steady (ms) | ECP / all-electron step |',
           '|---|---|---|---|---|']
  full = {}
  for (atom, electrons, _), r in rows:
    if electrons == 'all electrons':
      full[atom] = r['train_step_ms']
      label, ratio = f'all {systems.ELEMENTS.index(atom) + 1}', ''
    else:
      label, ratio = f'valence ({electrons})', f'{r["train_step_ms"] / full[atom]:.2f}'
    lines.append(f'| {atom} | {label} | {r["train_step_ms"]:.1f} | {r["steady_ms"]:.1f} | '
                 f'{ratio} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, [run])])


def render_states(path: str) -> str:
  """K states against one: the step of K states over K steps of one state."""
  rows, run = _suite(path, 'states')
  lines = ['| atom | K | train step (ms) | steady (ms) | step / (K x one state\'s) |',
           '|---|---|---|---|---|']
  one = {}
  for (atom, k, _), r in rows:
    one.setdefault(atom, r['train_step_ms'] if k == '1' else None)
    ratio = r['train_step_ms'] / (int(k) * one[atom])
    lines.append(f'| {atom} | {k} | {r["train_step_ms"]:.1f} | {r["steady_ms"]:.1f} | '
                 f'{ratio:.2f} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, [run])])


def render_naive(path: str) -> str:
  """The naive step of the FermiNeuT profile (scripts/naive_baseline.py), scaled to the
  batch, against our compiled step on the same state."""
  runs = [r for r in artifacts.read(path) if r.data.get('naive')]
  n = runs[-1].data['naive']
  x = n['naive_extrapolated']
  lines = [f'Timed on {n["walkers_timed"]} of {n["batch_size"]} walkers and scaled linearly.',
           '', '| stage | naive (ms per step, scaled) |', '|---|---|']
  for key, label in (('mcmc_ms', f'MCMC ({n["mcmc_steps"]} moves)'),
                     ('energy_ms', 'local energies'), ('gradient_ms', 'parameter gradient'),
                     ('train_step_ms', 'whole step')):
    lines.append(f'| {label} | {x[key]:,.0f} |'.replace(',', ' '))
  speedup = f'{n["speedup"]:,.0f}'.replace(',', ' ')
  lines += ['', f'ferminet_fast\'s compiled step on the same state: '
            f'{n["ours_train_step_ms"]:.2f} ms, a speed-up of {speedup}×.', '',
            artifacts.provenance(path, runs[-1:])]
  return '\n'.join(lines)


def _steady(path: str) -> dict:
  """{(config, optimizer): result} of the folx rows of a suite artifact's configs."""
  rows, _ = _suite(path, 'configs')
  return {(k[0], k[1]): r for k, r in rows if k[2] == 'folx'}


def render_before_after(before: str, after: str) -> str:
  """Steady ms per iteration of the configs in `after` beside the same rows of `before`."""
  old, new = _steady(before), _steady(after)
  lines = ['| config | optimizer | steady ms/iter now | before |', '|---|---|---|---|']
  for (cfg, opt), r in new.items():
    lines.append(f'| {cfg} | {opt} | {r["steady_ms"]:.2f} | '
                 + (f'{old[(cfg, opt)]["steady_ms"]:.2f}' if (cfg, opt) in old else '–') + ' |')
  return '\n'.join(lines + ['', artifacts.provenance(after) + ' Before: '
                              + artifacts.provenance(before)])


def render_jax_range(path: str, with_kfac_jax: bool) -> str:
  """Steady step on both ends of the JAX range (runs 'new08_<config>', 'new12_<config>'
  of one artifact) and, where asked, the earlier kfac-jax step ('old_<config>')."""
  runs = artifacts.read(path)
  data = runs[-1].data
  steady = lambda key: {tuple(c['keys'][:2]): c for c in data.get(key, {}).get(  # noqa: E731
      'configs', [])}
  head = ['config', 'optimizer'] + (['steady ms/iter: before (kfac-jax), jax 0.8.3'] if
                                    with_kfac_jax else []) + [
      'ours, jax 0.8.3', 'ours, jax 0.12.0.1', '0.12 / 0.8.3', 'train_step_ms 0.8.3 / 0.12',
      'startup_s 0.8.3 / 0.12']
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for cfg in ('He', 'H2', 'Li', 'Be', 'LiH'):
    v08, v12, old = steady(f'new08_{cfg}'), steady(f'new12_{cfg}'), steady(f'old_{cfg}')
    for opt in ('adam', 'kfac'):
      a, b = v08.get((cfg, opt)), v12.get((cfg, opt))
      if not a or not b:
        continue
      cells = [cfg, opt]
      if with_kfac_jax:
        o = old.get((cfg, opt))
        cells.append(f'{o["steady_ms"]:.2f}' if o and opt == 'kfac' else '–')
      cells += [f'{a["steady_ms"]:.2f}', f'{b["steady_ms"]:.2f}',
                f'{b["steady_ms"] / a["steady_ms"]:.2f}',
                f'{a["train_step_ms"]:.2f} / {b["train_step_ms"]:.2f}',
                f'{a["startup_s"]:.1f} / {b["startup_s"]:.1f}']
      lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines + ['', artifacts.provenance(path, runs[-1:])])


def render_optimizers(path: str, before: str) -> str:
  """Per-step cost of each optimizer (one suite artifact), KFAC's steady step of an
  earlier artifact beside it."""
  rows, run = _suite(path, 'configs')
  old = _steady(before)
  lines = ['| config | optimizer | train_step_ms | optimizer_ms | steady ms/iter | KFAC before '
           '(steady ms/iter) |', '|---|---|---|---|---|---|']
  for (cfg, opt, _), r in rows:
    prior = old.get((cfg, 'kfac')) if opt == 'kfac' else None
    lines.append(f'| {cfg} | {opt} | {r["train_step_ms"]:.2f} | {r["optimizer_ms"]:.2f} | '
                 f'{r["steady_ms"]:.2f} | ' + (f'{prior["steady_ms"]:.2f}' if prior else '')
                 + ' |')
  return '\n'.join(lines + ['', artifacts.provenance(path, [run]) + ' Before: '
                              + artifacts.provenance(before)])


def _bench(*names) -> list:
  return [os.path.join(REPO, 'benchmarks', n) for n in names]


WHOLE_TABLE = _bench('against_ferminet_he_li_be_ne_cpu2_2026-11-24.json',
                     'against_ferminet_n2_c2h4_cpu2_2026-11-24.json',
                     'against_ferminet_ne_standard_network_cpu2_2026-11-24.json')
AFTER_BLAS = _bench('against_ferminet_ne_kfac_cpu2_blas_threads.json',
                    'against_ferminet_n2_c2h4_cpu2_blas_threads.json')
TABLES = {  # Rendered into the docs by scripts/render_docs.py.
    'per-step-latest': ('BENCHMARKS.md', lambda: render_against(
        [AGAINST_JSON] if os.path.exists(AGAINST_JSON) else AFTER_BLAS, newest_only=True)),
    'per-step-whole-table': ('BENCHMARKS.md', lambda: render_against(WHOLE_TABLE)),
    'per-step-alone': ('BENCHMARKS.md', lambda: render_alone(ALONE_JSON)),
    'laplacian-sparsity-processes': ('BENCHMARKS.md', lambda: render_alone(
        _bench('laplacian_sparsity_cpu2.json')[0])),
    'laplacian-sparsity-timers': ('BENCHMARKS.md', lambda: render_timers(
        _bench('laplacian_sparsity_timers_cpu2.json')[0])),
    'per-step-gpu': ('BENCHMARKS.md', lambda: render_against([AGAINST_GPU_JSON])),
    'stage-timers-gpu': ('BENCHMARKS.md', lambda: render_timers(
        _bench('stage_timers_gpu.json')[0])),
    'per-step-electron-gas': ('docs/guides/periodic.md', lambda: render_against(
        [AGAINST_JSON], systems=('HEG',), newest_only=True)),
    'blas-threads-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('blas_threads_against_previous_cpu2.json'))),
    'cpu-devices-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('cpu_devices_against_previous_cpu2.json'))),
    'scaling-against-ferminet': ('BENCHMARKS.md', lambda: render_scaling(SCALING_JSON)),
    'speed-configs': ('BENCHMARKS.md', lambda: render_suite(
        _bench('benchmark_cpu2.json')[0], 'configs', ('config', 'optimizer', 'laplacian'))),
    'speed-nscaling': ('BENCHMARKS.md', lambda: render_suite(
        _bench('benchmark_cpu2.json')[0], 'sweep', ('atom', 'laplacian'))),
    'sharded-step': ('BENCHMARKS.md', lambda: render_before_after(
        *_bench('benchmark_cpu2.json', 'benchmark_cpu2_sharded_step.json'))),
    'jax-range': ('BENCHMARKS.md', lambda: render_jax_range(
        _bench('benchmark_cpu2_jax_range.json')[0], True)),
    'jax-range-ynn-off': ('BENCHMARKS.md', lambda: render_jax_range(
        _bench('benchmark_cpu2_jax_range_ynn_off.json')[0], False)),
    'optimizers-step': ('BENCHMARKS.md', lambda: render_optimizers(
        *_bench('benchmark_cpu2_kfac_spring.json', 'benchmark_cpu2.json'))),
    'naive-baseline': ('BENCHMARKS.md', lambda: render_naive(_bench('benchmark_cpu2.json')[0])),
    'step-ecp': ('BENCHMARKS.md', lambda: render_ecp(_bench('ecp_and_states.json')[0])),
    'step-states': ('BENCHMARKS.md', lambda: render_states(_bench('ecp_and_states.json')[0])),
    'history-he-li-be': ('BENCHMARKS.md', lambda: render_against(
        _bench('against_ferminet_he_li_cpu2.json', 'against_ferminet_be_cpu2.json'))),
    'history-ne-taps': ('BENCHMARKS.md', lambda: render_against(
        _bench('against_ferminet_ne_cpu2_2026-11-24.json'))),
    'history-pretrain-run1': ('BENCHMARKS.md', lambda: render_against(
        _bench('against_ferminet_ne_n2_pretrain_cpu2.json'))),
    'history-pretrain-run2': ('BENCHMARKS.md', lambda: render_against(
        _bench('against_ferminet_ne_n2_pretrain_cpu2_run2.json'))),
    'history-kfac-fused': ('BENCHMARKS.md', lambda: render_against(
        _bench('against_ferminet_ne_kfac_cpu2_fused.json'))),
}


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
  run_meta, rows = artifacts.meta(peer=peer), []
  for name in args.systems:
    for opt in args.optimizers:
      for r in side_by_side(baseline, name, opt, *args.steps, args.repeats,
                            ours_baseline=bool(args.against_ours), pretrain=args.pretrain,
                            network=args.network, batch=args.batch,
                            settings=args.peer_settings, measure=args.measure, extra=extra):
        rows.append({'system': name, 'optimizer': opt, **r})
        print(f'{name} {opt} {label} ({r["peer_settings"]}): {r["baseline"]:.1f} ms, ours '
              f'{r["ours"]:.1f} ms, ratio {r["ratio"]:.2f}', flush=True)
  path = args.json or (AGAINST_JSON if args.against_ferminet else AGAINST_OURS_JSON)
  artifacts.append(path, {'baseline': baseline, 'label': label, 'rows': rows,
                          'steps': args.steps, 'repeats': args.repeats,
                          'pretrain': args.pretrain, 'measure': args.measure, 'set': extra,
                          'network': {'name': args.network, **reference.NETWORKS[args.network]},
                          'batch': args.batch}, run_meta)
  print(render_against([path]))


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
  artifacts.append(args.json or ALONE_JSON,
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
      artifacts.append(args.json or TIMERS_JSON,
                       {'system': name, 'network': args.network, 'set': extra,
                        'iterations': args.iterations, 'steady_ms': steady, 'timings': t},
                       run_meta)
      print(f'{name} {opt} {extra}: step {t["train_step_ms"]:.1f} ms (MCMC {t["mcmc_ms"]:.1f}, '
            f'energy and gradient {t["energy_grad_ms"]:.1f}, optimizer '
            f'{t["optimizer_ms"]:.1f}); in the loop {steady:.1f} ms', flush=True)


def main():
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
  args = parser.parse_args()
  if args.against_ferminet or args.against_ours:
    against(args)
    if args.plot_scaling:
      plot_scaling(args.json or AGAINST_JSON, args.plot_scaling)
    return None
  if args.plot_scaling:
    return plot_scaling(args.json or SCALING_JSON, args.plot_scaling)
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
      subprocess.run([sys.executable, '-m', 'scripts.naive_baseline', '--json', path],
                     check=True, cwd=REPO, capture_output=True)
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
  if args.json:  # Appended: every invocation is kept (scripts/artifacts.py).
    artifacts.append(args.json, {'configs': [{'keys': k, **r} for k, r in results['configs']],
                 'sweep': [{'keys': k, **r} for k, r in results['sweep']],
                 'ecp': [{'keys': k, **r} for k, r in results['ecp']],
                 'states': [{'keys': k, **r} for k, r in results['states']],
                 'naive': results['naive']}, run_meta)


if __name__ == '__main__':
  main()
