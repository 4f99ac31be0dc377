"""The forces on water's nuclei at several node regularisations (forces.node_cutoff): their
values and standard errors from the same samples, to show what the regularisation does to
the noise that kept the water relaxation of ACCURACY.md from settling, and at what bias.

  python -m scripts.force_noise [--seconds 600] [--steps 500] [--keep DIR]
  python -m scripts.render_docs                  # put the table into ACCURACY.md

Water at its experimental geometry (r_e = 0.9572 angstrom, theta_e = 104.52 degrees: Hoy and
Bunker, J. Mol. Spectrosc. 74, 1 (1979)) with the network and training of configs/ne.py,
trained for --seconds (SIGTERM at the budget: the training checkpoints and stops), then
evaluated once per cutoff in CUTOFFS with `--observables=forces --node_cutoff=EPS`, each
evaluation with the same seed, parameters and sweeps: the same samples, so the estimates
differ only by the regularisation. By symmetry the y component of every force (normal to
the molecular plane) and the x component of the oxygen's vanish whatever the network: the
table gives the largest of them in units of its standard error, a check of bias.

Each run is appended to benchmarks/force_noise.json (scripts/artifacts.py); TABLES renders
the newest into ACCURACY.md.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

from scripts import artifacts
from scripts import pes_goals

JSON = os.path.join(artifacts.BENCHMARKS, 'force_noise.json')
CUTOFFS = (0.0, 0.003, 0.01, 0.03, 0.1)  # bohr; 0: not regularised.
SYMMETRIC = ((0, 'x'), (0, 'y'), (1, 'y'), (2, 'y'))  # (nucleus, component) zero by symmetry.
# The nuclei are O, H, H (pes_goals.water): the oxygen's components come first.


def measure(work: str, seconds: float, steps: int) -> dict:
  run = os.path.join(work, 'h2o')
  train = pes_goals._train('configs/ne.py', run, 100000, '--config.system.atom=',
                           '--config.system.molecule=' + pes_goals.water(pes_goals.H2O_R,
                                                                          pes_goals.H2O_THETA),
                           '--config.system.units=angstrom', '--config.system.name=H2O')
  train_s = pes_goals._run(train, seconds)
  rows = []
  for eps in CUTOFFS:
    cmd = [sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}', f'--steps={steps}',
           '--observables=forces', f'--node_cutoff={eps}', '--seed=1']
    wall = pes_goals._run(cmd)
    e = pes_goals._json(run, 'eval.json')
    forces = e['observables']['forces']
    rows.append({'node_cutoff': eps, 'labels': forces['labels'], 'value': forces['value'],
                 'error': forces['error'], 'tau': forces['tau'], 'energy': e['energy'],
                 'energy_error': e['error'], 'wall_s': wall})
  return {'train_s': train_s, 'iterations': e['checkpoint_step'], 'steps': steps,
          'batch_size': e['batch_size'], 'cutoffs': rows,
          'commands': [' '.join(train), ' '.join(cmd[1:]).replace('-m ', 'python -m ', 1)]}


def symmetric_index() -> list:
  """Indices of the components in SYMMETRIC in a forces estimate (nucleus by nucleus, x y z)."""
  return [3 * nucleus + 'xyz'.index(axis) for nucleus, axis in SYMMETRIC]


def render_table(path: str = JSON) -> str:
  """The newest run: one line per cutoff."""
  run = artifacts.latest(path)
  if run is None:
    return 'Not measured yet: run `python -m scripts.force_noise`.'
  d = run.data
  base = d['cutoffs'][0]
  v0, e0 = np.asarray(base['value']), np.asarray(base['error'])
  head = ("node_cutoff (bohr)", "oxygen's errors (Ha/bohr)", "hydrogens' errors",
          'median error against none', 'largest shift from none (Ha/bohr)',
          "largest shift of a hydrogen's component (its errors)",
          'largest symmetry-zero component (errors)')
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in d['cutoffs']:
    v, e = np.asarray(r['value']), np.asarray(r['error'])
    zero = symmetric_index()
    lines.append(f'| {r["node_cutoff"]:g} | {np.min(e[:3]):.3f}–{np.max(e[:3]):.3f} | '
                 f'{np.min(e[3:]):.3f}–{np.max(e[3:]):.3f} | {np.median(e / e0):.2f} | '
                 f'{np.max(np.abs(v - v0)):.3f} | {np.max(np.abs(v - v0)[3:] / e[3:]):.1f} | '
                 f'{np.max(np.abs(v[zero]) / e[zero]):.1f} |')
  text = (f'Water at experiment, trained {d["train_s"]:.0f} s ({d["iterations"]} steps), '
          f'{d["steps"]} sweeps of {d["batch_size"]} walkers per evaluation, the same samples '
          'at every cutoff.\n\n')
  return text + '\n'.join(lines) + '\n\n' + artifacts.provenance(path, [run])


TABLES = {'force_noise': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--seconds', type=float, default=600.0, help='training budget (s)')
  p.add_argument('--steps', type=int, default=500, help='sweeps per evaluation')
  p.add_argument('--keep', metavar='DIR', help='keep the run directory in DIR/h2o')
  p.add_argument('--json', default=JSON, help='the artifact the run is appended to')
  args = p.parse_args()
  run_meta = artifacts.meta()
  with tempfile.TemporaryDirectory() as tmp:
    entry = measure(args.keep or tmp, args.seconds, args.steps)
  artifacts.append(args.json, entry, run_meta)
  print(render_table(args.json))
  print('python -m scripts.render_docs puts the table into ACCURACY.md')


if __name__ == '__main__':
  main()
