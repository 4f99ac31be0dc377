"""Twist averaging: the energy of a periodic system averaged over twists (Bloch wavevectors
of the simulation cell), from one run per twist.

Each twist is its own run (`system.twist`; the wavefunction at a twist other than Gamma is
complex), evaluated as any run is; `average` combines their eval.json files with equal
weights, the average over the grid of twists the runs sample (a uniform grid, e.g. all
n x n x n fractional twists (i + 1/2) / n or i / n, averages over the Brillouin zone of the
simulation cell; Lin, Zong & Ceperley, Phys. Rev. E 64, 016702 (2001)). The runs must
describe the same system but for the twist; each twist once.
"""

import os
from typing import Sequence

import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import lattice as lattice_lib
from ferminet_fast.physics import systems
from ferminet_fast.runtime import rundir

# System settings that may differ between the runs of one average (besides the twist).
FREE_KEYS = ('twist', 'name', 'exact_energy')


def _read(run_dir: str) -> tuple:
  """(the run's system settings, its eval.json), or InputError naming what is missing."""
  cfg = rundir.read_config(run_dir, '--twist_average:')
  eval_json = os.path.join(run_dir, 'eval.json')
  if not os.path.exists(eval_json):
    raise InputError(f'--twist_average: {run_dir!r} has not been evaluated (no eval.json); '
                     f'run python -m ferminet_fast.evaluate --run {run_dir} first')
  return cfg.system, rundir.read_json(eval_json)


def average(run_dirs: Sequence[str]) -> dict:
  """The twist-averaged energy of the evaluated runs `run_dirs` (one per twist), Ha per
  simulation cell and per electron, with its standard error (the runs are independent:
  sqrt(sum error^2) / n), and each twist's energy: what twist_average.json holds."""
  if len(run_dirs) < 2:
    raise InputError('--twist_average needs the run directories of at least two twists, '
                     'comma-separated')
  read = [_read(d) for d in run_dirs]
  first = read[0][0]
  system = systems.make_system(first)
  if not system.boundary.twists:
    raise InputError(f'--twist_average: {run_dirs[0]!r} is not a periodic system')
  reference = {k: v for k, v in first.to_dict().items() if k not in FREE_KEYS}
  twists = []
  for d, (sys_cfg, _) in zip(run_dirs, read):
    other = {k: v for k, v in sys_cfg.to_dict().items() if k not in FREE_KEYS}
    if other != reference:
      differ = sorted(k for k in set(other) | set(reference) if other.get(k) != reference.get(k))
      raise InputError(f'--twist_average: {d!r} describes another system than '
                       f'{run_dirs[0]!r} (config.system.{", ".join(differ)} differ)')
    twist = lattice_lib.reduced_twist(sys_cfg.twist)
    if twist in twists:
      raise InputError(f'--twist_average: twist {twist} appears twice ({d!r})')
    twists.append(twist)
  energies = np.array([e['energy'] for _, e in read], dtype=float)
  errors = np.array([e['error'] for _, e in read], dtype=float)  # null (no error bar): NaN.
  n_electrons = system.n_electrons  # Per simulation cell.
  mean, error = float(np.mean(energies)), float(np.sqrt(np.sum(errors**2)) / len(errors))
  return {'energy': mean, 'error': error, 'energy_per_electron': mean / n_electrons,
          'error_per_electron': error / n_electrons, 'n_twists': len(run_dirs),
          'spread': float(np.std(energies, ddof=1)),
          'twists': [{'run': d, 'twist': list(t), 'energy': float(e), 'error': float(s),
                      'checkpoint_step': r['checkpoint_step']}
                     for d, t, e, s, (_, r) in zip(run_dirs, twists, energies, errors, read)]}



def write(run_dirs: Sequence[str], out: str, quiet: bool = False) -> dict:
  """Averages the evaluated runs `run_dirs` (one per twist) into the JSON file `out` (not
  inside any of the runs) and says the result; returns it."""
  result = average(run_dirs)
  if os.path.abspath(os.path.dirname(out) or '.') in {os.path.abspath(d) for d in run_dirs}:
    raise InputError(f'--out {out!r} is inside one of the runs; name a file outside them')
  rundir.write_json(out, result)
  if not quiet:
    print(f'Twist average over {result["n_twists"]} twists: {result["energy"]:.6f} +- '
          f'{result["error"]:.6f} Ha per cell ({result["energy_per_electron"]:.6f} +- '
          f'{result["error_per_electron"]:.6f} Ha per electron; the twists spread by '
          f'{result["spread"]:.6f} Ha) -> {out}', flush=True)
  return result
