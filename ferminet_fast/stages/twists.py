"""Twist averaging: the energy of a periodic system averaged over twists (Bloch wavevectors
of the simulation cell), from one run per twist.

Each twist is its own run (`system.twist`; the wavefunction at a twist other than Gamma is
complex), evaluated as any run is (and run through DMC, fixed-phase at a twist);
`average` combines their eval.json (or dmc.json) files with equal weights, the average over the grid of twists the runs sample (a uniform grid, e.g. all
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
# The stages whose results are averaged: their file in each run and what writes it.
RESULTS = {'eval.json': 'python -m ferminet_fast.evaluate --run',
           'dmc.json': 'python -m ferminet_fast.dmc --run'}


def check(run_dirs: Sequence[str]) -> tuple:
  """(the first run's system, each run's reduced twist) of the runs `run_dirs`, one per
  twist; InputError unless they are two or more runs of one periodic system, each twist
  once. Needs their config.json alone: a stage checks them before it runs at any."""
  if len(run_dirs) < 2:
    raise InputError('--twist_average needs the run directories of at least two twists, '
                     'comma-separated')
  configs = [rundir.read_config(d, '--twist_average:').system for d in run_dirs]
  system = systems.make_system(configs[0])
  if not system.boundary.twists:
    raise InputError(f'--twist_average: {run_dirs[0]!r} is not a periodic system')
  reference = {k: v for k, v in configs[0].to_dict().items() if k not in FREE_KEYS}
  twists = []
  for d, sys_cfg in zip(run_dirs, configs):
    other = {k: v for k, v in sys_cfg.to_dict().items() if k not in FREE_KEYS}
    if other != reference:
      differ = sorted(k for k in set(other) | set(reference) if other.get(k) != reference.get(k))
      raise InputError(f'--twist_average: {d!r} describes another system than '
                       f'{run_dirs[0]!r} (config.system.{", ".join(differ)} differ)')
    twist = lattice_lib.reduced_twist(sys_cfg.twist)
    if twist in twists:
      raise InputError(f'--twist_average: twist {twist} appears twice ({d!r})')
    twists.append(twist)
  return system, twists


def result_of(run_dir: str, result: str) -> dict:
  """The run's `result` file (eval.json, dmc.json), or InputError naming what is missing."""
  path = os.path.join(run_dir, result)
  if not os.path.exists(path):
    done = 'evaluated' if result == 'eval.json' else f'run through {RESULTS[result]}'
    raise InputError(f'--twist_average: {run_dir!r} has not been {done} (no {result}); '
                     f'run {RESULTS[result]} {run_dir} first')
  return rundir.read_object(path, ('energy', 'error', 'checkpoint_step'),
                            f'; run {RESULTS[result]} {run_dir} again')


def average(run_dirs: Sequence[str], result: str = 'eval.json') -> dict:
  """The twist-averaged energy of the runs `run_dirs` (one per twist) from each one's
  `result` file (eval.json: VMC; dmc.json: DMC), with equal weights, Ha per simulation
  cell and per electron, with its standard error (the runs are independent: sqrt(sum
  error^2) / n), and each twist's energy: what the average's JSON file holds."""
  system, twists = check(run_dirs)
  read = [result_of(d, result) for d in run_dirs]
  energies = np.array([e['energy'] for e in read], dtype=float)
  errors = np.array([e['error'] for e in read], dtype=float)  # null (no error bar): NaN.
  n_electrons = system.n_electrons  # Per simulation cell.
  mean, error = float(np.mean(energies)), float(np.sqrt(np.sum(errors**2)) / len(errors))
  return {'energy': mean, 'error': error, 'energy_per_electron': mean / n_electrons,
          'error_per_electron': error / n_electrons, 'n_twists': len(run_dirs),
          'spread': float(np.std(energies, ddof=1)), 'source': result,
          'twists': [{'run': d, 'twist': list(t), 'weight': 1.0 / len(run_dirs),
                      'energy': float(e), 'error': float(s),
                      'checkpoint_step': r['checkpoint_step']}
                     for d, t, e, s, r in zip(run_dirs, twists, energies, errors, read)]}


def check_out(run_dirs: Sequence[str], out: str) -> None:
  """InputError if the average's file `out` would lie inside one of the runs, or cannot be
  written there (a directory, or in a folder that does not exist)."""
  folder = os.path.dirname(out) or '.'
  if os.path.abspath(folder) in {os.path.abspath(d) for d in run_dirs}:
    raise InputError(f'--out {out!r} is inside one of the runs; name a file outside them')
  if os.path.isdir(out):
    raise InputError(f'--out {out!r} is a directory; name a file')
  if not os.path.isdir(folder):
    raise InputError(f'--out {out!r}: no folder {folder!r} to write it in')


def write(run_dirs: Sequence[str], out: str, quiet: bool = False,
          result: str = 'eval.json') -> dict:
  """Averages the runs `run_dirs` (one per twist; their `result` files, as `average`) into
  the JSON file `out` (not inside any of the runs) and says the result; returns it."""
  check_out(run_dirs, out)
  r = average(run_dirs, result)
  rundir.write_json(out, r)
  if not quiet:
    print(f'Twist average ({result}) over {r["n_twists"]} twists: {r["energy"]:.6f} +- '
          f'{r["error"]:.6f} Ha per cell ({r["energy_per_electron"]:.6f} +- '
          f'{r["error_per_electron"]:.6f} Ha per electron; the twists spread by '
          f'{r["spread"]:.6f} Ha) -> {out}', flush=True)
  return r
