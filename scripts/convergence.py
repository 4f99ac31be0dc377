"""How far one long training gets: a system trained as a user trains it, far longer than the
races, then its last and averaged parameters evaluated; is its energy still falling?

  python -m scripts.convergence --system HEG --seconds 3300        # a wall-time budget
  python -m scripts.convergence --system HEG --steps 20000         # or a number of steps
  python -m scripts.render_docs                                    # the table in ACCURACY.md
  python -m scripts.convergence --replot     # the latest run's curve again, from the artifact

The training is `python -m ferminet_fast.train` with the settings of the races
(ferminet_reference.SHARED: KFAC, batch 256, hidden ((64, 8), (64, 8)), 2 determinants,
10 MCMC moves per step), so the energy it reaches continues the races' curves; the
evaluations are `python -m ferminet_fast.evaluate --parameters last` and `average`, the same
sweeps after the same burn-in as the races'. A wall-time budget ends the run by SIGTERM
(training checkpoints on it), as in a race.

Whether the training has stopped improving is judged on its own step energies, a criterion
fixed before any run: the last 40% of the steps split into two halves, and the change of
their means (reblocked errors, vmc/stats.py) with its combined error. The change is
"flat" when it lies within two combined errors of zero, "falling" when it is lower, "rising"
when it is higher; it is also given per 1000 steps. Flat means flat at this resolution and
for these settings (network, batch), not the energy of the exact ground state.

Every run is appended to benchmarks/convergence.json (scripts/artifacts.py) with its block
means (500 steps each) for the curve benchmarks/convergence_<system>.png.
"""

import argparse
import os
import tempfile
from typing import Optional

import numpy as np

from ferminet_fast.physics import systems
from ferminet_fast.runtime import cli
from ferminet_fast.vmc import stats
from scripts import artifacts
from scripts import ferminet_reference as reference
from scripts import race

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

JSON = os.path.join(REPO, 'benchmarks', 'convergence.json')
BLOCK_STEPS = 500  # Steps per point of the curve.
TAIL = 0.4  # Fraction of the steps, at the end, whose two halves are compared.
FLAT_SIGMAS = 2.0  # A change within this many combined errors of zero is flat.


def png_name(system: str) -> str:
  return f'benchmarks/convergence_{system}.png'


def blocks(energy: np.ndarray, size: int = BLOCK_STEPS) -> list:
  """[(first step, mean, reblocked error)] of consecutive `size`-step blocks (Ha)."""
  out = []
  for start in range(0, len(energy) - size + 1, size):
    est = stats.reblock(energy[start:start + size])
    out.append((start, est.mean, est.error))
  return out


def tail_change(energy: np.ndarray, tail: float = TAIL) -> Optional[dict]:
  """The change (Ha) of the mean step energy between the two halves of the last `tail` of
  the steps, its combined reblocked error, the steps between the halves' centres, and the
  verdict (flat, falling, rising) at FLAT_SIGMAS."""
  n = len(energy)
  start = int(round((1 - tail) * n))
  half = (n - start) // 2
  if half < 16:
    return None
  a, b = stats.reblock(energy[start:start + half]), stats.reblock(energy[n - half:])
  change = b.mean - a.mean
  error = float(np.hypot(a.error, b.error))
  spacing = n - half - start
  verdict = ('flat' if abs(change) <= FLAT_SIGMAS * error else
             'falling' if change < 0 else 'rising')
  return {'change': change, 'error': error, 'spacing_steps': spacing, 'verdict': verdict,
          'first_step': start, 'steps': n}


def config_of(system: str):
  """The config of `system`'s file (ferminet_reference.SYSTEMS), as a user's run loads it."""
  return cli.load_config_file(os.path.join(REPO, reference.SYSTEMS[system][0]))


def measure(args) -> dict:
  """One long training (race.race_ours: the races' settings and polling, its step limit
  `--steps` when given) and both evaluations, as the artifact's data."""
  zero = race.reference_energy(systems.make_system(config_of(args.system).system))
  limit = [f'--config.optim.iterations={args.steps}'] if args.steps else []
  with tempfile.TemporaryDirectory() as tmp:
    run_dir = os.path.join(tmp, 'run')
    run = race.race_ours(args.system, args.seconds, run_dir, limit, args.seed)
    last = race.evaluate_ours(run_dir, args.eval_sweeps, race.EVAL_BURN_IN, zero, 'last')
    average = race.evaluate_ours(run_dir, args.eval_sweeps, race.EVAL_BURN_IN, zero, 'average')
  energy = np.asarray(run['energy'])
  return {'system': args.system, 'zero': zero, 'zero_source': race.SOURCES[args.system],
          'settings': {**reference.SHARED, 'debug.seed': args.seed}, 'steps': len(energy),
          'wall_s': run['wall_s'], 'step_limit': args.steps, 'seconds_limit': args.seconds,
          'blocks': [[s, m, e] for s, m, e in blocks(energy)],
          'tail_change': tail_change(energy), 'evaluated_last': last,
          'evaluated_average': average, 'eval_sweeps': args.eval_sweeps,
          'eval_burn_in': race.EVAL_BURN_IN}


def plot(data: dict, path: str) -> None:
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(7, 4))
  b = np.asarray(data['blocks'], dtype=float)
  if len(b):
    ax.errorbar(b[:, 0] + BLOCK_STEPS / 2, 1e3 * (b[:, 1] - data['zero']), yerr=1e3 * b[:, 2],
                fmt='.-', color='C0', label=f'training, mean per {BLOCK_STEPS} steps')
  for key, style, name in (('evaluated_last', 'o', 'last parameters'),
                           ('evaluated_average', 's', 'averaged parameters')):
    ev = data.get(key)
    if ev:
      ax.errorbar([data['steps']], [ev['error_mha']], yerr=[ev['stat_mha']], fmt=style,
                  capsize=3, label=f'evaluated, {name} ({ev["error_mha"]:+.1f} mHa)')
  if len(b) > 2:  # The first block (the steep start) off the scale: the plateau is the point.
    rest = 1e3 * (b[1:, 1] - data['zero'])
    pad = max(2.0, 0.1 * (rest.max() - rest.min()))
    ax.set_ylim(rest.min() - pad, rest.max() + pad)
  zero = 'Hartree-Fock' if data['zero_source'] == race.HARTREE_FOCK else 'exact'
  ax.set_xlabel('training step')
  ax.set_ylabel(f'energy - {zero} (mHa)')
  ax.set_title(f'{data["system"]}: {data["steps"]} steps in {data["wall_s"] / 60:.0f} min')
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _evaluated(ev: Optional[dict]) -> str:
  return artifacts.signed(ev['error_mha'], ev['stat_mha'], 1) if ev else 'not evaluated'


def _change(change: Optional[dict]) -> str:
  if not change:
    return 'too few steps'
  per_k = 1e3 / change['spacing_steps']
  return (f'{artifacts.signed(1e3 * change["change"], 1e3 * change["error"], 1)} '
          f'({artifacts.signed(1e3 * change["change"] * per_k, 1e3 * change["error"] * per_k, 2)}'
          f' per 1000 steps): {change["verdict"]}')


def electrons(system: str) -> int:
  """The number of electrons of `system` (its config file's system.electrons)."""
  return sum(config_of(system).system.electrons)


def _per_electron(ev: Optional[dict], n: int) -> str:
  return artifacts.signed(ev['error_mha'] / n, ev['stat_mha'] / n, 2) if ev else '–'


def render(path: str = JSON) -> str:
  """One row per long training: when, steps and wall time, both evaluations from the
  system's zero (per cell or molecule, and the last parameters' per electron), and the
  change over the last 40% of its steps with the verdict."""
  runs = artifacts.read(path)
  if not runs:
    return artifacts.provenance(path)
  lines = ['| date | system | steps | wall time | ms per step | evaluated, last parameters '
           '(mHa) | the same per electron (mHa) | evaluated, averaged (mHa) | change over '
           'the last 40% of steps (mHa) |',
           '|---|---|---|---|---|---|---|---|---|']
  for run in runs:
    d = run.data
    lines.append(
        f'| {run.meta["date"][:10]} | {d["system"]} | {d["steps"]} | '
        f'{d["wall_s"] / 60:.0f} min | {1e3 * d["wall_s"] / max(d["steps"], 1):.0f} | '
        f'{_evaluated(d["evaluated_last"])} | '
        f'{_per_electron(d["evaluated_last"], electrons(d["system"]))} | '
        f'{_evaluated(d["evaluated_average"])} | {_change(d["tail_change"])} |')
  zeros = sorted({run.data['zero_source'] for run in runs})
  note = (f'Energies from: {"; ".join(zeros)}. Evaluations: {runs[-1].data["eval_sweeps"]} '
          f'sweeps after {runs[-1].data["eval_burn_in"]}, reblocked. ms per step: the whole '
          'process (start-up, compilation, burn-in) over the steps. The change compares the '
          'mean training energy of the two halves of the last 40% of the steps; flat: within '
          f'{FLAT_SIGMAS:g} combined errors of zero.')
  return '\n'.join(lines + ['', note, '', artifacts.provenance(path)])


TABLES = {'convergence': ('ACCURACY.md', render)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--system', default='HEG', choices=list(race.SOURCES))
  p.add_argument('--steps', type=int, help='training steps (default: until --seconds)')
  p.add_argument('--seconds', type=float, help='wall-time budget of the training')
  p.add_argument('--seed', type=int, default=0, help='debug.seed of the training')
  p.add_argument('--eval-sweeps', type=int, default=2000, help='sweeps of each evaluation')
  p.add_argument('--json', default=JSON)
  p.add_argument('--replot', action='store_true',
                 help="draw the latest run of --json's system again, and train nothing")
  args = p.parse_args()
  if args.replot:
    run = artifacts.latest(args.json)
    if run is None:
      p.error(f'{args.json} holds no run')
    plot(run.data, os.path.join(REPO, png_name(run.data['system'])))
    return
  if not args.steps and not args.seconds:
    p.error('give --steps, --seconds or both')
  if args.steps is not None and args.steps < 1 or args.seconds is not None and args.seconds <= 0:
    p.error('--steps and --seconds must be positive')
  run_meta = artifacts.meta()
  data = measure(args)
  artifacts.append(args.json, data, run_meta)
  plot(data, os.path.join(REPO, png_name(args.system)))
  print(render(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
