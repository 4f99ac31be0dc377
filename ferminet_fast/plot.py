"""Pictures of a run: energy, variance, acceptance and the stage-timer breakdown.

  python -m ferminet_fast.plot runs/li            # writes runs/li/plots/*.png

From Python (e.g. a notebook): `ferminet_fast.plot.plot_run('runs/li')` returns the
paths. Needs matplotlib (`pip install 'ferminet_fast[plot]'`).
"""

import csv
import os
import sys
from typing import Callable, Optional

import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.runtime import cli, rundir

STAGES = ('mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms')


def read_stats(run_dir: str) -> dict:
  """stats.csv as column -> array."""
  path = os.path.join(run_dir, 'stats.csv')
  try:
    with open(path, newline='') as f:
      rows = list(csv.DictReader(f))
  except OSError as e:
    raise InputError(f'{path} cannot be read: {e.strerror}') from None
  if not rows:
    raise InputError(f'{path} has no steps yet')
  try:
    return {c: np.array([rundir.stats_value(r, c) for r in rows]) for c in rundir.STATS_COLUMNS}
  except (KeyError, TypeError, ValueError):
    raise InputError(f'{path} is not a stats.csv written by ferminet_fast') from None


def exact_energy(run_dir: str) -> Optional[float]:
  """The run's reference energy (Ha), where known."""
  from ferminet_fast.physics import systems
  result = os.path.join(run_dir, 'result.json')
  if os.path.exists(result):
    exact = rundir.read_object(result).get('exact_energy')
    if exact is not None and not isinstance(exact, (int, float)):
      raise InputError(f'{result} holds exact_energy = {exact!r}, not a number')
    return exact
  cfg = rundir.read_config(run_dir)
  return systems.make_system(cfg.system).exact_energy


def _made(out_dir: str) -> str:
  """The folder the plots are written to, made where it is not there yet."""
  try:
    os.makedirs(out_dir, exist_ok=True)
  except OSError as e:
    raise InputError(f'the plots folder {out_dir!r} cannot be made: {e.strerror}') from None
  return out_dir


def running_mean(x: np.ndarray, window: int) -> np.ndarray:
  """Mean of the last `window` values at each step (fewer at the start)."""
  c = np.concatenate([[0.0], np.cumsum(x)])
  i = np.arange(1, len(x) + 1)
  lo = np.maximum(i - window, 0)
  return (c[i] - c[lo]) / (i - lo)


def plot_run(run_dir: str, out_dir: Optional[str] = None) -> list:
  """Writes energy.png, variance.png, pmove.png, (if timed) timers.png, (if evaluated
  with the density) density.png and (if a set of geometries was evaluated) pes.png; returns
  paths."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  if not os.path.isdir(run_dir):
    raise InputError(f'run directory {run_dir!r} '
                     + ('is not a directory' if os.path.exists(run_dir) else 'does not exist'))
  # Every file read and checked before any picture is written over an earlier one.
  s = read_stats(run_dir)
  exact = exact_energy(run_dir)
  timings_path = os.path.join(run_dir, 'timings.json')
  timings = rundir.read_object(timings_path) if os.path.exists(timings_path) else {}
  density_path = os.path.join(run_dir, 'density.csv')  # From evaluate --observables density.
  density = _density_table(density_path) if os.path.exists(density_path) else None
  surface = (_surface_rows(run_dir)  # A set of geometries evaluated.
             if os.path.exists(os.path.join(run_dir, 'pes.json')) else None)
  out_dir = _made(out_dir or os.path.join(run_dir, 'plots'))
  steps, name = s['step'] + 1, os.path.basename(os.path.normpath(run_dir))
  window = max(1, len(steps) // 50)
  paths = []
  save = _saver(plt, out_dir, paths)
  _energy(plt, save, steps, s['energy'], window, exact, name)
  _variance(plt, save, steps, s['variance'], window, name)
  _mcmc(plt, save, steps, s['pmove'], s['move_width'], name)
  if isinstance(timings.get('train_step_ms'), (int, float)):
    _timers(plt, save, timings, name)
  if density is not None:
    _density(plt, save, density, name)
  if surface:
    _surface(plt, save, *surface, name)
  return paths


def plot_dmc(run_dir: str, out_dir: Optional[str] = None) -> list:
  """Writes dmc_energy.png (the DMC energy against step at each time step) and, with two or
  more time steps, dmc_tau.png (E against tau with the linear fit) from dmc_stats.csv and
  dmc.json; returns paths."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  path = os.path.join(run_dir, 'dmc.json')
  if not os.path.exists(path):
    raise InputError(f'{run_dir!r} holds no dmc.json (run python -m ferminet_fast.dmc first)')
  result = rundir.read_object(path, ('per_tau', 'extrapolated', 'exact_energy'))
  stats = os.path.join(run_dir, 'dmc_stats.csv')
  if not os.path.exists(stats):
    raise InputError(f'{run_dir!r} holds dmc.json but no dmc_stats.csv')
  with open(stats, newline='') as f:
    rows = list(csv.DictReader(f))
  out_dir = _made(out_dir or os.path.join(run_dir, 'plots'))
  name, exact, paths = os.path.basename(os.path.normpath(run_dir)), result['exact_energy'], []
  save = _saver(plt, out_dir, paths)
  fig, ax = plt.subplots(figsize=(7, 4))
  for r in result['per_tau']:
    e = np.array([float(x['energy']) for x in rows if float(x['tau']) == r['tau']])
    ax.plot(np.arange(1, e.size + 1), running_mean(e, max(1, e.size // 50)), lw=1,
            label=f'tau {r["tau"]:g} (running mean)')
  if exact is not None:
    ax.axhline(exact, color='k', ls='--', lw=1, label='exact')
  ax.set(xlabel='DMC step', ylabel='mixed energy (Ha)', title=f'{name}: DMC')
  ax.legend(fontsize=8)
  save(fig, 'dmc_energy.png')
  fit = result['extrapolated']
  if fit:
    taus = np.array([r['tau'] for r in result['per_tau']])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(taus, np.array([r['energy'] for r in result['per_tau']], dtype=float),
                np.array([r['error'] for r in result['per_tau']], dtype=float), fmt='o',
                label='DMC')
    grid = np.linspace(0, taus.max(), 50)
    ax.plot(grid, fit['energy'] + fit['slope'] * grid, label='weighted linear fit')
    ax.errorbar([0], [fit['energy']], [fit['error']], fmt='s', label='tau -> 0')
    if exact is not None:
      ax.axhline(exact, color='k', ls='--', lw=1, label='exact')
    ax.set(xlabel='tau (1/Ha)', ylabel='energy (Ha)', title=f'{name}: time-step extrapolation')
    ax.legend(fontsize=8)
    save(fig, 'dmc_tau.png')
  return paths


def plot_surface(run_dir: str, quiet: bool = False, out_dir: Optional[str] = None) -> list:
  """Writes pes.png, the evaluated energy of each geometry (pes.json) against its scan
  coordinate (or its index) with error bars, its reference curve if it has one and a scan
  of a cell's fitted equation of state; returns its path ([] when `quiet` and matplotlib
  is missing)."""
  try:
    import matplotlib
  except ImportError:
    if quiet:
      return []
    raise InputError("plotting needs matplotlib: pip install 'ferminet_fast[plot]'") from None
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  pes, rows = _surface_rows(run_dir)
  paths = []
  _surface(plt, _saver(plt, _made(out_dir or os.path.join(run_dir, 'plots')), paths), pes,
           rows, os.path.basename(os.path.normpath(run_dir)))
  return paths


def _surface(plt, save: Callable, pes: dict, rows: list, name: str) -> None:
  """pes.png from pes.json (`pes`, its checked `rows`)."""
  scan = all('coordinate' in r for r in rows)
  x = [r['coordinate'] if scan else r['index'] for r in rows]
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.errorbar(x, [r['energy'] for r in rows], [r['error'] for r in rows], fmt='o-', ms=3,
              label='VMC (evaluated)')
  if pes.get('reference'):
    ax.plot(x, [r['reference'] for r in rows], 'k--', lw=1, label=pes['reference'])
  eos = pes.get('equation_of_state')
  if eos and eos.get('minimum'):  # A scan of a cell: its fitted equation of state.
    s = np.linspace(min(r['scale'] for r in rows), max(r['scale'] for r in rows), 200)
    per_scale = rows[0]['coordinate'] / rows[0]['scale']
    ax.plot(s * per_scale, np.polynomial.polynomial.polyval(s ** -2.0, eos['coefficients']),
            'C1-', lw=1, label=f'Birch-Murnaghan fit, minimum at {eos["coordinate"]:.3f}')
  ax.set(xlabel=pes['label'] if scan else 'geometry', ylabel='energy (Ha)',
         title=f'{name}: energy surface')
  ax.legend(fontsize=8)
  save(fig, 'pes.png')


def _surface_rows(run_dir: str) -> tuple:
  """(pes.json, its geometries' rows), InputError where it is missing or not as written."""
  path = os.path.join(run_dir, 'pes.json')
  if not os.path.exists(path):
    raise InputError(f'{run_dir!r} holds no pes.json (evaluate a run over a set of geometries '
                     'first)')
  pes = rundir.read_object(path, ('geometries', 'label'))
  rows = pes['geometries']
  fields = ('index', 'energy', 'error')
  if not isinstance(rows, list) or not all(isinstance(r, dict) and all(f in r for f in fields)
                                           for r in rows):
    raise InputError(f'{path} is not as ferminet_fast writes it (each geometry needs '
                     f'{", ".join(fields)})')
  return pes, rows


def _density_table(path: str) -> tuple:
  """(lo, hi, rho, err) of each shell of a density.csv; InputError where it is not one."""
  try:
    lo, hi, rho, err = np.loadtxt(path, delimiter=',', skiprows=1, unpack=True, ndmin=2)
  except ValueError as e:
    raise InputError(f'{path} is not a density.csv written by ferminet_fast ({e})') from None
  return lo, hi, rho, err


def _saver(plt, out_dir: str, paths: list) -> Callable:
  """save(fig, filename): the figure written to out_dir/filename, closed, its path kept."""

  def save(fig, filename):
    path = os.path.join(out_dir, filename)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    paths.append(path)

  return save


def _energy(plt, save, steps, energy, window, exact, name) -> None:
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.plot(steps, energy, lw=0.5, alpha=0.4, label='energy per step')
  ax.plot(steps, running_mean(energy, window), lw=1.5, label=f'mean of {window} steps')
  tail = energy[len(steps) // 5:]
  tail = tail[np.isfinite(tail)]
  if exact is not None:
    ax.axhline(exact, color='k', ls='--', lw=1, label=f'exact {exact:.6f} Ha')
  if tail.size:  # Zoom on the converging part, not the first steps' transient.
    lo = min(np.percentile(tail, 1), exact if exact is not None else np.inf)
    hi = np.percentile(tail, 99)
    pad = 0.1 * (hi - lo) + 1e-4
    ax.set_ylim(lo - pad, hi + pad)
  ax.set(xlabel='step', ylabel='energy (Ha)', title=f'{name}: energy')
  ax.legend()
  save(fig, 'energy.png')


def _variance(plt, save, steps, variance, window, name) -> None:
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.semilogy(steps, variance, lw=0.5, alpha=0.4)
  ax.semilogy(steps, running_mean(variance, window), lw=1.5)
  ax.set(xlabel='step', ylabel='variance of E_L (Ha$^2$)', title=f'{name}: local-energy variance')
  save(fig, 'variance.png')


def _mcmc(plt, save, steps, pmove, width, name) -> None:
  fig, ax = plt.subplots(figsize=(7, 4))
  ax.plot(steps, pmove, lw=0.8, label='pmove')
  ax.set(xlabel='step', ylabel='acceptance', ylim=(0, 1), title=f'{name}: MCMC')
  ax2 = ax.twinx()
  ax2.plot(steps, width, color='C1', lw=0.8, label='move width')
  ax2.set_ylabel('move width (bohr)')
  fig.legend(loc='lower right')
  save(fig, 'pmove.png')


def _timers(plt, save, timings, name) -> None:
  fig, ax = plt.subplots(figsize=(7, 3))
  timed = [k for k in STAGES if isinstance(timings.get(k), (int, float))]
  values = [timings[k] for k in timed]
  labels = [k.replace('_ms', '') for k in timed]
  ax.barh(labels, values, color=[f'C{i}' for i in range(len(values))])
  ax.axvline(timings['train_step_ms'], color='k', ls='--', lw=1,
             label=f'whole step {timings["train_step_ms"]:.2f} ms')
  ax.set(xlabel='ms per call (median)', title=f'{name}: stage timers')
  ax.invert_yaxis()
  ax.legend()
  save(fig, 'timers.png')


def _density(plt, save, table, name) -> None:
  lo, hi, rho, err = table
  r = 0.5 * (lo + hi)
  fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
  shell = 4 * np.pi * r**2
  ax1.errorbar(r, shell * rho, yerr=shell * err, lw=1, elinewidth=0.5)
  ax1.set(xlabel='r (bohr)', ylabel=r'$4\pi r^2 \rho(r)$ (bohr$^{-1}$)',
          title=f'{name}: radial distribution')
  ok = rho > 0
  ax2.semilogy(r[ok], rho[ok], lw=1)
  ax2.set(xlabel='r (bohr)', ylabel=r'$\rho(r)$ (bohr$^{-3}$)', title=f'{name}: density')
  save(fig, 'density.png')


USAGE = 'usage: python -m ferminet_fast.plot RUN_DIR [OUT_DIR]'


def main(argv) -> None:
  if cli.asks_for_help(argv):
    print(f'{USAGE}\n\n{__doc__.strip()}')
    sys.exit(0)
  if len(argv) not in (2, 3) or argv[1].startswith('-'):
    print(USAGE, file=sys.stderr)
    sys.exit(cli.EXIT_INPUT)
  try:
    import matplotlib  # noqa: F401
  except ImportError:
    print("error: plotting needs matplotlib: pip install 'ferminet_fast[plot]'", file=sys.stderr)
    sys.exit(cli.EXIT_INPUT)
  with cli.exit_on_error():
    paths = plot_run(argv[1], argv[2] if len(argv) == 3 else None)
  print('\n'.join(paths))


def run() -> None:
  main(sys.argv)


if __name__ == '__main__':
  run()
