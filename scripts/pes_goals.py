"""Potential energy surface goal table: one network trained over a set of geometries against
separate runs at each geometry, to the same accuracy, and geometry optimisation; every goal
judged met or missed from the measured numbers when the table is rendered.

  python -m scripts.pes_goals --rows h2,lih,h2o,h2o_low [--keep DIR] [--allowance SECONDS]
  python -m scripts.pes_goals --rows n2 [--allowance SECONDS]
  python -m scripts.pes_goals --rows lih_one_sitting    # after row lih is recorded
  python -m scripts.render_docs                  # put the table into ACCURACY.md
  git add -A benchmarks/pes_* ACCURACY.md        # after each sitting: carried rows' state

Rows h2 and lih. The surface config (configs/h2_pes.py, configs/lih_pes.py) and the
single-geometry config (configs/h2.py, configs/lih.py) placed at each geometry of the set
are each trained on a ladder of iterations (RUNGS, each rung resuming the previous one, a
process per rung as a user would continue a run) and evaluated after every rung with the
same sweeps of the same number of walkers (the single-geometry config's batch, per geometry
of the surface: `evaluate --walkers`), until every geometry's evaluated energy lies within
the row's tolerance of the reference. A run's time is the sum of its training processes'
wall times up to that rung (the evaluations are left out: both ways need them alike); the
separate runs' time is the sum over the geometries. The goal is the ratio of the two. The
reference is pyscf's (ferminet_fast/physics/references.py), computed once per row: for H2
CCSD (full CI for two electrons) extrapolated from cc-pVQZ and cc-pV5Z; for LiH CCSD(T)
extrapolated from cc-pCVTZ and cc-pCVQZ, shifted by its offset from the exact -8.070548 Ha
at 3.015 bohr (configs/lih.py's exact energy at its geometry), the offset recorded. A
training cut by the sitting's end: the surface's (its run directory carried) is charged the
seconds it lived and trains to the same rung again at the next sitting; a separate run's
ladder starts again from nothing.

Rows h2_one_sitting and lih_one_sitting (asked for by name, once row h2 or lih is recorded):
every training process of that row's newest recorded climb, each ladder up to the rung at
which it climbed with the same commands, run again in one sitting without evaluations, the
surface's rungs spread evenly among the separate ladders; the ratio of the two ways' wall
times, which needs no probe to carry times between sittings, judged against the row's goal,
with the accuracy that row's recorded climb reached (its surface and every separate ladder
within the tolerance at the top rung) as the rest of the verdict. A probe of PROBE_STEPS
steps reads a machine's speed with a spread of its own; where the two ratios disagree, the
one-sitting ratio is the measure to quote.

Row n2. The surface config (configs/n2_pes.py: 8 bond lengths, 1.6 to 4.0 bohr) and
configs/n2.py at each of its G geometries (both with their Hartree-Fock pretraining) each
train a budget of steps: a separate run what N2_SECONDS give configs/n2.py at its step
time, fixed at the row's first sitting (n2_budget); the surface G times those steps scaled
by the ratio of the two configs' step times, fixed when the surface begins (surface_budget:
probes of both alternated), so that it trains the separate runs' time at the step of the
code it trains with. Budgets in steps are the same computation whatever machine, load or
code version a later sitting has, which scaled seconds are not. Every geometry is evaluated alike
(N2_SWEEPS after N2_BURN_IN, the single-geometry batch per geometry). The goal: the
surface's mean error over the geometries at most N2_GOAL of the separate runs' (one
standard error counted against the surface); the difference of the two ways' mean
energies, which needs no reference, is shown beside, and so are both ways' training wall
times (from sittings of different speeds: the steps are what is held equal; every attempt
counted, kept or begun again, a piece stopped from outside until it stopped). Only asked
for by name: its eight hours of training and about one of evaluation take sittings. A
separate run is trained and evaluated within one sitting, and one cut short starts again;
the surface trains in pieces, each resuming the last from its checkpoint (as after a
preemption, its start-up paid again each time). The reference is NEVPT2 on the
full-valence CASSCF, all electrons correlated, extrapolated from cc-pCVTZ and cc-pCVQZ and
shifted to the exact energy of configs/n2.py at 2.068 bohr (CCSD(T) fails past about 2.5
bohr, where N2's bond is half broken), and checked against CCSD(T) alike at the bonds up to
N2_CHECK_BOND; beyond those it is unchecked.

Rows h2, lih and n2 are carried over sittings, so that each outlives the machine it ran on:
each sitting continues the row for at most --allowance seconds, and its state lives in a
directory of the repository (--state DIR, benchmarks/pes_<row> by default), committed at
the end of the sitting: progress.json holds every number measured so far, and surface/ the
surface's run directory cut to what resuming needs (config.json, the newest checkpoint and
the last STATS_TAIL rows of stats.csv). The separate runs train in a scratch directory
(--keep DIR keeps it), so only their figures are carried. Every sitting first times
PROBE_STEPS steps of the row's single-geometry config; rows h2 and lih scale their times and
budgets by that probe against the first sitting's (first-sitting seconds), so that every
part gets the same compute whatever machine a sitting lands on, while row n2 counts steps
and uses the probe only to plan what fits the sitting. Once the row is appended to the
artifact its state directory is removed.

Rows h2o and h2o_low. A relaxation (system.relax, stages/relax.py) of water with the network
of configs/ne.py, started 0.05 angstrom and 5 degrees away from the experimental equilibrium
r_e = 0.9572 angstrom, theta_e = 104.52 degrees (Hoy and Bunker, J. Mol. Spectrosc. 74, 1
(1979)), above it (h2o) or below it (h2o_low), stopped by SIGTERM at 60 minutes; judged from
relax.json's final geometry. Two starts on either side tell a relaxation that finds the
minimum from one that stays near where it began.

Each row's run is appended to benchmarks/pes_goals.json (scripts/artifacts.py: every run
kept with its date, machine, versions, commit and command line); TABLES renders the newest
run of each row into ACCURACY.md.
"""

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

import numpy as np

from scripts import artifacts
from scripts import race

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(REPO, 'benchmarks', 'pes_goals.json')
RUNGS = (500, 1000, 2000, 4000, 8000, 16000)  # Iterations after each rung of a ladder.
EVAL_STEPS = 2000  # Sweeps of every evaluation, the same for both ways.
BOHR_PER_ANGSTROM = 1 / 0.529177210903
# row -> surface config, single-geometry config, tolerance (Ha), reference, goal ratio.
SURFACES = {
    'h2': ('configs/h2_pes.py', 'configs/h2.py', 0.5e-3, 'ccsd/cc-pv[q5]z', 0.25),
    'lih': ('configs/lih_pes.py', 'configs/lih.py', 1.0e-3, 'ccsd(t)/cc-pcv[tq]z', 1 / 3),
}
# row -> surface config, single-geometry config, reference (physics/references.py).
REFERENCES = {row: (surface, single, name) for row, (surface, single, _, name, _)
              in SURFACES.items()}
REFERENCES['n2'] = ('configs/n2_pes.py', 'configs/n2.py', 'nevpt2/cc-pcv[tq]z')
CALIBRATED = ('lih', 'n2')  # Shifted to the exact energy of the single-geometry config.
H2O_R, H2O_THETA = 0.9572, 104.52  # angstrom, degrees: experiment (Hoy and Bunker 1979).
# row -> start (angstrom, degrees): 0.05 angstrom and 5 degrees away, on either side.
H2O_STARTS = {'h2o': (H2O_R + 0.05, H2O_THETA + 5.0), 'h2o_low': (H2O_R - 0.05, H2O_THETA - 5.0)}
H2O_SECONDS = 3600.0
H2O_GOAL = (0.005, 0.5)  # angstrom, degrees.
# Row -> the ladder row whose recorded climb it times again in one sitting (one_sitting_row).
ONE_SITTING = {f'{row}_one_sitting': row for row in SURFACES}
ROWS = (*SURFACES, *ONE_SITTING, 'n2', *H2O_STARTS)


def _run(cmd: list, seconds=None) -> float:
  """Runs cmd from the repository; the seconds it lived (SIGTERM at `seconds`)."""
  if seconds is not None:
    return race._run(cmd, seconds)
  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
  if proc.returncode:
    raise RuntimeError(f'{" ".join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}')
  return time.perf_counter() - t0


def _json(run: str, name: str) -> dict:
  with open(os.path.join(run, name)) as f:
    return json.load(f)


def _train(config: str, run: str, iterations: int, *overrides: str) -> list:
  return [sys.executable, '-m', 'ferminet_fast.train', '--config', config,
          f'--config.log.save_path={run}', '--config.log.progress=False',
          f'--config.optim.iterations={iterations}', *overrides]


def _evaluate(run: str, walkers=None, steps: int = EVAL_STEPS) -> list:
  return [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
          f'--steps={steps}', *([f'--walkers={walkers}'] if walkers else [])]


def geometries_of(config: str) -> np.ndarray:
  """(G, M, 3) bohr: the nuclei of each geometry of the surface config `config`."""
  cfg = race.cli.load_config_file(os.path.join(REPO, config))
  return np.asarray(race.systems.make_system(cfg.system).geometries.positions)


def molecule_text(symbols, positions) -> str:
  return '; '.join(f'{s} ' + ' '.join(f'{c:.10f}' for c in p) for s, p in zip(symbols, positions))


def reference_energies(row: str, name: Optional[str] = None, only=None) -> dict:
  """The row's reference (or the method `name`) at each geometry (Ha; or those indexed by
  `only`), shifted by its offset from the exact energy of the row's single-geometry config
  where the row calibrates (CALIBRATED), the offset recorded."""
  from ferminet_fast.physics import geometries, references, systems
  surface, single, default = REFERENCES[row]
  name = name or default
  system = systems.make_system(race.cli.load_config_file(os.path.join(REPO, surface)).system)
  if only is not None:
    picked = system.surface.positions[list(only)]
    system = dataclasses.replace(system, surface=geometries.Surface(picked))
  chosen = references.parse(name)
  energies = references.energies(system, chosen)
  out = {'name': name, 'raw': energies.tolist(), 'offset': 0.0}
  if only is not None:
    out['geometries'] = list(only)
  if row in CALIBRATED:
    cfg = race.cli.load_config_file(os.path.join(REPO, single))
    at = systems.make_system(cfg.system)
    out['offset'] = cfg.system.exact_energy - references.energy(at, chosen)
    out['calibration'] = (f'shifted to the exact {cfg.system.exact_energy} Ha of {single} '
                          f'({cfg.system.molecule}, {cfg.system.units})')
  out['energies'] = (energies + out['offset']).tolist()
  return out


# Rows carried over sittings (h2, lih, n2): their state in a directory of the repository,
# committed after each sitting (--state DIR; benchmarks/pes_<row> by default).
PROBE_STEPS = 100  # Steps of a row's single-geometry config (no pretraining) timed at each
# sitting's start.
MARGIN = 120.0  # s of a sitting's allowance kept for a training's checkpoint and exit.
STATS_TAIL = 1000  # stats.csv rows the surface carries between pieces (its blow-up guard's
# window, log.blowup_window, looks back 500).
RESTARTS = 3  # Times a separate run may be started again before the row gives up.


def probe(work: str, config: str, steps: int = PROBE_STEPS) -> float:
  """ms per training step of `config` on this machine now: the median step time of
  `steps` steps after the first fifth (stats.csv), without pretraining."""
  run = os.path.join(work, 'probe')
  if os.path.exists(run):
    shutil.rmtree(run)
  _run(probe_command(run, config, steps))
  times = [float(r['step_time_ms']) for r in race._rows(os.path.join(run, 'stats.csv'))]
  shutil.rmtree(run)
  ms = float(np.median(times[len(times) // 5:])) if len(times) >= steps // 2 else 0.0
  if not ms > 0:
    raise RuntimeError(f'the probe logged {len(times)} steps of {steps}: no time')
  return ms


def probe_command(run: str, config: str, steps: int = PROBE_STEPS) -> list:
  return _train(config, run, steps, '--config.pretrain.iterations=0')


def carried_state(state_dir: str, setup: dict, fresh: dict) -> dict:
  """progress.json of a carried row in `state_dir`: new (`setup`, no probes, the entries of
  `fresh`), or continued (SystemExit in words if it was begun under another setup)."""
  path = os.path.join(state_dir, 'progress.json')
  if not os.path.exists(path):
    return {'setup': setup, 'probes': [], **fresh}
  state = _json(state_dir, 'progress.json')
  if state['setup'] != json.loads(json.dumps(setup)):
    raise SystemExit(f'{path} was begun with other settings of its row ({state["setup"]}); '
                     'continue it with the code that began it, or start a new --state DIR')
  return state


def carry(run: str) -> Optional[int]:
  """Cuts the run directory `run` (its training ended) to what resuming it needs: its newest
  checkpoint, and the last STATS_TAIL rows of stats.csv; returns the step of the newest
  checkpoint (None without one)."""
  from ferminet_fast.runtime import checkpoint
  steps = checkpoint.saved_steps(run)
  if steps:
    for name in os.listdir(checkpoint.directory(run)):
      if name != str(steps[-1]):
        shutil.rmtree(os.path.join(checkpoint.directory(run), name), ignore_errors=True)
  stats = os.path.join(run, 'stats.csv')
  if os.path.exists(stats):
    with open(stats) as f:
      lines = f.readlines()
    with open(stats + '.new', 'w') as f:
      f.writelines(lines[:1] + lines[max(1, len(lines) - STATS_TAIL):])
    os.replace(stats + '.new', stats)
  return steps[-1] if steps else None


def save_json(path: str, doc: dict) -> None:
  """Writes `doc` to `path` whole or not at all (a new file renamed over the old)."""
  with open(path + '.new', 'w') as f:
    json.dump(doc, f, indent=1)
  os.replace(path + '.new', path)


LADDER_MIN_RUNG = 120.0  # First-sitting s left worth starting a rung of a ladder in.


def ladder_setup(row: str) -> dict:
  """What row h2's or lih's state must keep: a sitting under another refuses to go on."""
  surface, single, tolerance, reference, goal = SURFACES[row]
  return {'row': row, 'configs': [surface, single, reference], 'tolerance_ha': tolerance,
          'goal_ratio': goal, 'rungs': list(RUNGS), 'eval_steps': EVAL_STEPS,
          'probe_steps': PROBE_STEPS, 'positions_bohr': geometries_of(surface).tolist()}


def ladder_parts(row: str, state_dir: str, scratch: str) -> list:
  """Row h2's or lih's ladders in the order they climb: (name, run directory, config,
  the geometries it is judged at (a slice of the reference), extra settings); the surface's
  in `state_dir` (carried over sittings), the separate runs' in `scratch`."""
  surface, single = SURFACES[row][:2]
  symbols = race.systems.make_system(
      race.cli.load_config_file(os.path.join(REPO, surface)).system).symbols
  parts = [('surface', os.path.join(state_dir, 'surface'), surface, slice(None), [])]
  for g, nuclei in enumerate(geometries_of(surface)):
    parts.append((f'separate_{g}', os.path.join(scratch, f'geometry_{g}'), single,
                  slice(g, g + 1), [f'--config.system.molecule={molecule_text(symbols, nuclei)}',
                                    '--config.system.units=bohr']))
  return parts


def run_ladder_row(row: str, state_dir: str, scratch: str, allowance: float,
                   keep: bool = False) -> Optional[dict]:
  """Row h2 or lih, continued for at most `allowance` seconds of this sitting: the surface's
  ladder, then each separate run's (in `scratch`, removed unless `keep`); the entry once
  every ladder has climbed, else None. Times are first-sitting seconds (wall / scale, with
  scale this sitting's probe against the first sitting's)."""
  t0 = time.perf_counter()
  left = lambda: allowance - (time.perf_counter() - t0) - MARGIN  # noqa: E731
  os.makedirs(state_dir, exist_ok=True)
  os.makedirs(scratch, exist_ok=True)
  path = os.path.join(state_dir, 'progress.json')
  state = carried_state(state_dir, ladder_setup(row), {'ladders': {}, 'restarts': {}})
  state['probes'].append({'ms_per_step': probe(scratch, SURFACES[row][1]), **artifacts.meta()})
  scale = state['probes'][-1]['ms_per_step'] / state['probes'][0]['ms_per_step']
  if 'reference' not in state:
    state['reference'] = reference_energies(row)
  save_json(path, state)
  reference = np.asarray(state['reference']['energies'])
  walkers = race.cli.load_config_file(os.path.join(REPO, SURFACES[row][1])).batch_size
  for name, run, config, which, extra in ladder_parts(row, state_dir, scratch):
    if state['ladders'].get(name, {}).get('done'):
      continue
    train = lambda n, config=config, run=run, extra=extra: _train(config, run, n, *extra)  # noqa
    if not climb(state, path, name, run, train, reference[which], walkers, scale, left,
                 carried=name == 'surface'):
      return None  # The next sitting continues.
    if name != 'surface' and not keep:
      shutil.rmtree(run, ignore_errors=True)
  return ladder_entry(state)


def climb(state: dict, path: str, name: str, run: str, train, reference: np.ndarray,
          walkers: int, scale: float, left, carried: bool) -> bool:
  """Ladder `name`, continued: each rung of RUNGS trains to that rung (`train(iterations)`,
  the command), then evaluates it (`walkers` per geometry), until every evaluated energy
  lies within the row's tolerance of `reference` or the rungs run out; True once it has
  climbed. A rung's time is its training process's, in first-sitting seconds. A training
  cut by the sitting's end: the carried ladder (the surface, its run directory in the
  state, cut by `carry` after each training) is charged the seconds it lived (its planned
  seconds whole if this script was stopped inside it) and trains to the same rung again,
  resuming; a separate ladder (its run directory lost with the sitting) starts again from
  nothing at the next sitting. A training that ran all its steps but whose final state was
  not finite (so not kept) has climbed its rung: its last good checkpoint is evaluated."""
  sitting = len(state['probes']) - 1
  ladder = state['ladders'].get(name)
  if ladder and not carried and ladder['sitting'] != sitting and (
      ladder['rungs'] or 'pending' in ladder):
    restarts = state['restarts'][name] = state['restarts'].get(name, 0) + 1
    if restarts > RESTARTS:
      raise SystemExit(f'row {state["setup"]["row"]}: the {name} ladder was cut short '
                       f'{restarts} times')
    ladder = None
  if ladder is None or (not carried and ladder['sitting'] != sitting):
    shutil.rmtree(run, ignore_errors=True)
    ladder = state['ladders'][name] = {'rungs': [], 'train_s': 0.0}
  if 'running' in ladder.get('pending', {}):  # This script was stopped inside a training:
    ladder['train_s'] += ladder['pending'].pop('running')  # charged its seconds whole.
    ladder['interrupted'] = ladder.get('interrupted', 0) + 1
  ladder['sitting'] = sitting
  tolerance = state['setup']['tolerance_ha']
  climbed = {r['iterations'] for r in ladder['rungs']}
  for iterations in RUNGS:
    if ladder['rungs'] and ladder['rungs'][-1]['within']:
      break
    if iterations in climbed:
      continue
    pending = ladder.setdefault('pending', {'iterations': iterations, 'trained': False})
    if not pending['trained']:
      if left() < LADDER_MIN_RUNG * scale:
        save_json(path, state)
        return False
      seconds = left()
      pending['running'] = seconds / scale
      save_json(path, state)
      try:
        wall = _run(train(iterations), seconds)
      finally:
        if carried:  # Also when stopped inside it: what is committed stays small.
          carry(run)
      ladder['train_s'] += wall / scale
      del pending['running']
      kept = trained_to(run)
      if kept < iterations and ran_to(run) >= iterations:
        pending['kept'] = kept  # Its final state was bad: the last good one.
      elif kept < iterations:
        save_json(path, state)
        if wall >= seconds - 1:
          return False  # The sitting's end stopped it.
        raise RuntimeError(f'the {name} training to {iterations} iterations stopped after '
                           f'{wall:.0f} s short of them: see {run}')
      pending['trained'] = True
      save_json(path, state)
    found = None
    for result in ('pes.json', 'eval.json'):
      if os.path.exists(os.path.join(run, result)):
        os.remove(os.path.join(run, result))  # An earlier rung's.
    if left() > 0:
      _run(_evaluate(run, walkers), left())
      found = next((f for f in ('pes.json', 'eval.json') if os.path.exists(os.path.join(run, f))),
                   None)
    if found is None:
      save_json(path, state)
      if left() <= 1:
        return False  # Evaluated at the next sitting.
      raise RuntimeError(f'the evaluation of {name} at {iterations} iterations wrote no '
                         f'energies: see {run}')
    doc = _json(run, found)
    rows = doc['geometries'] if found == 'pes.json' else [doc]
    energies, errors = [r['energy'] for r in rows], [r['error'] for r in rows]
    within = bool(np.all(np.abs(np.asarray(energies) - reference) <= tolerance))
    ladder['rungs'].append({'iterations': iterations, 'train_s': ladder['train_s'],
                            'energies': energies, 'errors': errors, 'within': within,
                            'sitting': sitting,
                            **({'evaluated_step': pending['kept']} if 'kept' in pending else {})})
    del ladder['pending']
    save_json(path, state)
  ladder.update(done=True, reached=ladder['rungs'][-1]['within'])
  save_json(path, state)
  return True


def trained_to(run: str) -> int:
  """The step of the newest checkpoint in `run` (0 without one)."""
  from ferminet_fast.runtime import checkpoint
  return max(checkpoint.saved_steps(run), default=0)


def ran_to(run: str) -> int:
  """The step at which the last training in `run` ended whole (result.json; 0 without one):
  beyond trained_to(run) where its final state was not finite and so was not kept (the
  newest checkpoint then holds the last good one, which evaluation takes)."""
  path = os.path.join(run, 'result.json')
  if not os.path.exists(path):
    return 0
  result = _json(run, 'result.json')
  return result['iterations'] if result.get('complete') else 0


def ladder_entry(state: dict) -> dict:
  """Row h2's or lih's artifact entry from its finished progress."""
  setup = state['setup']
  surface, single = setup['configs'][:2]
  walkers = race.cli.load_config_file(os.path.join(REPO, single)).batch_size
  side = lambda name: {k: state['ladders'][name][k]  # noqa: E731
                       for k in ('rungs', 'reached', 'train_s')}
  commands = [' '.join(probe_command('<DIR>', single)),
              ' '.join(_train(surface, '<DIR>', RUNGS[0])),
              ' '.join(_evaluate('<DIR>', walkers)),
              ' '.join(_train(single, '<DIR_g>', RUNGS[0], '--config.system.molecule=<g>',
                              '--config.system.units=bohr'))]
  return {'row': setup['row'], 'surface_config': surface, 'single_config': single,
          'commands': commands, 'tolerance_ha': setup['tolerance_ha'],
          'goal_ratio': setup['goal_ratio'], 'rungs': setup['rungs'],
          'eval_steps': setup['eval_steps'], 'eval_walkers': walkers,
          'positions_bohr': setup['positions_bohr'], 'reference': state['reference'],
          'probes': state['probes'], 'restarts': state['restarts'],
          'surface': side('surface'),
          'separate': [side(f'separate_{g}') for g in range(len(setup['positions_bohr']))]}


def one_sitting_jobs(row: str, e: dict, work: str) -> list:
  """The training processes of row h2's or lih's recorded entry `e`, each ladder up to the
  rung at which it climbed, in the order one_sitting_row runs them: (name, command, rung),
  the surface's rungs spread evenly among the separate ladders (each whole, its rungs
  resuming one another) so that both ways meet the machine's drift alike."""
  parts = ladder_parts(row, work, work)
  chains = []
  for (name, run, config, _, extra), side in zip(parts, [e['surface'], *e['separate']]):
    top = side['rungs'][-1]['iterations']
    chains.append([(name, _train(config, run, n, *extra), n) for n in RUNGS if n <= top])
  surface, separate = chains[0], chains[1:]
  jobs, s = [], 0
  for g, chain in enumerate(separate):
    while s < len(surface) and s * len(separate) <= g * len(surface):
      jobs.append(surface[s])
      s += 1
    jobs.extend(chain)
  return jobs + surface[s:]


def one_sitting_row(row: str, source, work: str) -> dict:
  """Row `row`_one_sitting: the training processes of row `row`'s recorded run `source`
  (an artifacts.Run: its ladders measured over sittings, each sitting's times scaled by its
  probe) run again in this one sitting, without evaluations (one_sitting_jobs): the ratio of
  the two ways' wall times, which needs no scaling between sittings. The accuracy each
  ladder reached is the source's."""
  e = source.data
  jobs, walls = one_sitting_jobs(row, e, work), []
  for name, cmd, rung in jobs:
    wall = _run(cmd)
    run = next(a.split('=', 1)[1] for a in cmd if a.startswith('--config.log.save_path='))
    if trained_to(run) < rung and ran_to(run) < rung:
      raise RuntimeError(f'the {name} training to {rung} iterations stopped short: see {run}')
    walls.append({'ladder': name, 'iterations': rung, 'wall_s': wall})
  total = lambda name: sum(w['wall_s'] for w in walls if w['ladder'] == name)  # noqa: E731
  return {'row': f'{row}_one_sitting', 'of': row, 'of_date': source.meta.get('date'),
          'of_commit': source.meta.get('commit'),
          'goal_ratio': e['goal_ratio'], 'processes': walls, 'surface_s': total('surface'),
          'separate_s': [total(f'separate_{g}') for g in range(len(e['separate']))],
          'climbed': {'surface': e['surface']['rungs'][-1]['iterations'],
                      'separate': [s['rungs'][-1]['iterations'] for s in e['separate']]}}


# Row n2: each of the G separate runs trains the steps that N2_SECONDS gave at the row's first
# sitting, the surface for G times as long at its own step time, across sittings.
N2_SECONDS = 1800.0  # s of the first sitting's step time that a separate run's steps stand for.
N2_SWEEPS, N2_BURN_IN = 500, 100  # Evaluation of every geometry, both ways alike.
N2_MIN_CHUNK = 300.0  # s: the shortest piece of the surface's training worth a start-up.
N2_GOAL = 0.5  # The surface's mean error at most this fraction of the separate runs'.
N2_EVAL_S = 300.0  # s kept for a separate run's evaluation after its training.
N2_START_S = 120.0  # s kept for a training's start-up (SCF, pretraining, compilation) and exit.
N2_SLACK = 1.2  # A separate run starts with this times its steps' probed time left, at least.
N2_BUDGET_STEPS, N2_BUDGET_REPEATS = 300, 2  # The first sitting's probes of both configs,
# alternated, that fix the budgets.
# The reference checked where one determinant serves: CCSD(T), calibrated alike, at the bonds
# up to N2_CHECK_BOND bohr (the equilibrium is 2.068).
N2_CHECK, N2_CHECK_BOND = 'ccsd(t)/cc-pcv[tq]z', 2.3


def n2_parts(state_dir: str, scratch: str) -> list:
  """The row's parts in the order they run: (name, run directory, extra settings); the
  separate runs in `scratch`, the surface in `state_dir` (carried over sittings)."""
  positions = geometries_of(REFERENCES['n2'][0])
  symbols = race.systems.make_system(
      race.cli.load_config_file(os.path.join(REPO, REFERENCES['n2'][1])).system).symbols
  parts = [(f'separate_{g}', os.path.join(scratch, f'geometry_{g}'),
            [f'--config.system.molecule={molecule_text(symbols, nuclei)}',
             '--config.system.units=bohr']) for g, nuclei in enumerate(positions)]
  return parts + [('surface', os.path.join(state_dir, 'surface'), [])]


def n2_setup() -> dict:
  """What a row carried over sittings must keep: a sitting under another refuses to go on."""
  return {'budget': 'steps', 'seconds_each': N2_SECONDS, 'sweeps': N2_SWEEPS,
          'burn_in': N2_BURN_IN, 'probe_steps': PROBE_STEPS, 'configs': REFERENCES['n2'],
          'positions_bohr': geometries_of(REFERENCES['n2'][0]).tolist()}


def run_n2_row(state_dir: str, scratch: str, allowance: float,
               keep: bool = False) -> Optional[dict]:
  """Row n2, continued for at most `allowance` seconds of this sitting: the separate runs,
  each trained and evaluated whole in one sitting (in `scratch`, removed unless `keep`),
  then the surface, in pieces that each resume the last (as after a preemption) in
  `state_dir`, then its evaluation; the entry once every part is done, else None.
  The budgets are steps, the same computation whatever machine or code a sitting has: the
  first sitting fixes a separate run's (n2_budget), the surface's beginning the surface's
  (surface_budget); each sitting's probe only plans what fits it."""
  t0 = time.perf_counter()
  left = lambda: allowance - (time.perf_counter() - t0) - MARGIN  # noqa: E731
  os.makedirs(state_dir, exist_ok=True)
  os.makedirs(scratch, exist_ok=True)
  path = os.path.join(state_dir, 'progress.json')
  state = carried_state(state_dir, n2_setup(),
                        {'budget': None, 'trained': {}, 'restarts': {}, 'evaluated': {}})
  parts = n2_parts(state_dir, scratch)
  geometries = len(parts) - 1
  if state['budget'] is None:
    state['budget'] = n2_budget(scratch)
  ms = probe(scratch, REFERENCES['n2'][1])
  state['probes'].append({'ms_per_step': ms, **artifacts.meta()})
  separate_left = any(name != 'surface' and name not in state['evaluated']
                      for name, _, _ in parts)
  needs = max(separate_seconds(state['budget']['separate'], ms) + N2_EVAL_S
              if separate_left else 0.0, geometries * N2_EVAL_S) + MARGIN
  if needs > allowance:
    raise SystemExit(f'--allowance {allowance:.0f}: a separate run and its evaluation, or the '
                     f'evaluation of the surface, need {needs:.0f} s of this sitting')
  if 'reference' not in state:
    state['reference'] = reference_energies('n2')
    bonds = [np.linalg.norm(p[1] - p[0]) for p in geometries_of(REFERENCES['n2'][0])]
    state['reference_check'] = reference_energies(
        'n2', N2_CHECK, [g for g, r in enumerate(bonds) if r <= N2_CHECK_BOND])
  save_json(path, state)
  for name, run, extra in parts:
    if name in state['evaluated']:
      continue
    pieces = state['trained'].get(name)
    if name != 'surface' and pieces and not os.path.isdir(run):
      pieces[-1]['lost'] = True  # Trained, but its sitting ended before its evaluation.
    if name == 'surface' and state['budget']['surface'] is None:
      fixed = surface_budget(scratch, state['budget']['separate'], geometries)
      state['budget'].update(surface=fixed.pop('steps'), surface_probes=fixed)
      save_json(path, state)
    if not train_part(state, path, name, run, extra, ms, left):
      return None  # The next sitting continues.
    if name == 'surface' and left() < geometries * N2_EVAL_S:
      return None  # Its evaluation in the next sitting.
    evaluate_part(state, path, name, run)
    if name != 'surface' and not keep:
      shutil.rmtree(run, ignore_errors=True)
  return n2_entry(state)  # The caller appends it, then removes `state_dir`.


def n2_probes(scratch: str, parts: tuple) -> dict:
  """{part: [ms per step, ...]}: N2_BUDGET_REPEATS probes of N2_BUDGET_STEPS steps of the
  config of each of `parts` ('separate': configs/n2.py, 'surface': configs/n2_pes.py), the
  configs alternated."""
  configs = {'separate': REFERENCES['n2'][1], 'surface': REFERENCES['n2'][0]}
  times = {part: [] for part in parts}
  for _ in range(N2_BUDGET_REPEATS):
    for part in parts:
      times[part].append(probe(scratch, configs[part], N2_BUDGET_STEPS))
  return times


def n2_budget(scratch: str) -> dict:
  """Row n2's budget of a separate run, fixed at its first sitting: the steps N2_SECONDS
  give configs/n2.py at its median step time (n2_probes). The surface's is set when the
  surface begins (surface_budget)."""
  times = n2_probes(scratch, ('separate',))
  return {'separate': int(round(N2_SECONDS * 1e3 / float(np.median(times['separate'])))),
          'surface': None, 'ms_per_step': times, 'probe_steps': N2_BUDGET_STEPS,
          **artifacts.meta()}


def surface_budget(scratch: str, separate: int, geometries: int) -> dict:
  """The surface's budget, set when it begins: `geometries` times a separate run's
  `separate` steps, scaled by the ratio of the two configs' median step times then
  (n2_probes, alternated), so that it trains for the time the separate runs had at the
  step of the code it trains with (a step over the geometries' nuclei may cost more than
  one geometry's): {'steps', 'ms_per_step', 'probe_steps', and when and where}."""
  times = n2_probes(scratch, ('separate', 'surface'))
  ms = {part: float(np.median(t)) for part, t in times.items()}
  return {'steps': int(round(geometries * separate * ms['separate'] / ms['surface'])),
          'ms_per_step': times, 'probe_steps': N2_BUDGET_STEPS, **artifacts.meta()}


def separate_seconds(steps: int, ms: float) -> float:
  """s a separate run of `steps` steps is given room for at `ms` per step."""
  return N2_START_S + N2_SLACK * steps * ms / 1e3


def train_part(state: dict, path: str, name: str, run: str, extra: list, ms: float,
               left) -> bool:
  """Trains part `name` of row n2 to its budget of steps (n2_budget); True once it has
  them all. A separate run trains whole within
  one sitting: it starts only where separate_seconds at this sitting's `ms` and its
  evaluation's time are left, and one cut short (by the sitting's end, a failure, or its
  scratch lost before its evaluation) starts again from nothing at the next sitting. The
  surface trains in pieces, each resuming the last from its checkpoint until the sitting's
  time is spent; each piece records its wall time, the steps it reached and its median
  step time."""
  surface = name == 'surface'
  target = state['budget']['surface' if surface else 'separate']
  pieces = state['trained'].setdefault(name, [])
  if pieces and 'running' in pieces[-1]:  # This script was stopped inside that training.
    piece = pieces[-1]
    piece['interrupted'] = bool(piece.pop('running'))
    piece['to_step'] = trained_steps(run)
  if not surface and pieces and (pieces[-1].get('to_step', 0) < target or 'lost' in pieces[-1]):
    restarts = state['restarts'][name] = state['restarts'].get(name, 0) + 1
    if restarts > RESTARTS:
      raise SystemExit(f'row n2: the {name} training was cut short {restarts} times')
    state.setdefault('abandoned', {}).setdefault(name, []).extend(pieces)
    pieces.clear()
  if not surface and not pieces:
    shutil.rmtree(run, ignore_errors=True)  # A separate run starts from nothing.
  config = REFERENCES['n2'][0 if surface else 1]
  while (reached := trained_steps(run) if surface else
         (pieces[-1]['to_step'] if pieces else 0)) < target:
    if surface and left() < N2_MIN_CHUNK:
      return False
    if not surface and separate_seconds(target, ms) + N2_EVAL_S > left():
      return False
    seconds = left() if surface else left() - N2_EVAL_S
    pieces.append({'sitting': len(state['probes']) - 1, 'from_step': reached,
                   'started': time.time(), 'running': True})
    save_json(path, state)
    try:
      wall = _run(_train(config, run, target, *extra), seconds)
    finally:  # Also when the sitting ends inside it (SIGTERM or an interrupt).
      piece = pieces[-1]
      piece['wall_s'] = time.time() - piece['started']  # `wall` replaces it if it returns.
      piece['ms_per_step'] = step_ms(run, reached)
      if surface:  # What is committed stays small.
        carry(run)
      save_json(path, state)
    del piece['running']
    piece.update(wall_s=wall, to_step=trained_steps(run))
    save_json(path, state)
    if piece['to_step'] < target and (not surface or piece['to_step'] <= reached):
      if wall >= seconds - 1:
        return False  # The sitting's time ended it: a separate run starts again.
      raise RuntimeError(f'the {name} training stopped at step {piece["to_step"]} of '
                         f'{target} after {wall:.0f} s: see {run}')
  return True


def trained_steps(run: str) -> int:
  """The steps the trainings in `run` have done: the newest checkpoint's, or where the last
  training ended whole with a final state not kept (not finite), its last step."""
  return max(trained_to(run), ran_to(run))


def step_ms(run: str, after: int) -> Optional[float]:
  """The median ms per step of the steps in `run`'s stats.csv after step `after`, leaving
  out the first tenth of them (the start of a process) and rows that do not parse (a last
  row cut short by a training killed while writing it); None without any."""
  times = []
  for r in race._rows(os.path.join(run, 'stats.csv')):
    try:
      at, ms = int(r['step']), float(r['step_time_ms'])
    except (TypeError, ValueError):
      continue
    if at >= after:
      times.append(ms)
  times = times[len(times) // 10:]
  return float(np.median(times)) if times else None


def evaluate_part(state: dict, path: str, name: str, run: str) -> None:
  """Evaluates part `name` of row n2 (the surface at the separate runs' walkers per
  geometry) and records its energies."""
  walkers = race.cli.load_config_file(os.path.join(REPO, REFERENCES['n2'][1])).batch_size
  _run(n2_evaluate(run, walkers if name == 'surface' else None))
  rows = (_json(run, 'pes.json')['geometries'] if name == 'surface'
          else [_json(run, 'eval.json')])
  state['evaluated'][name] = {'energies': [r['energy'] for r in rows],
                              'errors': [r['error'] for r in rows]}
  save_json(path, state)


def n2_evaluate(run: str, walkers=None) -> list:
  return [*_evaluate(run, walkers, N2_SWEEPS), f'--burn_in={N2_BURN_IN}']


def n2_entry(state: dict) -> dict:
  """Row n2's artifact entry from its finished progress."""
  separate = [v for k, v in sorted(state['evaluated'].items()) if k.startswith('separate_')]
  surface, single = REFERENCES['n2'][:2]
  budget = state['budget']
  return {'row': 'n2', **state['setup'], 'steps': budget, 'goal_fraction': N2_GOAL,
          'reference': state['reference'], 'reference_check': state.get('reference_check'),
          'probes': state['probes'], 'trained': state['trained'],
          'restarts': state['restarts'], 'abandoned': state.get('abandoned', {}),
          'surface': state['evaluated']['surface'],
          'separate': {'energies': [e['energies'][0] for e in separate],
                       'errors': [e['errors'][0] for e in separate]},
          'commands': [' '.join(probe_command('<DIR>', single)),
                       ' '.join(_train(surface, '<DIR>', budget['surface'])),
                       ' '.join(_train(single, '<DIR_g>', budget['separate'],
                                       '--config.system.molecule=<g>',
                                       '--config.system.units=bohr')),
                       ' '.join(n2_evaluate('<DIR>', '<walkers>')),
                       ' '.join(n2_evaluate('<DIR_g>'))]}


def training_seconds(e: dict, part: str) -> float:
  """The wall seconds of row n2's entry `e` spent training `part` (or, `part` 'separate',
  every separate run), over every piece and sitting, with the pieces stopped from outside
  (timed until this script was stopped with them; 0 for one whose process was killed
  before it could record that) and a separate run's attempts cut short and begun again."""
  return sum(p.get('wall_s', 0.0)
             for kept in (e['trained'], e.get('abandoned', {}))
             for name, pieces in kept.items()
             if name == part or (part == 'separate' and name.startswith('separate_'))
             for p in pieces)


def mean_error(side: dict, reference: list) -> tuple:
  """(mean over the geometries of energy - reference, its standard error), Ha."""
  e, s = np.asarray(side['energies']), np.asarray(side['errors'])
  return float(np.mean(e - np.asarray(reference))), float(np.sqrt(np.sum(s ** 2)) / len(e))


def n2_verdict(e: dict) -> str:
  """Row n2 judged: 'met' when the surface's mean error plus its standard error is at most
  the goal fraction of the separate runs' mean error; undetermined where an error against
  the reference is not positive (the reference is not exact: no fraction of it means
  anything then)."""
  (surface, s_err), (separate, _) = (mean_error(e[k], e['reference']['energies'])
                                     for k in ('surface', 'separate'))
  if separate <= 0 or surface < 0:
    return (f'undetermined: mean errors {1e3 * surface:+.1f} (surface) and '
            f'{1e3 * separate:+.1f} mHa (separate) against a reference that is not exact')
  if surface + s_err <= e['goal_fraction'] * separate:
    return 'met'
  return (f"missed: the surface's mean error {1e3 * surface:+.1f} ± {1e3 * s_err:.1f} mHa is "
          f"not below {e['goal_fraction']:g} of the separate runs' {1e3 * separate:+.1f} mHa "
          'by its error bar')


def n2_line(e: dict, judged: str) -> str:
  """Row n2's line of the table: both ways' mean errors, and their difference, which needs
  no reference."""
  (surface, s_err), (separate, p_err) = (mean_error(e[k], e['reference']['energies'])
                                         for k in ('surface', 'separate'))
  g = len(e['separate']['energies'])
  difference = np.mean(np.subtract(e['surface']['energies'], e['separate']['energies']))
  d_err = math.hypot(s_err, p_err)
  check, checked = e.get('reference_check'), ''
  if check and check['geometries']:
    bonds = [np.linalg.norm(np.subtract(*e['positions_bohr'][i][:2])) for i in check['geometries']]
    apart = max(abs(e['reference']['energies'][i] - c)
                for i, c in zip(check['geometries'], check['energies']))
    checked = (f'; against {check["name"]} at {", ".join(f"{b:.2f}" for b in bonds)} bohr: '
               f'within {1e3 * apart:.1f} mHa')
  ratio = f'{surface / separate:.2f}' if separate > 0 else '–'
  steps, each = e['steps'], e['seconds_each']
  return (f'| n2 | {g} geometries, {e["reference"]["name"]}, calibrated{checked} | surface '
          f'{steps["surface"]} steps, separate {g} × {steps["separate"]} ({each:.0f} s each at '
          f'the first sitting\'s step time, the surface as long at its own): surface mean '
          f'error {1e3 * surface:+.1f} ± {1e3 * s_err:.1f} mHa, separate {1e3 * separate:+.1f} '
          f'± {1e3 * p_err:.1f} mHa; ratio {ratio}; surface − separate {1e3 * difference:+.1f} '
          f'± {1e3 * d_err:.1f} mHa; trained in {training_seconds(e, "surface"):.0f} s against '
          f'{training_seconds(e, "separate"):.0f} s | mean error ≤ {e["goal_fraction"]:g} of '
          f'the separate runs\' | {judged} |')


def water(r: float, theta: float) -> str:
  """H2O with O at the origin, bonds of `r` angstrom at `theta` degrees (molecule string)."""
  half = math.radians(theta) / 2
  x, z = r * math.sin(half), r * math.cos(half)
  return f'O 0 0 0; H {x:.8f} 0 {z:.8f}; H {-x:.8f} 0 {z:.8f}'


def run_h2o_row(row: str, work: str) -> dict:
  run, start = os.path.join(work, 'h2o'), H2O_STARTS[row]
  cmd = _train('configs/ne.py', run, 100000, '--config.system.atom=',
               f'--config.system.molecule={water(*start)}',
               '--config.system.units=angstrom', '--config.system.name=H2O',
               '--config.system.relax=True')
  train_s = _run(cmd, H2O_SECONDS)
  relax = _json(run, 'relax.json')
  return {'row': row, 'start': list(start), 'budget_s': H2O_SECONDS, 'train_s': train_s,
          'relax': {k: relax[k] for k in ('final', 'converged', 'stopped_by',
                                          'stopped_at_step', 'steps', 'moves', 'criterion')},
          'path': path_summary(relax['path']), 'commands': [' '.join(cmd)]}


def path_summary(path: list) -> dict:
  """What relax.json's path of water shows: the range of the O-H bonds (angstrom) and of the
  angle (degrees) over the geometries taken, and the median (and 90th percentile) standard
  error and the median magnitude of the moves' mean force components (Ha/bohr), the
  components the optimiser moves (in the molecular plane)."""
  bonds, angles, errors, forces = [], [], [], []
  for entry in path:
    o, h1, h2 = np.asarray(entry['positions_bohr'])
    r1, r2 = np.linalg.norm(h1 - o), np.linalg.norm(h2 - o)
    bonds += [r1 / BOHR_PER_ANGSTROM, r2 / BOHR_PER_ANGSTROM]
    angles.append(math.degrees(math.acos(np.dot(h1 - o, h2 - o) / (r1 * r2))))
    if entry.get('force_errors_ha_per_bohr') is not None:  # The newest: not yet measured.
      errors += list(np.asarray(entry['force_errors_ha_per_bohr'])[:, [0, 2]].ravel())
      forces += list(np.abs(np.asarray(entry['forces_ha_per_bohr'])[:, [0, 2]]).ravel())
  return {'bond_range_angstrom': [float(min(bonds)), float(max(bonds))],
          'angle_range_degrees': [min(angles), max(angles)],
          'force_error_median': float(np.median(errors)),
          'force_error_p90': float(np.percentile(errors, 90)),
          'force_median': float(np.median(forces))}


def water_geometry(final: dict) -> dict:
  """r (angstrom, the mean of the two O-H bonds) and theta (degrees) with errors, from
  relax.json's final geometry: theta from the H-H distance, 2 asin(d_HH / 2 r)."""
  d = {tuple(x['atoms']): (x['distance_bohr'], x['error_bohr']) for x in final['distances']}
  (oh1, e1), (oh2, e2), (hh, ehh) = d[(0, 1)], d[(0, 2)], d[(1, 2)]
  r, er = (oh1 + oh2) / 2, math.hypot(e1, e2) / 2
  theta = 2 * math.asin(hh / (2 * r))
  # d theta = (d hh - hh / r dr) / (r cos(theta / 2)).
  et = math.hypot(ehh, hh / r * er) / (r * math.cos(theta / 2))
  return {'r': r / BOHR_PER_ANGSTROM, 'r_error': er / BOHR_PER_ANGSTROM,
          'theta': math.degrees(theta), 'theta_error': math.degrees(et)}


def _accuracy_misses(e: dict) -> list:
  """What a ladder row's recorded run missed in accuracy: the surface, or separate runs,
  short of the tolerance at some geometry at the top rung."""
  misses = []
  if not e['surface']['reached']:
    misses.append(f'the surface did not reach {1e3 * e["tolerance_ha"]:g} mHa at every '
                  f'geometry in {RUNGS[-1]} iterations')
  late = sum(not s['reached'] for s in e['separate'])
  if late:
    misses.append(f'{late} separate runs did not reach it in {RUNGS[-1]} iterations (their '
                  'time is a lower bound)')
  return misses


def source_of(e: dict, path: str = JSON) -> Optional[dict]:
  """For a one-sitting row's entry, the recorded run of the ladder row it timed again (its
  data, matched by row, date and commit) in the artifact at `path`; None for another row
  or where the artifact does not hold it."""
  if e['row'] not in ONE_SITTING:
    return None
  return next((run.data for run in artifacts.read(path) if run.data.get('row') == e['of']
               and run.meta.get('date') == e['of_date']
               and run.meta.get('commit') == e['of_commit']), None)


def verdict(e: dict, source: Optional[dict] = None) -> str:
  """'met' or 'missed: <figures>' for a row's recorded run. A one-sitting row is judged on
  its time ratio and on the accuracy its `source` (the recorded run of the row it timed
  again, source_of) reached; without the source, its accuracy is a miss, not judged."""
  if e['row'] in H2O_STARTS:
    w, misses = water_geometry(e['relax']['final']), []
    if abs(w['r'] - H2O_R) > H2O_GOAL[0]:
      misses.append(f'r {w["r"]:.4f} angstrom, {abs(w["r"] - H2O_R):.4f} from {H2O_R}')
    if abs(w['theta'] - H2O_THETA) > H2O_GOAL[1]:
      misses.append(f'theta {w["theta"]:.2f} deg, {abs(w["theta"] - H2O_THETA):.2f} from '
                    f'{H2O_THETA}')
    if not e['relax']['converged']:
      misses.append(f'the stopping criterion was not met in {e["train_s"]:.0f} s')
    return 'met' if not misses else 'missed: ' + '; '.join(misses)
  if e['row'] == 'n2':
    return n2_verdict(e)
  if e['row'] in ONE_SITTING:
    ratio = e['surface_s'] / sum(e['separate_s'])
    misses = ([] if ratio <= e['goal_ratio'] else
              [f'time ratio {ratio:.2f} > {e["goal_ratio"]:.2f} in one sitting'])
    if source is None:
      misses.append(f'accuracy not judged: row {e["of"]}\'s run of '
                    f'{(e["of_date"] or "?")[:10]} is not in the artifact')
    else:
      misses += [f'row {e["of"]}: {m}' for m in _accuracy_misses(source)]
    return 'met' if not misses else 'missed: ' + '; '.join(misses)
  misses = _accuracy_misses(e)
  ratio = e['surface']['train_s'] / sum(s['train_s'] for s in e['separate'])
  if ratio > e['goal_ratio']:
    misses.append(f'time ratio {ratio:.2f} > {e["goal_ratio"]:.2f}')
  return 'met' if not misses else 'missed: ' + '; '.join(misses)


def row_line(e: dict, source: Optional[dict] = None) -> str:
  """A row's table line; `source`: for a one-sitting row, what source_of gives (verdict)."""
  judged = verdict(e, source).replace('|', r'\|')
  if e['row'] in H2O_STARTS:
    w = water_geometry(e['relax']['final'])
    dr, dt = e['start'][0] - H2O_R, e['start'][1] - H2O_THETA
    return (f'| {e["row"]} | relaxation from r {dr:+.2f} Å, θ {dt:+.0f}° | r {w["r"]:.4f} ± '
            f'{w["r_error"]:.4f} Å, θ {w["theta"]:.2f} ± {w["theta_error"]:.2f}° in '
            f'{e["train_s"]:.0f} s ({e["relax"]["moves"]} moves) | within {H2O_GOAL[0]} Å and '
            f'{H2O_GOAL[1]}° of {H2O_R} Å, {H2O_THETA}° in ≤ {H2O_SECONDS / 60:.0f} min | '
            f'{judged} |')
  if e['row'] == 'n2':
    return n2_line(e, judged)
  if e['row'] in ONE_SITTING:
    separate_s = sum(e['separate_s'])
    return (f'| {e["row"]} | row {e["of"]}\'s climb ({(e["of_date"] or "")[:10]}) trained again '
            f'in one sitting, no evaluations | surface {e["surface_s"]:.0f} s '
            f'({e["climbed"]["surface"]} iterations) against separate {separate_s:.0f} s: '
            f'ratio {e["surface_s"] / separate_s:.2f} | ratio ≤ {e["goal_ratio"]:.2f} | '
            f'{judged} |')
  ref = np.asarray(e['reference']['energies'])
  last = e['surface']['rungs'][-1]
  worst = 1e3 * np.max(np.abs(np.asarray(last['energies']) - ref))
  separate_s = sum(s['train_s'] for s in e['separate'])
  return (f'| {e["row"]} | {len(ref)} geometries, {e["reference"]["name"]} | surface '
          f'{e["surface"]["train_s"]:.0f} s ({last["iterations"]} iterations, worst '
          f'{worst:.2f} mHa) against separate {separate_s:.0f} s: ratio '
          f'{e["surface"]["train_s"] / separate_s:.2f} | every geometry within '
          f'{1e3 * e["tolerance_ha"]:g} mHa, ratio ≤ {e["goal_ratio"]:.2f} | {judged} |')


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's surface table: the newest run of each row, judged now, and the rows
  still carried over sittings, as far as they have come."""
  runs, carried = artifacts.newest_runs(path, ROWS), in_progress(os.path.dirname(path))
  if not runs and not carried:
    return ('Not measured yet: the table appears when `python -m scripts.pes_goals` has run '
            '(rows h2, lih, h2o, h2o_low, and n2 over sittings).')
  head = ('row', 'what', 'measured', 'goal', 'verdict')
  body = artifacts.table(head, [row_line(r.data, source_of(r.data, path)) for r in runs]
                         + [progress_line(p) for p in carried.values()])
  notes = [artifacts.provenance(path, runs)] if runs else []
  notes += [progress_provenance(p) for p in carried.values()]
  return body + '\n\n' + '\n\n'.join(notes)


def state_of(row: str, base: str = os.path.dirname(JSON)) -> str:
  """Where row `row` is carried between sittings by default (committed after each): beside
  the artifact, in `base`."""
  return os.path.join(base, f'pes_{row}')


def in_progress(base: str = os.path.dirname(JSON), rows=('n2',)) -> dict:
  """{row: its progress.json} of each of `rows` carried over sittings in its default state
  directory in `base` (state_of; a row carried elsewhere with --state is not seen) and not
  finished (its state directory is removed once the row's entry is in the artifact)."""
  found = {}
  for row in rows:
    path = os.path.join(state_of(row, base), 'progress.json')
    if os.path.exists(path):
      found[row] = {'row': row, 'path': path, **_json(state_of(row, base), 'progress.json')}
  return found


def progress_line(p: dict) -> str:
  """Row n2's table line while it is carried over sittings (`p`, its progress.json): each
  separate run evaluated so far against the reference, and how far the surface has
  trained; judged only once every part is done."""
  separate = sorted((int(k.split('_')[1]), v) for k, v in p['evaluated'].items()
                    if k.startswith('separate_'))
  reference = p['reference']['energies']
  errors = ', '.join(f'{1e3 * (v["energies"][0] - reference[g]):+.1f} ± '
                     f'{1e3 * v["errors"][0]:.1f}' for g, v in separate)
  g, budget = len(p['setup']['positions_bohr']), p['budget']
  pieces = p['trained'].get('surface', [])
  surface = ('the surface not begun' if not pieces else
             f'the surface trained {max(q.get("to_step", 0) for q in pieces)} of '
             f'{budget["surface"]} steps')
  evaluated = f' (errors {errors} mHa)' if separate else ''
  return (f'| n2 | {g} geometries, {p["reference"]["name"]} | in progress after '
          f'{len(p["probes"])} sitting{"s" if len(p["probes"]) != 1 else ""}: '
          f'{len(separate)} of {g} separate runs of '
          f'{budget["separate"]} steps trained and evaluated{evaluated}; {surface} | mean '
          f'error ≤ {N2_GOAL:g} of the separate runs\' | not yet judged |')


def progress_provenance(p: dict) -> str:
  """The note under the table for a row in progress: its state file and last sitting."""
  last, n = p['probes'][-1], len(p['probes'])
  commit = (last.get('commit') or '')[:7] or 'not recorded'
  return (f'*Row {p["row"]} in progress: from `{os.path.relpath(p["path"], REPO)}`, '
          f'{n} sitting{"s" if n != 1 else ""}, the last {last.get("date", "")[:10]}, '
          f'{artifacts.machine_text(last.get("machine"))}, commit {commit}.*')


# Rows carried over sittings, by the function that continues each.
CARRIED = {'h2': lambda *a, **k: run_ladder_row('h2', *a, **k),
           'lih': lambda *a, **k: run_ladder_row('lih', *a, **k), 'n2': run_n2_row}
TABLES = {'pes_goals': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  parser, args, rows = artifacts.row_arguments(__doc__, ROWS, JSON, extra=(
      ('--allowance', {'type': float, 'default': 5400.0, 'metavar': 'SECONDS',
                       'help': "rows h2, lih, n2: each one's seconds this sitting (default "
                               '5400)'}),
      ('--state', {'metavar': 'DIR',
                   'help': 'rows h2, lih, n2: where the row is carried between sittings '
                           '(default benchmarks/pes_<row>, committed after each sitting)'}),),
      # Rows n2 and the one-sitting rows only when asked for: each takes a sitting or more.
      default=[r for r in ROWS if r != 'n2' and r not in ONE_SITTING])
  carried = [r for r in rows if r in CARRIED]
  if args.state and len(carried) > 1:
    parser.error(f'--state names one row\'s state; {", ".join(carried)} each have their own')
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # Its trainings stopped with it.
  for row in rows:
    run_meta = artifacts.meta()
    if row in CARRIED:
      state = os.path.abspath(args.state or state_of(row))
      with tempfile.TemporaryDirectory() as tmp:
        scratch = os.path.abspath(os.path.join(args.keep or tmp, row))
        entry = CARRIED[row](state, scratch, args.allowance, keep=bool(args.keep))
      if entry is None:
        print(f'row {row} continues at the next sitting (the same command); commit its '
              f'state now: python -m scripts.render_docs && git add -A '
              f'{os.path.relpath(state, REPO)} ACCURACY.md', flush=True)
        continue
      artifacts.append(args.json, entry, run_meta)
      shutil.rmtree(state)  # Its state has served.
      print(row_line(entry), flush=True)
      continue
    if row in ONE_SITTING:
      source = artifacts.newest_runs(args.json, [ONE_SITTING[row]])
      if not source:
        parser.error(f'row {row} times row {ONE_SITTING[row]}\'s recorded climb; '
                     f'{args.json} has none yet')
      with tempfile.TemporaryDirectory() as tmp:
        entry = one_sitting_row(ONE_SITTING[row], source[0],
                                os.path.abspath(os.path.join(args.keep or tmp, row)))
      artifacts.append(args.json, entry, run_meta)
      print(row_line(entry, source[0].data), flush=True)
      continue
    with tempfile.TemporaryDirectory() as tmp:
      entry = run_h2o_row(row, os.path.join(args.keep or tmp, row))
    artifacts.append(args.json, entry, run_meta)
    print(row_line(entry), flush=True)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
