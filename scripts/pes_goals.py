"""Potential energy surface goal table: one network trained over a set of geometries against
separate runs at each geometry, to the same accuracy, and geometry optimisation; every goal
judged met or missed from the measured numbers when the table is rendered.

  python -m scripts.pes_goals --rows h2,lih,h2o [--keep DIR]
  python -m scripts.render_docs                  # put the table into ACCURACY.md

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
at 3.015 bohr (configs/lih.py), the offset recorded.

Row h2o. A relaxation (system.relax, stages/relax.py) of water with the network of
configs/ne.py, started 0.05 angstrom and 5 degrees away from the experimental equilibrium
r_e = 0.9572 angstrom, theta_e = 104.52 degrees (Hoy and Bunker, J. Mol. Spectrosc. 74, 1
(1979)), stopped by SIGTERM at 60 minutes; judged from relax.json's final geometry.

Each row's run is appended to benchmarks/pes_goals.json (scripts/artifacts.py: every run
kept with its date, machine, versions, commit and command line); TABLES renders the newest
run of each row into ACCURACY.md.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time

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
LIH_EXACT, LIH_BOND = -8.070548, 3.015  # Ha, bohr: the calibration point (configs/lih.py).
H2O_R, H2O_THETA = 0.9572, 104.52  # angstrom, degrees: experiment (Hoy and Bunker 1979).
H2O_START = (H2O_R + 0.05, H2O_THETA + 5.0)
H2O_SECONDS = 3600.0
H2O_GOAL = (0.005, 0.5)  # angstrom, degrees.
ROWS = (*SURFACES, 'h2o')


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


def _evaluate(run: str, walkers=None) -> list:
  return [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
          f'--steps={EVAL_STEPS}', *([f'--walkers={walkers}'] if walkers else [])]


def geometries_of(config: str) -> np.ndarray:
  """(G, M, 3) bohr: the nuclei of each geometry of the surface config `config`."""
  cfg = race.cli.load_config_file(os.path.join(REPO, config))
  return np.asarray(race.systems.make_system(cfg.system).geometries.positions)


def molecule_text(symbols, positions) -> str:
  return '; '.join(f'{s} ' + ' '.join(f'{c:.10f}' for c in p) for s, p in zip(symbols, positions))


def ladder(config: str, run: str, reference: np.ndarray, tolerance: float, walkers: int,
           *overrides: str) -> dict:
  """Trains `config` in `run` rung by rung until every evaluated energy (one, or one per
  geometry of a surface, each of `walkers`) lies within `tolerance` of `reference` (G,);
  each rung's figures."""
  rungs, train_s = [], 0.0
  for iterations in RUNGS:
    train_s += _run(_train(config, run, iterations, *overrides))
    _run(_evaluate(run, walkers))
    if os.path.exists(os.path.join(run, 'pes.json')):
      rows = _json(run, 'pes.json')['geometries']
      energies, errors = [r['energy'] for r in rows], [r['error'] for r in rows]
    else:
      e = _json(run, 'eval.json')
      energies, errors = [e['energy']], [e['error']]
    within = bool(np.all(np.abs(np.asarray(energies) - reference) <= tolerance))
    rungs.append({'iterations': iterations, 'train_s': train_s, 'energies': energies,
                  'errors': errors, 'within': within})
    if within:
      break
  return {'rungs': rungs, 'reached': rungs[-1]['within'], 'train_s': train_s}


def reference_energies(row: str) -> dict:
  """The row's reference at each geometry (Ha), with its calibration where it has one."""
  from ferminet_fast.physics import references
  from ferminet_fast.physics import systems
  surface, _, _, name, _ = SURFACES[row]
  cfg = race.cli.load_config_file(os.path.join(REPO, surface))
  system = systems.make_system(cfg.system)
  chosen = references.parse(name)
  energies = references.energies(system, chosen)
  out = {'name': name, 'raw': energies.tolist(), 'offset': 0.0}
  if row == 'lih':
    import dataclasses
    at = dataclasses.replace(system, positions=np.array([[0, 0, 0], [0, 0, LIH_BOND]], float),
                             surface=None)
    out['offset'] = LIH_EXACT - references.energy(at, chosen)
    out['calibration'] = f'shifted to the exact {LIH_EXACT} Ha at {LIH_BOND} bohr'
  out['energies'] = (energies + out['offset']).tolist()
  return out


def run_surface_row(row: str, work: str) -> dict:
  """The h2 or lih row: the surface ladder and the separate ladders, in `work`."""
  surface, single, tolerance, _, goal = SURFACES[row]
  cfg = race.cli.load_config_file(os.path.join(REPO, surface))
  symbols = race.systems.make_system(cfg.system).symbols
  positions = geometries_of(surface)
  reference = reference_energies(row)
  ref = np.asarray(reference['energies'])
  walkers = race.cli.load_config_file(os.path.join(REPO, single)).batch_size
  together = ladder(surface, os.path.join(work, 'surface'), ref, tolerance, walkers)
  separate = []
  for g, nuclei in enumerate(positions):
    separate.append(ladder(single, os.path.join(work, f'geometry_{g}'), ref[g:g + 1],
                           tolerance, walkers,
                           f'--config.system.molecule={molecule_text(symbols, nuclei)}',
                           '--config.system.units=bohr'))
  commands = [' '.join(_train(surface, '<DIR>', RUNGS[0])),
              ' '.join(_evaluate('<DIR>', walkers)),
              ' '.join(_train(single, '<DIR_g>', RUNGS[0], '--config.system.molecule=<g>',
                              '--config.system.units=bohr'))]
  return {'row': row, 'surface_config': surface, 'single_config': single, 'commands': commands,
          'tolerance_ha': tolerance, 'goal_ratio': goal, 'rungs': list(RUNGS),
          'eval_steps': EVAL_STEPS, 'eval_walkers': walkers,
          'positions_bohr': positions.tolist(),
          'reference': reference, 'surface': together, 'separate': separate}


def water(r: float, theta: float) -> str:
  """H2O with O at the origin, bonds of `r` angstrom at `theta` degrees (molecule string)."""
  half = math.radians(theta) / 2
  x, z = r * math.sin(half), r * math.cos(half)
  return f'O 0 0 0; H {x:.8f} 0 {z:.8f}; H {-x:.8f} 0 {z:.8f}'


def run_h2o_row(work: str) -> dict:
  run = os.path.join(work, 'h2o')
  cmd = _train('configs/ne.py', run, 100000, '--config.system.atom=',
               f'--config.system.molecule={water(*H2O_START)}',
               '--config.system.units=angstrom', '--config.system.name=H2O',
               '--config.system.relax=True')
  train_s = _run(cmd, H2O_SECONDS)
  relax = _json(run, 'relax.json')
  return {'row': 'h2o', 'start': list(H2O_START), 'budget_s': H2O_SECONDS, 'train_s': train_s,
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


def verdict(e: dict) -> str:
  """'met' or 'missed: <figures>' for a row's recorded run."""
  if e['row'] == 'h2o':
    w, misses = water_geometry(e['relax']['final']), []
    if abs(w['r'] - H2O_R) > H2O_GOAL[0]:
      misses.append(f'r {w["r"]:.4f} angstrom, {abs(w["r"] - H2O_R):.4f} from {H2O_R}')
    if abs(w['theta'] - H2O_THETA) > H2O_GOAL[1]:
      misses.append(f'theta {w["theta"]:.2f} deg, {abs(w["theta"] - H2O_THETA):.2f} from '
                    f'{H2O_THETA}')
    if not e['relax']['converged']:
      misses.append(f'the stopping criterion was not met in {e["train_s"]:.0f} s')
    return 'met' if not misses else 'missed: ' + '; '.join(misses)
  misses = []
  if not e['surface']['reached']:
    misses.append(f'the surface did not reach {1e3 * e["tolerance_ha"]:g} mHa at every '
                  f'geometry in {RUNGS[-1]} iterations')
  late = sum(not s['reached'] for s in e['separate'])
  if late:
    misses.append(f'{late} separate runs did not reach it in {RUNGS[-1]} iterations (their '
                  'time is a lower bound)')
  ratio = e['surface']['train_s'] / sum(s['train_s'] for s in e['separate'])
  if ratio > e['goal_ratio']:
    misses.append(f'time ratio {ratio:.2f} > {e["goal_ratio"]:.2f}')
  return 'met' if not misses else 'missed: ' + '; '.join(misses)


def row_line(e: dict) -> str:
  judged = verdict(e).replace('|', r'\|')
  if e['row'] == 'h2o':
    w = water_geometry(e['relax']['final'])
    return (f'| h2o | relaxation from r + 0.05 Å, θ + 5° | r {w["r"]:.4f} ± {w["r_error"]:.4f} Å, '
            f'θ {w["theta"]:.2f} ± {w["theta_error"]:.2f}° in {e["train_s"]:.0f} s '
            f'({e["relax"]["moves"]} moves) | within {H2O_GOAL[0]} Å and {H2O_GOAL[1]}° of '
            f'{H2O_R} Å, {H2O_THETA}° in ≤ {H2O_SECONDS / 60:.0f} min | {judged} |')
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
  """ACCURACY.md's surface table: the newest run of each row, judged now."""
  runs = artifacts.newest_runs(path, ROWS)
  if not runs:
    return ('Not measured yet: the table appears when `python -m scripts.pes_goals` has run '
            '(rows h2, lih, h2o).')
  head = ('row', 'what', 'measured', 'goal', 'verdict')
  body = artifacts.table(head, [row_line(r.data) for r in runs])
  return body + '\n\n' + artifacts.provenance(path, runs)


TABLES = {'pes_goals': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  _, args, rows = artifacts.row_arguments(__doc__, ROWS, JSON)
  for row in rows:
    run_meta = artifacts.meta()
    with tempfile.TemporaryDirectory() as tmp:
      work = os.path.join(args.keep or tmp, row)
      entry = run_h2o_row(work) if row == 'h2o' else run_surface_row(row, work)
    artifacts.append(args.json, entry, run_meta)
    print(row_line(entry), flush=True)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
