"""The current standing: every goal with its latest figure from an artifact, and whether it
is met, missed, or not yet measured like for like. Rendered at the top of BENCHMARKS.md and
ACCURACY.md by scripts/render_docs.py; it measures nothing itself, it reads the artifacts
of benchmark.py, race.py, accuracy.py and accuracy_states.py through their own readers
(benchmark.py's in benchmark_tables.py).

A figure counts as like for like when FermiNet ran at its best settings
(ferminet_reference.PEER_SETTINGS) and, for the races, on at least three races judged on
evaluated energies; otherwise the figure is shown with what is missing.
"""

import os

from scripts import accuracy
from scripts import accuracy_states
from scripts import artifacts
from scripts import benchmark_tables
from scripts import ferminet_reference as reference
from scripts import peak_memory
from scripts import pes_goals
from scripts import pes_race
from scripts import race
from scripts import step_cost

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIN_RACES = 3
PRETRAIN_STARTUP = os.path.join(REPO, 'benchmarks',
                                'against_ferminet_ne_n2_pretrain_cpu2_run2.json')
# Ours / FermiNet, process start to the first step (molecules: with 1000 pretraining steps).
STARTUP_GOAL = 0.7
# A step's cost in forward passes of the network at Ne and ethene (small network, batch 256):
# by XLA's count of its arithmetic (scripts/step_cost.py) and by the stage timers' times.
STEP_COST_GOAL, STEP_COST_SYSTEMS = 50, ('Ne', 'C2H4')
# Systems whose start-up has no pretraining in either code: the electron gas.
NO_PRETRAINING = ('HEG',)
STAGE_TIMERS_CPU = os.path.join(REPO, 'benchmarks', 'stage_timers_cpu2.json')


def _rel(path: str) -> str:
  return os.path.relpath(path, REPO)


def _date(run) -> str:
  return (run.meta.get('measured_on') or run.meta.get('date') or '?')[:10]


def _newest(paths: list, keep, key, cost) -> dict:
  """{key(row): (run, row, path)}: the newest against-FermiNet row that `keep` accepts per
  key over the artifacts `paths`, newer files later. A row with FermiNet at its best
  settings wins over one at its defaults, except where several of FermiNet's settings ran in
  one sitting with 'best' among them: then the row of the setting that gave FermiNet the
  smallest `cost(row)` (its fastest there) is kept, marked `fastest`."""
  out, settings = {}, {}
  for path in paths:
    if not os.path.exists(path):
      continue
    for run, r in benchmark_tables._against_rows(path):
      if r['label'] != 'FermiNet' or not keep(r):
        continue
      k, held = key(r), out.get(key(r))
      if held and held[0] is run:  # Several FermiNet settings in one sitting: its fastest.
        settings[k].add(r['peer_settings'])
        several = 'best' in settings[k]
        if cost(r) < cost(held[1]):
          held = (run, r, path)
        out[k] = (held[0], {**held[1], 'fastest': several}, held[2])
      elif not held or r['peer_settings'] == 'best' or held[1]['peer_settings'] != 'best':
        out[k], settings[k] = (run, r, path), {r['peer_settings']}
  return out


def _fastest_note(r) -> str:
  """What a row says of FermiNet's setting when a setting other than 'best' was its fastest
  in the sitting."""
  if not r.get('fastest') or r['peer_settings'] == 'best':
    return ''
  if r['peer_settings'] == 'default':
    return ', FermiNet at its defaults, faster here than folx and one thread'
  return (f', FermiNet at its {r["peer_settings"]!r} settings '
          f'({reference.describe(r["peer_settings"])}), its fastest here')


def _latest_step_rows(network: str = 'small', paths=None) -> dict:
  """{(system, optimizer, ours' further settings): (run, row, path)} of `network` over the
  against-FermiNet artifacts `paths` (the CPU ones by default): _newest by step time."""
  paths = paths or (benchmark_tables.WHOLE_TABLE + benchmark_tables.AFTER_BLAS
                    + [benchmark_tables.AGAINST_JSON] + benchmark_tables.N2_SPARSE)
  return _newest(paths, lambda r: r['network'] == network and not r['pretrain'],
                 lambda r: (r['system'], r['optimizer'], tuple(sorted(r['set'].items()))),
                 lambda r: r['baseline'])


def _status(met: bool, like_for_like: bool, missing: str) -> str:
  word = 'met' if met else 'missed'
  return f'**{word}**' if like_for_like else f'not yet like for like ({missing}; {word} there)'


def step_rows() -> list:
  """The per-step goals: the small network on the CPU machine, FermiNet's standard network
  there and on a GPU; a row per setting ours ran with (on a GPU: its float32 matrix
  products at the device's default, TF32, as FermiNet's, and at its own default)."""
  rows = []
  for network, paths, where in (('small', None, ''), ('standard', None, ', standard network'),
                                ('standard', [benchmark_tables.AGAINST_GPU_JSON],
                                 ', standard network, GPU')):
    for (system, opt, _), (run, r, path) in sorted(
        _latest_step_rows(network, paths).items(),
        key=lambda kv: (benchmark_tables.ELECTRONS[kv[0][0]], kv[0][1], kv[0][2])):
      goal = benchmark_tables.step_goal(system, network)
      if goal is None:
        continue
      best = r['peer_settings'] == 'best' or r.get('fastest', False)
      ours = ''.join(f', ours {k}={v}' for k, v in r['set'].items()) + _fastest_note(r)
      device = f', {benchmark_tables._device(run)}' if paths else ''
      rows.append((f'step time {system} {opt}{where}, ours / FermiNet', f'≤ {goal}',
                   f'{r["ratio"]:.2f} ({r["ours"]:.1f} / {r["baseline"]:.1f} ms; batch '
                   f'{r["batch"]}{ours}{device})',
                   _status(r['ratio'] <= goal, best, 'FermiNet at its default settings'),
                   f'`{_rel(path)}`, {_date(run)}'))
  return rows


def network_rows() -> list:
  """Our other networks against our FermiNet of the same width (benchmark_tables.
  NETWORK_GOALS): the newest run per system, network and optimizer, both ours alternated."""
  path, newest = benchmark_tables.NETWORKS_JSON, {}
  if not os.path.exists(path):
    return []
  for run, r in benchmark_tables._against_rows(path):
    if benchmark_tables.network_goal(r) is not None:
      newest[(r['set']['network.network_type'], r['system'], r['optimizer'])] = (run, r)
  rows = []
  for (network, system, opt), (run, r) in newest.items():
    goal = benchmark_tables.network_goal(r)
    rows.append((f'step time {system} {opt}, {network} / our FermiNet of the same width',
                 f'≤ {goal}', f'{r["ratio"]:.2f} ({r["ours"]:.1f} / {r["baseline"]:.1f} ms; '
                 f'batch {r["batch"]}, {r["network"]} FermiNet)',
                 _status(r['ratio'] <= goal, True, ''), f'`{_rel(path)}`, {_date(run)}'))
  return rows


def _startup_kept(r) -> bool:
  """Start-up rows of the small network: the molecules' with 1000 pretraining steps, the
  electron gas's (it has no pretraining) as it ran."""
  return r['network'] == 'small' and (r['pretrain'] == 1000 or r['system'] in NO_PRETRAINING)


def _latest_startup_rows(paths: list) -> dict:
  """{system: (run, row, path)}: _startup_kept rows, _newest by start-up."""
  return _newest(paths, _startup_kept, lambda r: r['system'],
                 lambda r: r['startup_s']['baseline'])


def _startup_elsewhere(paths: list, held_run, held) -> list:
  """(run, row) of the newest start-up row of the held row's system per FermiNet setting
  that the held row's sitting (`held_run`) did not measure, from another sitting (reported
  beside the quoted row: one of FermiNet's settings may start faster than its best)."""
  rows = [(run, r) for path in filter(os.path.exists, paths)
          for run, r in benchmark_tables._against_rows(path)
          if r['label'] == 'FermiNet' and _startup_kept(r) and r['system'] == held['system']]
  same = lambda run: (run.meta, run.data) == (held_run.meta, held_run.data)  # noqa: E731
  measured = {r['peer_settings'] for run, r in rows if same(run)}  # The held row's too.
  out = {}
  for run, r in rows:
    if r['peer_settings'] not in measured:
      out[r['peer_settings']] = (run, r)
  return list(out.values())


def startup_rows() -> list:
  rows = []
  paths = [PRETRAIN_STARTUP, benchmark_tables.AGAINST_JSON] + benchmark_tables.N2_SPARSE
  for system, (run, r, path) in _latest_startup_rows(paths).items():
    st = r['startup_s']
    ratio = st['ours'] / st['baseline']
    beside, worst = '', ratio
    for other_run, o in _startup_elsewhere(paths, run, r):
      o_ratio = o['startup_s']['ours'] / o['startup_s']['baseline']
      worst = max(worst, o_ratio)
      beside += (f'; FermiNet at its {o["peer_settings"]} settings, {_date(other_run)}: '
                 f'{o_ratio:.2f} ({o["startup_s"]["ours"]:.1f} / '
                 f'{o["startup_s"]["baseline"]:.1f} s)')
    what = 'with 1000 pretraining steps' if r['pretrain'] else '(no pretraining)'
    rows.append((f'start-up {system} {what}, ours / FermiNet', f'≤ {STARTUP_GOAL}',
                 f'{ratio:.2f} ({st["ours"]:.1f} / {st["baseline"]:.1f} s'
                 f'{_fastest_note(r)}){beside}',
                 _status(worst <= STARTUP_GOAL, r['peer_settings'] == 'best' or r.get(
                     'fastest', False), 'FermiNet at its default settings'),
                 f'`{_rel(path)}`, {_date(run)}'))
  return rows


def race_rows() -> list:
  rows = []
  best_groups = race.groups()
  for (system, seconds) in race.GOAL_TEXT:
    group = best_groups.get((system, float(seconds), 'best')) or best_groups.get(
        (system, float(seconds), 'default'))
    if not group:
      rows.append((f'race {system} {seconds} s, evaluated', race.GOAL_TEXT[(system, seconds)],
                   '–', 'not yet measured', f'`{_rel(race.JSON)}`'))
      continue
    es = [e for _, e in group]
    if (system, seconds) in race.DIFFERENCE_GOALS:  # Ours minus FermiNet's, per race.
      diffs = [d for d in map(race.difference, es) if d is not None]
      s = {'n': len(diffs)}
      figure = ('ours − FermiNet ' + ', '.join(f'{d:+.0f} ± {err:.0f}' for d, err in diffs)
                + f' mHa (n = {s["n"]})')
    else:
      judged = [e for e in es if race.default_ratio(e) is not None]
      ratios = [race.default_ratio(e) for e in judged]
      ours = [race.averaged_evaluated(e)['error_mha'] for e in judged]
      s = race.spread(ratios)
      figure = ('ratios ' + ', '.join(f'{x:.2f}' for x in ratios) + ', ours ' +
                ', '.join(f'{x:+.1f}' for x in ours) + f' mHa (n = {s["n"]})')
    verdict = race.verdict(system, seconds, es)
    settings = es[0]['peer_settings']
    missing = ', '.join(m for m in (
        'FermiNet at its default settings' if settings != 'best' else '',
        f'{s["n"]} of {MIN_RACES} races' if s['n'] < MIN_RACES else '') if m)
    met = verdict.startswith('met')
    rows.append((f'race {system} {seconds} s, evaluated, default outputs',
                 race.GOAL_TEXT[(system, seconds)], figure,
                 _status(met, not missing, missing),
                 f'`{_rel(race.JSON)}`, {(es[-1].get("date") or group[-1][0].get("date"))[:10]}'))
  return rows


def _columns(line: str) -> list:
  """The cells of one rendered table row '| a | b | ... |' (cells may hold an escaped |)."""
  return [c.strip() for c in line.strip().strip('|').split(' | ')]


def surface_rows() -> list:
  """The surfaces goals from each row's newest run: against separate runs and relaxation
  (scripts/pes_goals.py), and against DeepQMC's transferable training (scripts/pes_race.py),
  each judged as its own table judges it."""
  rows = []
  for run in artifacts.newest_runs(pes_goals.JSON, pes_goals.ROWS):
    row, what, measured, goal, judged = _columns(pes_goals.row_line(
        run.data, pes_goals.source_of(run.data)))
    rows.append((f'surfaces {row}: {what}', goal, measured,
                 '**met**' if judged == 'met' else '**missed**',
                 f'`{_rel(pes_goals.JSON)}`, {_date(run)}'))
  for p in pes_goals.in_progress().values():
    row, what, measured, goal, _ = _columns(pes_goals.progress_line(p))
    rows.append((f'surfaces {row}: {what}', goal, measured, '**in progress**',
                 f'`{_rel(p["path"])}`, {p["probes"][-1]["date"][:10]}'))
  for run in artifacts.newest_runs(pes_race.JSON, pes_race.ROWS):
    row, geometries, seconds, ours, peer, goal, judged = _columns(pes_race.row_line(run.data))
    rows.append((f'surfaces {row} ({geometries} geometries) against DeepQMC 1.3.0, {seconds} s '
                 'each, evaluated alike', goal,
                 f'mean absolute error (mHa): ours {ours}; DeepQMC {peer}',
                 '**met**' if judged.startswith('met') else f'**{judged.split(":")[0]}**',
                 f'`{_rel(pes_race.JSON)}`, {_date(run)}'))
  return rows


def _energy_row(label: str, goal: float, r: dict, path: str, stale: bool = False) -> tuple:
  """The goal row of one evaluated config of accuracy.py: error within `goal` mHa and train
  + evaluate within the time budget."""
  met = abs(r['error_mha']) <= goal and r['wall_s'] <= accuracy.BUDGET_S
  stem = os.path.splitext(os.path.basename(r['config']))[0]
  standing = ((f'stale (the earlier kfac-jax optimizer; re-measure with `python -m '
               f'scripts.accuracy --systems {stem}`; {"met" if met else "missed"} there)')
              if stale else ('**met**' if met else '**missed**'))
  return (f'{label}: error within the target, train + evaluate in ≤ '
          f'{accuracy.BUDGET_S:.0f} s on 2 cores', f'± {goal} mHa',
          f'{r["error_mha"]:+.2f} ± {r["stat_mha"]:.2f} mHa in {r["wall_s"]:.0f} s', standing,
          f'`{_rel(path)}`, {r["date"][:10]}')


def accuracy_rows() -> list:
  """Each shipped config's goal from its newest evaluated row (our KFAC rows of the newest
  JAX first; rows measured with the earlier kfac-jax optimizer are marked stale)."""
  rows = {}
  for path in (accuracy.JSON, accuracy.JSON_JAX012):
    for run, r in accuracy.latest_rows(path):
      rows[r['config']] = (r, path)
  return [_energy_row(label, goal, *rows[f'configs/{stem}.py'],
                      stale='kfac-jax' in rows[f'configs/{stem}.py'][0].get('versions', {}))
          for stem, (label, goal) in accuracy.SYSTEMS.items() if f'configs/{stem}.py' in rows]


def ecp_rows() -> list:
  """Each pseudopotential atom's goal from its newest row trained as shipped (rows with
  overrides, e.g. longer trainings, are in ACCURACY.md's table but do not count here)."""
  rows = {r['config']: r for run in artifacts.read(accuracy.ECP_JSON)
          for r in run.data['full'] if accuracy.as_shipped(r)}
  return [_energy_row(label, goal, rows[f'configs/{stem}.py'], accuracy.ECP_JSON)
          for stem, (label, goal) in accuracy.ECP_SYSTEMS.items()
          if f'configs/{stem}.py' in rows]


def states_rows() -> list:
  """The excited-state goals (accuracy_states.ROWS with a goal) from each row's latest run."""
  out = []
  for run, r in accuracy_states.latest():
    if not r['goal']:
      continue
    what, mha = r['goal']
    errors = accuracy_states.goal_errors(r)
    value, error = max(errors, key=lambda e: abs(e[0]))
    figure = (f'{"state" if what == "energy" else "excitation"} furthest off: '
              f'{artifacts.signed(value, error)} mHa')
    out.append((f'{r["system"]}: every {"state" if what == "energy" else "excitation energy"} '
                'within the target', f'± {mha:g} mHa', figure,
                '**met**' if all(abs(v) <= mha for v, _ in errors) else '**missed**',
                f'`{_rel(accuracy_states.JSON)}`, {_date(run)}'))
  return out


def _cost_goal(r) -> tuple:
  """(goal, target, figure, standing) of one count of step_cost.py in forward passes."""
  cost = r['step_flops'] / r['forward_flops']
  return (f'step cost {r["system"]} {r["optimizer"]}, arithmetic (XLA\'s count), forward passes',
          f'≤ {STEP_COST_GOAL}', f'{cost:.1f} (floor {sum(r["floors"].values())}; batch '
          f'{r["batch"]}, Laplacian {r["laplacian"]})', _status(cost <= STEP_COST_GOAL, True, ''))


def _newest_counts(runs: list) -> dict:
  """{(system, optimizer): (run, row)}: the newest step_cost.py count among `runs` of each
  STEP_COST_SYSTEMS system with the small network."""
  counted = {}
  for run in runs:
    for r in run.data['rows']:
      if r['system'] in STEP_COST_SYSTEMS and r['network'] == 'small' and not r.get('set'):
        counted[(r['system'], r['optimizer'])] = (run, r)
  return dict(sorted(counted.items()))


def step_cost_rows() -> list:
  """The step's cost in forward passes at Ne and ethene with the small network: XLA's count
  of the arithmetic (newest per system and optimizer) and the stage timers' time ratio
  (newest training per system and optimizer)."""
  rows, timed = [], {}
  for run, r in _newest_counts(artifacts.read(step_cost.COST_JSON)).values():
    rows.append(_cost_goal(r) + (f'`{_rel(step_cost.COST_JSON)}`, {_date(run)}',))
  for run in artifacts.read(STAGE_TIMERS_CPU):
    d, t = run.data, run.data['timings']
    if d['system'] in STEP_COST_SYSTEMS and d['network'] == 'small':
      timed[(d['system'], t['optimizer'])] = (run, t)
  for (system, opt), (run, t) in sorted(timed.items()):
    cost = t['train_step_ms'] / t['forward_ms']
    word = 'met' if cost <= STEP_COST_GOAL else 'missed'
    rows.append((f'step cost {system} {opt}, time (stage timers), forward passes',
                 f'≤ {STEP_COST_GOAL}',
                 f'{cost:.1f} ({t["train_step_ms"]:.1f} / {t["forward_ms"]:.2f} ms; batch '
                 f'{t["batch_size"]}, {t["devices"]} devices)',
                 'not the quoted measure (a forward pass this small is bound by per-operation '
                 f'overheads, which shrinks the count; {word} there)',
                 f'`{_rel(STAGE_TIMERS_CPU)}`, {_date(run)}'))
  return rows


def scaling_rows() -> list:
  """Whether our step time grows no faster with the number of electrons than FermiNet's:
  the exponents fitted to every size and to the larger ones, both to hold."""
  path, rows = benchmark_tables.SCALING_JSON, []
  for (opt, setting), by_system in benchmark_tables._scaling_rows(path).items():
    found = sorted((r for _, r in by_system.values()),
                   key=lambda r: benchmark_tables.ELECTRONS[r['system']])
    run = max((run for run, _ in by_system.values()), key=_date)
    n_all = [benchmark_tables.ELECTRONS[r['system']] for r in found]
    fits = [[p for p, _ in pair] for _, _, pair in benchmark_tables.scaling_fits(found)]
    rows.append((f'growth of the step time with size (N = {min(n_all)}–{max(n_all)}, {opt}), '
                 'ms ∝ N^p', "ours' p ≤ FermiNet's",
                 f'ours {fits[0][1]:.2f}, FermiNet {fits[0][0]:.2f} (all {len(found)} sizes); '
                 f'ours {fits[1][1]:.2f}, FermiNet {fits[1][0]:.2f} (N ≥ '
                 f'{benchmark_tables.SCALING_LARGER})',
                 _status(all(o <= b for b, o in fits), setting == 'best',
                         'FermiNet at its default settings'),
                 f'`{_rel(path)}`, {_date(run)}'))
  return rows


def _memory_row(run) -> tuple:
  """Whether ours trains a system at least as large as FermiNet's largest in the machine's
  memory at the comparison batch (one run of peak_memory.py, one network's ladder): judged
  only where a ladder reached a limit."""
  rows = run.data['rows']
  top = {c: peak_memory.largest(rows, c) for c in peak_memory.CODES}
  reached = {c: peak_memory.limit_reached(rows, c) for c in peak_memory.CODES}
  electrons = {c: top[c]['electrons'] if top[c] else 0 for c in peak_memory.CODES}
  if reached['ferminet']:
    standing = _status(electrons['ours'] >= electrons['ferminet'], True, '')
  elif reached['ours']:
    standing = '**missed**'
  else:
    biggest = max(rows, key=lambda r: r['electrons'])
    standing = (f'not reached: both trained every system tried (at {biggest["system"]}, '
                f'ours {biggest["ours"]["peak_gib"]:.2f} GiB, FermiNet '
                f'{biggest["ferminet"]["peak_gib"]:.2f} GiB)')
  return (f'largest system that trains at batch {run.data["keys"]["batch_size"]} in the '
          f'machine\'s memory ({run.meta["machine"].get("memory_gib", 0):.1f} GiB), '
          f'{run.data["network"]} network', "ours ≥ FermiNet's",
          peak_memory.limit_text(run), standing, f'`{_rel(peak_memory.JSON)}`, {_date(run)}')


def memory_rows() -> list:
  """The memory goal from peak_memory.py's newest ladder of each network."""
  return [_memory_row(run) for run in peak_memory.newest_per_network(peak_memory.JSON)]


# The speed goals measured together, in one sitting (same machine, commit and day): ours
# against FermiNet per step at these (network, system) pairs with each optimizer there, the
# step cost (STEP_COST_SYSTEMS) and the memory ladders.
SITTING_STEPS = (('small', 'Ne'), ('small', 'N2'), ('small', 'C2H4'), ('standard', 'Ne'))


def _sitting_of(run) -> tuple:
  """What makes runs of several scripts one sitting: the commit, the machine and the day."""
  m = run.meta
  return (m.get('commit'), bool(m.get('dirty')), artifacts.machine_text(m.get('machine')),
          _date(run))


def _sitting_step_rows(path: str) -> tuple:
  """(sitting, {(network, system, optimizer): {FermiNet setting: (run, row)}}) of the newest
  sitting in the against-FermiNet artifact `path` that timed a SITTING_STEPS pair (CPU, no
  pretraining, ours with no further settings); (None, {}) when there is none."""
  kept = [(run, r) for run, r in benchmark_tables._against_rows(path)
          if r['label'] == 'FermiNet' and (r['network'], r['system']) in SITTING_STEPS
          and not r['pretrain'] and not r['set'] and not (run.meta.get('machine') or {}).get(
              'gpus')] if os.path.exists(path) else []
  if not kept:
    return None, {}
  sitting = _sitting_of(kept[-1][0])
  out = {}
  for run, r in kept:
    if _sitting_of(run) == sitting:
      out.setdefault((r['network'], r['system'], r['optimizer']), {})[r['peer_settings']] = (
          run, r)
  return sitting, out


def _sitting_step_row(network: str, system: str, optimizer: str, by_setting: dict) -> tuple:
  """One per-step goal of a sitting, quoted against FermiNet's fastest setting there, with
  each setting's step and the ratio against its defaults beside."""
  goal = benchmark_tables.step_goal(system, network)
  rows = {s: r for s, (_, r) in by_setting.items()}
  name, quoted = min(rows.items(), key=lambda kv: kv[1]['baseline'])
  per = quoted['ratio_per_repeat']
  each = ', '.join(f'{s} {r["baseline"]:.1f}' for s, r in rows.items())
  beside = (f'; against its defaults {rows["default"]["ratio"]:.2f}'
            if 'default' in rows and name != 'default' else '')
  figure = (f'{quoted["ratio"]:.2f} (ours {quoted["ours"]:.1f} ms; FermiNet {each} ms, quoted '
            f'against its {name} settings, its fastest; per repeat {min(per):.2f}–'
            f'{max(per):.2f}, n = {len(per)}){beside}')
  where = ', standard network' if network == 'standard' else ''
  return (f'step time {system} {optimizer}{where}, ours / FermiNet', f'≤ {goal}', figure,
          _status(quoted['ratio'] <= goal, 'best' in rows, 'FermiNet\'s best settings not run'))


def render_sitting(path: str = None) -> str:
  """The speed goals of the newest sitting, with the commands that measured them."""
  path = path or benchmark_tables.AGAINST_JSON
  sitting, steps = _sitting_step_rows(path)
  if sitting is None:
    return f'No sitting in `{_rel(path)}` yet.'
  order = lambda k: (SITTING_STEPS.index(k[:2]), k[2])  # noqa: E731
  of_sitting = lambda path: [run for run in artifacts.read(path)  # noqa: E731
                              if _sitting_of(run) == sitting]
  counts, memory = of_sitting(step_cost.COST_JSON), of_sitting(peak_memory.JSON)
  rows = [_sitting_step_row(*k, steps[k]) for k in sorted(steps, key=order)]
  rows += [_cost_goal(r) for _, r in _newest_counts(counts).values()]
  rows += [_memory_row(run)[:4] for run in memory]
  runs = [run for by in steps.values() for run, _ in by.values()] + counts + memory
  commands = list(dict.fromkeys(artifacts.runnable(run.meta.get('command', '?'))
                                for run in runs))
  commit, dirty, machine, date = sitting
  lines = ['| goal | target | figure | standing |', '|---|---|---|---|']
  lines += ['| ' + ' | '.join(r) + ' |' for r in rows]
  return '\n'.join(lines) + (
      f'\n\nOne sitting: {date}, {machine}, commit {(commit or "not recorded")[:7]}'
      + (' with uncommitted changes' if dirty else '') + '; measured by\n\n'
      + '\n'.join(f'    {c}' for c in commands))


def _table(rows: list) -> str:
  lines = ['| goal | target | latest figure | standing | from |', '|---|---|---|---|---|']
  lines += ['| ' + ' | '.join(r) + ' |' for r in rows]
  return '\n'.join(lines)


def render_benchmarks() -> str:
  return _table(step_rows() + network_rows() + step_cost_rows() + scaling_rows() + memory_rows()
                + startup_rows() + race_rows()) + (
      '\n\nEach figure is rendered from the artifact named beside it; '
      'python -m scripts.render_docs rewrites this table.')


def render_accuracy() -> str:
  return _table(accuracy_rows() + ecp_rows() + states_rows() + race_rows()
                + surface_rows()) + (
      '\n\nEach figure is rendered from the artifact named beside it; '
      'python -m scripts.render_docs rewrites this table.')


TABLES = {
    'speed-goals-sitting': ('BENCHMARKS.md', render_sitting),
    'standing-benchmarks': ('BENCHMARKS.md', render_benchmarks),
    'standing-accuracy': ('ACCURACY.md', render_accuracy),
}
