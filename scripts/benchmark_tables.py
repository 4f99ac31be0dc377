"""The tables of scripts/benchmark.py's artifacts under benchmarks/, rendered into the docs
(TABLES, by scripts/render_docs.py), and the goals and artifact paths they are read against.
It measures nothing; the runners in scripts/benchmark.py import it, never the reverse."""

import os

import numpy as np

from scripts import artifacts
from scripts import ferminet_reference as reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Where each command of scripts/benchmark.py appends its runs unless given --json.
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
             'H2': 2, 'LiH': 4, 'N2': 14, 'C2H4': 16, 'HEG': 14, 'C4H4': 28,
             'C6H6': 42}


# Our networks against each other: ours with network.network_type set (--against-ours on
# this repository with --set) against our FermiNet of the same width, per-step goal by
# network and system.
NETWORKS_JSON = os.path.join(REPO, 'benchmarks', 'lapnet_against_ferminet_cpu2.json')
NETWORK_GOALS = {'lapnet': {'Ne': 0.6, 'C2H4': 0.6}}


def network_goal(r: dict):
  """The goal of a row of ours with another network against our FermiNet, or None."""
  if r.get('baseline_set', {}).get('network.network_type', 'ferminet') != 'ferminet':
    return None
  return NETWORK_GOALS.get(r['set'].get('network.network_type'), {}).get(r['system'])


def step_goal(system: str, network: str):
  """The per-step goal of `system` with `network` (a name in reference.NETWORKS), or None."""
  return STEP_GOALS.get(network, {}).get(system)


# The columns of a suite's table: stage timers, start-up, memory and steady state.
FIELDS = ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms',
          'compile_s', 'startup_s', 'step_memory_mb', 'peak_rss_mb', 'steady_ms', 'it_per_s',
          'step_per_forward')


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
                        'baseline_set': d.get('baseline_set') or {},
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
               r['peer_settings'], tuple(r['set'].items()),
               tuple(r['baseline_set'].items()), r['measure'], r['pretrain'],
               _device(run)) if newest_only else len(newest)
        newest.pop(key, None)  # Re-inserted last: the table keeps the order of measurement.
        newest[key] = (path, run, r)
  for _, _, r in newest.values():
    per = r.get('ratio_per_repeat') or [o / b for o, b in zip(r['runs_ms']['ours'],
                                                               r['runs_ms']['baseline'])]
    goal = (step_goal(r['system'], r['network']) if r['label'] == 'FermiNet'
            else network_goal(r))
    st = r['startup_s']
    how = ''.join([f'; ours {k}={v}' for k, v in r['set'].items()]
                  + [f'; baseline {k}={v}' for k, v in r['baseline_set'].items()]
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
  ax.set_xticks([2, 3, 4, 6, 8, 10, 14, 20, 28, 42])
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


# The GPU sitting (scripts/sitting.py): one file per device kind and date.
SITTING_GLOB = os.path.join(REPO, 'benchmarks', 'gpu_sitting_*.json')


def sitting_runs(pattern: str = None, like: dict = None) -> list:
  """[(path, run)], oldest first, of the GPU sittings in the files matching `pattern`
  (default: under benchmarks/) with the device kind, sizes and --tiny flag of `like` (a
  sitting's data; default: the newest sitting that is not --tiny, a check of the path on a
  CPU). Sittings alike add up: a later one can measure what an earlier one lacked."""
  import glob
  runs = sorted(((run.meta.get('date') or '', path, run)
                 for path in sorted(glob.glob(pattern or SITTING_GLOB))
                 for run in artifacts.read(path)), key=lambda t: t[0])
  if like is None:
    real = [r.data for _, _, r in runs if not r.data.get('tiny')]
    if not real:
      return []
    like = real[-1]

  def alike(d):
    return (d['device']['kind'] == like['device']['kind'] and d['sizes'] == like['sizes']
            and bool(d.get('tiny')) == bool(like.get('tiny')))
  return [(path, run) for _, path, run in runs if alike(run.data)]


def sitting_variants(runs: list) -> dict:
  """{(system, optimizer, precision): (run, row)} over `runs` (oldest first): each variant's
  newest measured row, else its newest row (skipped, failed or cut)."""
  out = {}
  for _, run in runs:
    for row in run.data['rows']:
      key = (row['system'], row['optimizer'], row['precision'])
      if row['status'] == 'measured' or key not in out or out[key][1]['status'] != 'measured':
        out[key] = (run, row)
  return out


def _figure(x: float) -> str:
  """'1234', '12.3', '0.0123': three significant digits below 100, whole numbers above."""
  return f'{x:.0f}' if abs(x) >= 100 else f'{x:.3g}'


def _sitting_row(run, r: dict) -> str:
  """One measured row of a sitting, its mean energy beside float32's (same system and
  optimizer, same sitting: the same parameters, walkers and keys) as a difference in mHa."""
  base = next((x['energy'] for x in run.data['rows'] if x['status'] == 'measured'
               and (x['system'], x['optimizer'], x['precision']) ==
               (r['system'], r['optimizer'], 'float32')), None)
  change = ('–' if r['precision'] == 'float32' or base is None
            else artifacts.minus(f'{1e3 * (r["energy"] - base):+.1f}'))
  percent = r.get('percent_of_float32_peak')
  return (f'| {r["system"]} ({ELECTRONS.get(r["system"], "?")}) | {r["optimizer"]} | '
          f'{r["precision"]} | {r["ms_per_step"]:.1f} | {r["compile_s"]:.1f} | '
          f'{_figure(r["flops_per_step"] / 1e9)} | {_figure(r["tflops"])} | '
          + ('–' if percent is None else f'{percent:.1f}') + ' | '
          f'{artifacts.num(r["energy"], 4)} | {change} | {(run.meta.get("date") or "")[:10]} |')


def _sitting_note(runs: list, variants: dict) -> str:
  """The sizes, device and peak of the sittings (the newest's), each one's budget, and the
  variants none of them measured, each with its newest reason."""
  d = runs[-1][1].data
  s, dev, peak = d['sizes'], d['device'], d.get('peaks_tflops')
  left = [row for _, row in variants.values() if row['status'] != 'measured']

  def named(status, reason=True):
    return [f'{r["system"]} {r["optimizer"]} {r["precision"]}'
            + (f' ({r["reason"]})' if reason else '') for r in left if r['status'] == status]
  skipped, failed, cut = named('skipped', False), named('failed'), named('cut')
  budgets = ', '.join(f'{(run.meta.get("date") or "")[:10]}: {run.data["elapsed_s"]:.0f} s '
                      f'of a {run.data["budget_s"]:.0f} s budget' for _, run in runs)
  return ' '.join(
      [f'{dev["kind"]}, one device of {dev["count"]}; batch {s["batch"]}, hidden '
       f'{s["network"]["network.ferminet.hidden_dims"]}, determinants '
       f'{s["network"]["network.determinants"]}, MCMC moves per step {s["mcmc_steps"]}; '
       f'warm-up steps {s["warmup"]}, then timed steps {s["steps"]}, back to back. '
       'GFLOP/step: XLA\'s count of the compiled step; '
       + (f'float32 peak {peak["float32"]:g} TFLOP/s (NVIDIA\'s datasheet). ' if peak else
          'no peak listed for this device. ')
       + f'{d["not_measured"][0].upper()}{d["not_measured"][1:]}. '
       + (f'{len(runs)} sittings' if len(runs) > 1 else 'One sitting')
       + f' ({budgets}); each row from the newest that measured it.']
      + ([f'Not measured, skipped (over the budget): {", ".join(skipped)}.'] if skipped else [])
      + ([f'Failed: {"; ".join(failed)}.'] if failed else [])
      + ([f'Cut: {"; ".join(cut)}.'] if cut else [])
      + (['A check of the path at tiny sizes (--tiny), not a measurement.'] if d['tiny'] else []))


def render_sitting(path: str = None) -> str:
  """The GPU sitting's table: the sittings alike (`sitting_runs`) to the latest run of the
  artifact at `path`, or to the newest sitting under benchmarks/ (a line saying there is
  none yet), each variant from the newest sitting that measured it."""
  latest = artifacts.latest(path) if path else None
  runs = sitting_runs(path, latest.data if latest else None)
  if not runs:
    return ('*No GPU sitting has been measured yet: `python -m scripts.benchmark --sitting '
            'gpu` on a GPU machine (docs/development.md) measures one.*')
  variants = sitting_variants(runs)
  lines = ['| system (electrons) | optimizer | matrix products | ms/step | compile (s) | '
           'GFLOP/step | TFLOP/s | % of float32 peak | mean energy (Ha) | vs float32 (mHa) | '
           'sitting |', '|' + '---|' * 11]
  keys = list(variants)  # Priority order: optimizers and precisions as first measured.
  rank = {field: [k[field] for k in keys] for field in (1, 2)}
  lines += [_sitting_row(*variants[k]) for k in sorted(keys, key=lambda k: (
      ELECTRONS.get(k[0], 0), rank[1].index(k[1]), rank[2].index(k[2])))
            if variants[k][1]['status'] == 'measured']
  by_path = {}
  for p, run in runs:
    by_path.setdefault(p, []).append(run)
  return '\n'.join(lines + ['', _sitting_note(runs, variants), ''] +
                   [artifacts.provenance(p, rs) for p, rs in by_path.items()])


def _bench(*names) -> list:
  return [os.path.join(REPO, 'benchmarks', n) for n in names]


WHOLE_TABLE = _bench('against_ferminet_he_li_be_ne_cpu2_2026-11-24.json',
                     'against_ferminet_n2_c2h4_cpu2_2026-11-24.json',
                     'against_ferminet_ne_standard_network_cpu2_2026-11-24.json')
AFTER_BLAS = _bench('against_ferminet_ne_kfac_cpu2_blas_threads.json',
                    'against_ferminet_n2_c2h4_cpu2_blas_threads.json')
# N2 once `best` took the sparse forward Laplacian there (BENCHMARKS.md, "The sparse forward
# Laplacian's start-up"); apart from AGAINST_JSON, whose sittings time every speed goal.
N2_SPARSE = _bench('against_ferminet_n2_sparse_cpu2.json')
SPARSE_STARTUP = _bench('laplacian_sparsity_startup_cpu2.json')
TABLES = {  # Rendered into the docs by scripts/render_docs.py.
    'gpu-sitting': ('BENCHMARKS.md', render_sitting),
    'per-step-latest': ('BENCHMARKS.md', lambda: render_against(
        [AGAINST_JSON] if os.path.exists(AGAINST_JSON) else AFTER_BLAS, newest_only=True)),
    'per-step-whole-table': ('BENCHMARKS.md', lambda: render_against(WHOLE_TABLE)),
    'per-step-alone': ('BENCHMARKS.md', lambda: render_alone(ALONE_JSON)),
    'laplacian-sparsity-processes': ('BENCHMARKS.md', lambda: render_alone(
        _bench('laplacian_sparsity_cpu2.json')[0])),
    'laplacian-sparsity-timers': ('BENCHMARKS.md', lambda: render_timers(
        _bench('laplacian_sparsity_timers_cpu2.json')[0])),
    'lapnet-step': ('BENCHMARKS.md', lambda: render_against([NETWORKS_JSON])),
    'laplacian-sparsity-startup': ('BENCHMARKS.md', lambda: render_against(SPARSE_STARTUP)),
    'per-step-n2-sparse': ('BENCHMARKS.md', lambda: render_against(N2_SPARSE)),
    'surface-step': ('BENCHMARKS.md', lambda: render_against(_bench('surface_step_cpu2.json'))),
    'per-step-gpu': ('BENCHMARKS.md', lambda: render_against([AGAINST_GPU_JSON])),
    'stage-timers-gpu': ('BENCHMARKS.md', lambda: render_timers(
        _bench('stage_timers_gpu.json')[0])),
    'per-step-electron-gas': ('docs/guides/periodic.md', lambda: render_against(
        [AGAINST_JSON], systems=('HEG',), newest_only=True)),
    'blas-threads-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('blas_threads_against_previous_cpu2.json'))),
    'cpu-devices-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('cpu_devices_against_previous_cpu2.json'))),
    'diagnostics-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('diagnostics_against_previous_cpu2.json',
               'diagnostics_against_previous_loop_cpu2.json'))),
    'fisher-lengths-before-after': ('BENCHMARKS.md', lambda: render_against(
        _bench('fisher_lengths_against_previous_loop_cpu2.json',
               'fisher_bound_against_off_loop_cpu2.json'))),
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
  """A suite's results, [(keys, result)], as a markdown table of FIELDS."""
  head = list(key_names) + list(FIELDS)
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for keys, r in rows:
    if 'error' in r:
      cells = list(keys) + [f'failed: {r["error"]}'] + [''] * (len(FIELDS) - 1)
    else:
      cells = list(keys) + [f'{r[k]:.2f}' if k in r else '' for k in FIELDS]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)

