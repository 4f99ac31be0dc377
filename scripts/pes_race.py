"""Surfaces against DeepQMC 1.3.0's transferable training: one network over the same set of
geometries (H2's 12 bond lengths of configs/h2_pes.py, LiH's 10 of configs/lih_pes.py),
trained by each code as one whole process for the same wall time, then every geometry
evaluated the same way, judged by the mean absolute error against the row's pyscf reference
(scripts/pes_goals.py's).

  python -m scripts.pes_race --deepqmc DIR [--rows h2,lih] [--seconds 1800] [--keep DIR]
                             [--peer KEY=VALUE ...] [--sweeps 200] [--burn-in 50]
  python -m scripts.pes_race --deepqmc DIR --rows h2 --reread KEPT   # a kept race read again
  python -m scripts.render_docs                  # put the table into ACCURACY.md

DIR is `bash ../shared/anchors/setup-deepqmc.sh DIR`. DeepQMC runs `task=train_transferable
ansatz=transpsiformer` (its graph-conditioned TransPsiformer) with the settings of PEER
(`--peer KEY=VALUE` changes one, recorded in the artifact):
Hartree-Fock pretraining in sto-6g (without it, its first step on H2 gave NaN) and a
checkpoint every CHECKPOINT_STEPS steps, stopped by SIGTERM at the budget and evaluated from
its newest checkpoint written within the budget; ours trains the surface config and is
stopped by SIGTERM at the budget (it checkpoints then). Both codes are then
evaluated the same way: at each geometry WALKERS walkers, `--burn-in` sweeps discarded and
`--sweeps` recorded (DeepQMC after its own equilibration of the sampler, which samples
`molecule_batch_size` geometries per step: it runs for as many steps as give every geometry
that many, and each geometry's first burn-in sweeps are discarded), each geometry's per-sweep means
reblocked by the same code (ferminet_fast/vmc/stats.py). Ours evaluates its averaged
parameters (what `evaluate` takes by default), DeepQMC its last parameters.

Each row's race is appended to benchmarks/pes_race.json (scripts/artifacts.py); TABLES renders
the newest of each row into ACCURACY.md.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple, Optional

import numpy as np

from scripts import artifacts, pes_goals, race

REPO = pes_goals.REPO
JSON = os.path.join(REPO, 'benchmarks', 'pes_race.json')
ROWS = ('h2', 'lih')
MOLECULE = {'h2': 'H2', 'lih': 'LiH'}  # DeepQMC's hamil/mol: its Hamiltonian's defaults.
WALKERS, BURN_IN, SWEEPS = 128, 50, 200  # Each geometry's evaluation, both codes (defaults).
CHECKPOINT_STEPS = 50
PEER = {'task': 'train_transferable', 'ansatz': 'transpsiformer', 'task.seed': 42,
        'task.molecule_batch_size': 3, 'task.electron_batch_size': 128,
        'task.pretrain_steps': 500, '+task.pretrain_kwargs.scf_kwargs.basis': 'sto-6g',
        '+task.chkpt_constructor.interval': CHECKPOINT_STEPS}
MARGIN = 2  # Combined standard errors by which ours must be lower.
GOAL = f'ours lower mean absolute error, by more than {MARGIN} combined errors'


def deepqmc_command(dq_dir: str, run: str, *settings: str) -> list:
  return [os.path.join(dq_dir, 'venv', 'bin', 'deepqmc'), 'hydra/job_logging=default',
          f'hydra.run.dir={run}', f'task.workdir={run}', *settings]


def write_geometries(directory: str, symbols, charges, positions: np.ndarray) -> None:
  """One DeepQMC molecule file per geometry, in bohr, named so they sort in our order."""
  os.makedirs(directory, exist_ok=True)
  for g, nuclei in enumerate(positions):
    with open(os.path.join(directory, f'geometry_{g:03d}.yaml'), 'w') as f:
      f.write(f'coords: {np.asarray(nuclei).tolist()}\ncharges: {list(charges)}\n'
              'charge: 0\nspin: 0\nunit: bohr\n')


class Race(NamedTuple):
  """How each row is raced: DeepQMC's directory and settings, each code's wall time, and the
  evaluation of every geometry (the same for both)."""
  dq_dir: str
  peer: dict  # PEER with --peer's changes.
  seconds: float
  sweeps: int
  burn_in: int


def peer_record(setup: Race) -> dict:
  python = os.path.join(setup.dq_dir, 'venv', 'bin', 'python')
  out = subprocess.run([python, '-c', 'import sys; from importlib.metadata import version; '
                        'print(sys.version.split()[0], version("deepqmc"), version("jax"))'],
                       capture_output=True, text=True)
  py, dq, jx = (out.stdout.split() + [None] * 3)[:3]
  return {'name': 'DeepQMC', 'dir': setup.dq_dir,
          'versions': {'python': py, 'deepqmc': dq, 'jax': jx},
          'settings': {'name': 'transferable', 'keys': dict(setup.peer)}}


def race_deepqmc(setup: Race, row: str, geometries: str, work: str) -> dict:
  """DeepQMC's training for the budget, and the evaluation of each geometry from its newest
  checkpoint written within the budget."""
  train_dir, eval_dir = os.path.join(work, 'deepqmc'), os.path.join(work, 'deepqmc_eval')
  settings = [f'{k}={v}' for k, v in setup.peer.items()]
  cmd = deepqmc_command(setup.dq_dir, train_dir, *settings, f'hamil/mol={MOLECULE[row]}',
                        f'task.mols.directory={geometries}', 'task.steps=100000000')
  end = time.time() + setup.seconds
  wall = race._run(cmd, setup.seconds)
  if wall < setup.seconds:
    return {'wall_s': wall, 'ended_early': True, 'steps': None, 'commands': [' '.join(cmd)],
            'geometries': []}
  name, steps = deepqmc_checkpoint(os.path.join(train_dir, 'training'), end)
  g = len(os.listdir(geometries))
  batch = int(setup.peer['task.molecule_batch_size'])
  evaluation = deepqmc_command(
      setup.dq_dir, eval_dir, 'task=evaluate', f'task.restdir={train_dir}/training',
      f'task.steps={-(-(setup.sweeps + setup.burn_in) * g // batch)}',
      f'+task.electron_batch_size={WALKERS}', f'+task.chkpt={name}')
  done = subprocess.run(evaluation, cwd=work, capture_output=True, text=True)
  if done.returncode:
    raise RuntimeError(f'DeepQMC evaluation failed ({done.returncode}):\n'
                       f'{done.stderr[-2000:]}')
  h5 = os.path.join(eval_dir, 'evaluation', 'result.h5')
  return {'wall_s': wall, 'steps': steps, 'geometries_per_step': batch,
          'commands': [' '.join(cmd), ' '.join(evaluation)],
          'geometries': deepqmc_energies(h5, g, setup)}


def deepqmc_checkpoint(directory: str, end: float) -> tuple:
  """(file name, steps) of DeepQMC's newest checkpoint in `directory` written by `end` (a
  time.time()); its chkpt-i.pt holds the parameters after i steps."""
  written = [(int(f[len('chkpt-'):-len('.pt')]), f) for f in os.listdir(directory)
             if f.startswith('chkpt-') and f.endswith('.pt')
             and os.path.getmtime(os.path.join(directory, f)) <= end]
  if not written:
    raise RuntimeError(f'DeepQMC wrote no checkpoint in {directory} within the budget')
  steps, name = max(written)
  return name, steps


def deepqmc_energies(h5: str, g: int, setup: Race) -> list:
  """Each geometry's reblocked energy from DeepQMC's evaluation log (read by its own h5py):
  its per-step walker means, non-finite local energies left out as our evaluation leaves
  them out (and counted), the first burn-in sweeps of each geometry discarded."""
  read = ('import h5py, json, sys, numpy as np\n'
          'f = h5py.File(sys.argv[1], "r")\n'
          'e = np.asarray(f["local_energy/samples"])\n'  # (steps, devices, batch, states, W)
          'i = np.asarray(f["mol_idxs"]).astype(int)\n'  # (steps, batch)
          'e = np.moveaxis(e, 1, -1).reshape(*i.shape, -1)\n'
          'ok = np.isfinite(e)\n'
          'm = np.where(ok, e, 0).sum(-1) / np.maximum(ok.sum(-1), 1)\n'
          'print(json.dumps({"e": m.tolist(), "i": i.tolist(), '
          '"bad": (~ok).sum(-1).tolist()}))\n')
  out = subprocess.run([os.path.join(setup.dq_dir, 'venv', 'bin', 'python'), '-c', read, h5],
                       capture_output=True, text=True, check=True)
  logged = json.loads(out.stdout)
  return per_geometry(np.asarray(logged['e']), np.asarray(logged['i']), g, setup.burn_in,
                      np.asarray(logged['bad']))


def per_geometry(means: np.ndarray, indices: np.ndarray, g: int, burn_in: int,
                 nonfinite: Optional[np.ndarray] = None) -> list:
  """(steps, batch) walker means and the geometry of each: every geometry's reblocked energy
  over its sweeps after its first `burn_in`, how many it had, and how many local energies of
  those sweeps were non-finite and left out of the means (`nonfinite`, (steps, batch))."""
  from ferminet_fast.vmc import stats
  if nonfinite is None:
    nonfinite = np.zeros(indices.shape, int)
  out = []
  for k in range(g):
    series = means[indices == k][burn_in:]
    est = stats.reblock(series) if len(series) > 1 else None
    out.append({'energy': None if est is None else est.mean,
                'error': None if est is None else est.error, 'sweeps': int(len(series)),
                'nonfinite': int(nonfinite[indices == k][burn_in:].sum())})
  return out


def race_ours(setup: Race, config: str, work: str) -> dict:
  run = os.path.join(work, 'ours')
  cmd = pes_goals._train(config, run, int(race.RACE_ITERATIONS))
  wall = race._run(cmd, setup.seconds)
  if wall < setup.seconds:
    return {'wall_s': wall, 'ended_early': True, 'steps': None, 'commands': [' '.join(cmd)],
            'geometries': []}
  evaluation = [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
                f'--steps={setup.sweeps}', f'--burn_in={setup.burn_in}', f'--walkers={WALKERS}']
  pes_goals._run(evaluation)
  pes = pes_goals._json(run, 'pes.json')
  return {'wall_s': wall, 'steps': pes['checkpoint_step'],
          'commands': [' '.join(cmd), ' '.join(evaluation)],
          'geometries': [{'energy': r['energy'], 'error': r['error'], 'sweeps': r['sweeps']}
                         for r in pes['geometries']]}


def mean_absolute_error(side: dict, reference: np.ndarray) -> tuple:
  """(MAE, its standard error) in Ha over the geometries; None where one is missing."""
  rows = side['geometries']
  if len(rows) != len(reference) or any(r['energy'] is None for r in rows):
    return None, None
  e, s = (np.array([r[k] for r in rows]) for k in ('energy', 'error'))
  return float(np.mean(np.abs(e - reference))), float(np.sqrt(np.sum(s ** 2)) / len(e))


def run_row(setup: Race, row: str, work: str) -> dict:
  surface = pes_goals.SURFACES[row][0]
  cfg = race.cli.load_config_file(os.path.join(REPO, surface))
  system = race.systems.make_system(cfg.system)
  positions = pes_goals.geometries_of(surface)
  reference = pes_goals.reference_energies(row)
  geometries = os.path.join(work, 'geometries')
  write_geometries(geometries, system.symbols, [int(c) for c in system.charges], positions)
  return {'row': row, 'seconds': setup.seconds, 'surface_config': surface,
          'positions_bohr': positions.tolist(), 'reference': reference,
          'evaluation': {'walkers': WALKERS, 'burn_in': setup.burn_in,
                         'sweeps': setup.sweeps},
          'deepqmc': race_deepqmc(setup, row, geometries, work),
          'ours': race_ours(setup, surface, work)}


def verdict(e: dict) -> str:
  ref = np.asarray(e['reference']['energies'])
  (ours, s_o), (peer, s_p) = (mean_absolute_error(e[k], ref) for k in ('ours', 'deepqmc'))
  early = [n for k, n in (('ours', 'ours'), ('deepqmc', 'DeepQMC')) if e[k].get('ended_early')]
  if early:
    return f'not judged: {" and ".join(early)} ended before the budget (a failed training)'
  if ours is None or peer is None:
    return 'not judged: a geometry without an evaluated energy'
  combined = float(np.hypot(s_o, s_p))
  gap = 1e3 * (peer - ours)
  if gap > MARGIN * 1e3 * combined:
    return f'met: ours lower by {gap:.2f} ± {1e3 * combined:.2f} mHa'
  return f'missed: ours − DeepQMC {-gap:+.2f} ± {1e3 * combined:.2f} mHa'


def row_line(e: dict) -> str:
  ref = np.asarray(e['reference']['energies'])

  def side(key):
    mae, err = mean_absolute_error(e[key], ref)
    shown = '–' if mae is None else f'{1e3 * mae:.2f} ± {1e3 * err:.2f}'
    if e[key]['steps'] is None:
      return f'{shown} (ended before the budget)'
    each = e[key].get('geometries_per_step')
    bad = sum(r.get('nonfinite', 0) for r in e[key]['geometries'])
    left = (f'; {bad} non-finite local energ{"y" if bad == 1 else "ies"} left out' if bad
            else '')
    return (f'{shown} ({e[key]["steps"]} steps' + (f' of {each}' if each else '')
            + f'{left})')

  return (f'| {e["row"]} | {len(ref)} | {e["seconds"]:.0f} | {side("ours")} | '
          f'{side("deepqmc")} | {GOAL} | {verdict(e)} |')


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's table of the race: the newest race of each row, judged now."""
  runs = artifacts.newest_runs(path, ROWS)
  if not runs:
    return ('Not measured yet: the table appears when `python -m scripts.pes_race` has run '
            '(rows h2, lih).')
  head = ('row', 'geometries', 'budget (s)',
          'ours: mean absolute error (mHa), steps (each over every geometry)',
          'DeepQMC: mean absolute error (mHa), steps (each over the geometries it says)',
          'goal', 'verdict')
  body = artifacts.table(head, [row_line(r.data) for r in runs])
  return body + '\n\n' + artifacts.provenance(path, runs)


TABLES = {'pes_race': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def reread(setup: Race, run, kept: str, record: dict, path: str) -> None:
  """`run` (an artifacts.Run of a race) appended again to `path` with DeepQMC's energies
  read again from its evaluation log kept in `kept`/<row>, its meta the race's own (the
  peer's record refreshed) and `reread` saying when and by which commit."""
  data, evaluation = dict(run.data), run.data['evaluation']
  setup = setup._replace(sweeps=evaluation['sweeps'], burn_in=evaluation['burn_in'])
  h5 = os.path.join(kept, data['row'], 'deepqmc_eval', 'evaluation', 'result.h5')
  data['deepqmc'] = {**data['deepqmc'], 'geometries': deepqmc_energies(
      h5, len(data['positions_bohr']), setup)}
  now = artifacts.meta()
  artifacts.append(path, data, {**run.meta, 'peer': record, 'reread': {
      k: now[k] for k in ('date', 'commit', 'dirty', 'command')}})
  print(row_line(data), flush=True)


def main():
  parser, args, rows = artifacts.row_arguments(__doc__, ROWS, JSON, extra=(
      ('--deepqmc', {'metavar': 'DIR', 'help': 'setup-deepqmc.sh DIR'}),
      ('--seconds', {'type': float, 'default': 1800.0, 'help': "each code's wall time"}),
      ('--peer', {'metavar': 'KEY=VALUE', 'nargs': '*', 'default': [],
                  'help': "DeepQMC's settings changed from PEER"}),
      ('--sweeps', {'type': int, 'default': SWEEPS, 'help': 'sweeps recorded per geometry'}),
      ('--burn-in', {'type': int, 'default': BURN_IN,
                     'help': 'sweeps discarded per geometry'}),
      ('--reread', {'metavar': 'DIR', 'help': "judge the newest race of each row again from "
                    "the logs kept in DIR/<row> (--keep): DeepQMC's evaluation read again "
                    "by this script, recorded as a new entry with the race's own meta"})))
  if not args.deepqmc:
    parser.error('--deepqmc DIR is needed (bash ../shared/anchors/setup-deepqmc.sh DIR)')
  if any('=' not in kv for kv in args.peer):
    parser.error('--peer takes KEY=VALUE')
  peer = {**PEER, **dict(kv.split('=', 1) for kv in args.peer)}
  setup = Race(os.path.abspath(args.deepqmc), peer, args.seconds, args.sweeps, args.burn_in)
  record = peer_record(setup)
  if args.reread:
    for run in artifacts.newest_runs(args.json, rows):
      reread(setup, run, args.reread, record, args.json)
    print(render_table(args.json))
    return
  for row in rows:
    run_meta = artifacts.meta(peer=record)
    with tempfile.TemporaryDirectory() as tmp:
      work = os.path.abspath(os.path.join(args.keep or tmp, row))
      if os.path.exists(work) and os.listdir(work):
        parser.error(f'{work} is not empty: a race starts from nothing (our training would '
                     'resume from what it holds)')
      entry = run_row(setup, row, work)
    artifacts.append(args.json, entry, run_meta)
    print(row_line(entry), flush=True)
  print(render_table(args.json))


if __name__ == '__main__':
  main()
