"""Where the local energy's outliers come from: a training's blown-up steps in their
context, and the walkers behind such steps, with what lies near their electrons.

  python -m scripts.outliers --run DIR [--label NAME] [--sweeps 2000] [--parameters last]
  python -m scripts.render_docs                       # the tables in RELIABILITY.md

A blown-up step (scripts/soak.py: the batch variance of the local energy above
soak.BLOWUP_FACTOR times its recent median) follows either a jump of the parameters (the
update before it large against its recent median) or a jump of the samples alone (the
update before it ordinary): the run's stats.csv tells them apart, step by step. A jump of
the samples is made by one walker far from the rest. The script then samples the run's
newest checkpoint (a molecule's) at fixed parameters as `evaluate` does (its walkers and
move width, --burn-in sweeps discarded) and keeps every walker whose local energy alone
would blow a step up: (E_L - median)^2 > BLOWUP_FACTOR * B * s^2, B the walkers and s the
sweep's robust spread (1.4826 times the median absolute deviation of E_L from its median).
For each such walker it records its electrons' positions (bohr), E_L's kinetic and potential
parts and the three places where a local energy can diverge:
  - a nucleus: the nearest one's distance times its charge, r Z (the cusp's own scale);
  - another electron: the nearest one's distance r (bohr);
  - the node: psi vanishes linearly across it, so at a distance d, |grad log|psi|| ~ 1 / d;
    the 3N-dimensional distance is estimated as 1 / |grad log|psi||.
Each is compared with the same quantity over every walker sampled (its quantile: the
fraction of all samples closer), and the outlier is put down to the place at which it lies
at the smallest quantile. An electron at a nucleus whose cusp the network misses has a
large negative potential that the kinetic part does not cancel; at a node the kinetic part
diverges on its own, of either sign.

Each run is appended to benchmarks/outliers.json (scripts/artifacts.py); TABLES renders every
run into RELIABILITY.md.
"""

import argparse
import os
from typing import Optional

import numpy as np

from scripts import artifacts
from scripts import race
from scripts import soak

JSON = os.path.join(artifacts.BENCHMARKS, 'outliers.json')
MAD_TO_SIGMA = 1.4826  # The median absolute deviation of a normal distribution, in sigma.
PLACES = ('nucleus', 'electron', 'node')


def nearest(x: np.ndarray, nuclei: np.ndarray, charges: np.ndarray) -> tuple:
  """For walkers x (S, 3N) about nuclei (M, 3) of `charges` (M,): (r Z of the nearest nucleus
  by r Z, (S,); that nucleus's charge, (S,); the nearest pair of electrons' distance, (S,)),
  bohr. The nearest nucleus is taken by r Z: a heavy nucleus's cusp reaches further."""
  e = x.reshape(x.shape[0], -1, 3)
  r_en = np.linalg.norm(e[:, :, None, :] - nuclei[None, None], axis=-1)  # (S, N, M)
  rz = (r_en * charges).min(axis=1)  # (S, M): each nucleus's nearest electron, times Z.
  which = rz.argmin(axis=1)
  r_ee = np.linalg.norm(e[:, :, None, :] - e[:, None, :, :], axis=-1)
  r_ee[:, np.arange(e.shape[1]), np.arange(e.shape[1])] = np.inf
  return rz.min(axis=1), charges[which], r_ee.min(axis=(1, 2))


def flagged(energies: np.ndarray, walkers: int) -> np.ndarray:
  """(B,) bool: the walkers of one sweep whose local energy alone would blow a step up
  (the module docstring's criterion)."""
  median = np.median(energies)
  spread = MAD_TO_SIGMA * np.median(np.abs(energies - median))
  return (energies - median) ** 2 > soak.BLOWUP_FACTOR * walkers * spread ** 2


def attribute(outlier: dict, population: dict) -> dict:
  """`outlier`'s quantile at each of PLACES among `population` (place -> every sample's
  value, sorted) and the place of the smallest quantile, as 'cause'."""
  q = {p: float(np.searchsorted(population[p], outlier[p])) / len(population[p])
       for p in PLACES}
  return {'quantile': q, 'cause': min(PLACES, key=lambda p: q[p])}


def blown_up_steps(rows: list) -> list:
  """Each blown-up step of a training's stats.csv `rows` (soak.blown_up) in its context,
  each figure against its median over the soak.BLOWUP_WINDOW steps before: its variance,
  its batch energy's shift (Ha), the previous step's update norm, its own gradient norm,
  and the next step's variance; whether the parameters jumped before the step or the
  samples did at it."""
  col = {k: np.array([float(r[k]) for r in rows]) for k in
         ('energy', 'variance', 'update_norm', 'grad_norm')}
  w = soak.BLOWUP_WINDOW

  def ratio(k, t):
    return float(col[k][t] / np.median(col[k][t - w:t]))

  return [{'step': int(t), 'variance': ratio('variance', t),
           'energy_shift': float(col['energy'][t] - np.median(col['energy'][t - w:t])),
           'previous_update': ratio('update_norm', t - 1), 'gradient': ratio('grad_norm', t),
           'next_variance': ratio('variance', t + 1) if t + 1 < len(rows) else None}
          for t in np.flatnonzero(soak.blown_up(col['variance']))]


def sample(run_dir: str, sweeps: int, burn_in: int, parameters: str, seed: int = 1) -> dict:
  """Samples the run's newest checkpoint: its outliers, each attributed, and the
  population's medians of each place's quantity."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast import plan
  from ferminet_fast.environment import distributed
  from ferminet_fast.runtime import rundir
  from ferminet_fast.stages import evaluation, trained
  cfg = rundir.read_config(run_dir)
  # One device: a diagnostic beside other work; a collective across devices whose threads
  # are starved by that work is ended by XLA's rendezvous timeout.
  cfg.distributed.cpu_devices = 1
  cfg = plan.settings(cfg, later_stage=True)
  run = trained.TrainedRun.load(run_dir, cfg, parameters, distributed.context(cfg.batch_size))
  system, parts = run.built.system, run.built.parts
  if system.periodic or parts.geometries is not None or system.has_ecp or system.states > 1:
    raise SystemExit(f'{run_dir}: the outliers are sampled for one molecule of one state '
                     'without ECPs (no cell, set of geometries or pseudopotential)')
  ham = parts.hamiltonian
  nuclei, charges = np.asarray(ham.positions, float), np.asarray(ham.charges, float)
  e_and_g = jax.vmap(ham.local_energy_and_gradient(run.built.network.log_psi), (None, 0))
  atoms, z = jnp.asarray(nuclei, parts.dtype), jnp.asarray(charges, parts.dtype)
  potential = jax.vmap(lambda y: ham.coulomb(y, atoms, z))

  @jax.jit
  def sweep(params, walkers, key):
    walkers, _ = parts.sweep(params, walkers, key)
    e, g = e_and_g(params, walkers.x)
    return walkers, (walkers.x, e, potential(walkers.x), jnp.linalg.norm(g, axis=-1))

  state = evaluation.with_key(run.state, seed)
  walkers, key = state.walkers, state.key
  places = {p: [] for p in PLACES}
  found = []
  for i in range(burn_in + sweeps):
    key, sub = jax.random.split(key)
    walkers, out = sweep(state.params, walkers, sub)
    if i < burn_in:
      continue
    x, e, v, g = (np.asarray(a, float) for a in out)
    rz, zs, r_ee = nearest(x, nuclei, charges)
    places['nucleus'].append(rz), places['electron'].append(r_ee), places['node'].append(1 / g)
    median = float(np.median(e))
    for w in np.flatnonzero(flagged(e, len(e))):
      found.append({'sweep': i - burn_in, 'deviation': float(e[w]) - median,
                    'kinetic': float(e[w] - v[w]), 'potential': float(v[w]),
                    'charge': float(zs[w]), 'nucleus': float(rz[w]),
                    'electron': float(r_ee[w]), 'node': float(1 / g[w]),
                    'x': x[w].tolist()})
  population = {p: np.sort(np.concatenate(v)) for p, v in places.items()}
  for o in found:
    o.update(attribute(o, population))
  return {'system': system.name, 'checkpoint_step': run.trained_step,
          'steps': blown_up_steps(race._rows(os.path.join(run_dir, 'stats.csv'))),
          'parameters': run.parameters, 'sweeps': sweeps, 'burn_in': burn_in,
          'walkers': int(cfg.batch_size), 'samples': int(len(population['node'])),
          'population_median': {p: float(np.median(v)) for p, v in population.items()},
          'outliers': found}


def _range(values, fmt: str) -> str:
  """'median (min to max)' of `values` in format `fmt`; '–' for none."""
  v = [x for x in values if x is not None]
  if not v:
    return '–'
  return f'{np.median(v):{fmt}} ({min(v):{fmt}} to {max(v):{fmt}})'


def render_table(path: str = JSON) -> str:
  """RELIABILITY.md's tables: each run's blown-up training steps in their context, and its
  sampled outliers by the place they are put down to."""
  runs = artifacts.read(path)
  if not runs:
    return 'No run has been sampled yet.'
  steps = ['| run | steps of the training | blown up | below the median energy | energy '
           'shift (Ha) | previous update / its median | gradient / its median | next '
           'variance / its median |', '|' + '---|' * 8]
  sampled = ['| run | step sampled | samples | outliers | per 10^5 samples | below the '
             'median | ' + ' | '.join(f'at a {p}' for p in PLACES) + ' | largest deviation '
             '(Ha) | median outlier: kinetic, potential (Ha) |', '|' + '---|' * (9 + len(PLACES))]
  for run in runs:
    r, o, b = run.data, run.data['outliers'], run.data['steps']
    steps.append(' | '.join([
        f'| {r["label"]}', str(r['checkpoint_step']), str(len(b)),
        str(sum(x['energy_shift'] < 0 for x in b)),
        _range([x['energy_shift'] for x in b], '+.2f'),
        *[_range([x[k] for x in b], '.2f') for k in ('previous_update', 'gradient',
                                                     'next_variance')]]) + ' |')
    dev = max((x['deviation'] for x in o), key=abs, default=None)
    parts = (f'{np.median([x["kinetic"] for x in o]):+.1f}, '
             f'{np.median([x["potential"] for x in o]):+.1f}' if o else '–')
    sampled.append(' | '.join([
        f'| {r["label"]}', str(r['checkpoint_step']), str(r['samples']), str(len(o)),
        f'{1e5 * len(o) / r["samples"]:.1f}', str(sum(x['deviation'] < 0 for x in o)),
        *[str(sum(x['cause'] == p for x in o)) for p in PLACES],
        '–' if dev is None else f'{dev:+.1f}', parts]) + ' |')
  return '\n'.join(steps + ['', 'Each blown-up step of the training (its batch variance above '
                            f'{soak.BLOWUP_FACTOR:.0f}× the median of the '
                            f'{soak.BLOWUP_WINDOW} steps before), each figure against its '
                            'median over those steps: median (range).', ''] + sampled + [
      '', 'Outliers: walkers of the last state sampled at its parameters whose local energy '
      'alone would blow a step up (squared deviation from the median above '
      f'{soak.BLOWUP_FACTOR:.0f} × walkers × the robust variance), each put down to the '
      'nucleus, electron or node it lies nearest to in the quantiles of every sample. '
      + artifacts.provenance(path, runs)])


TABLES = {'outliers': ('RELIABILITY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main(argv: Optional[list] = None):
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--run', required=True, help='a trained molecule run directory')
  p.add_argument('--label', help='its name in the table (default: the directory name)')
  p.add_argument('--sweeps', type=int, default=2000)
  p.add_argument('--burn-in', type=int, default=100)
  p.add_argument('--parameters', default='last', choices=('last', 'average'),
                 help="the parameters sampled ('last': those the training's steps had)")
  p.add_argument('--json', default=JSON)
  args = p.parse_args(argv)
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  data = sample(args.run, args.sweeps, args.burn_in, args.parameters)
  data['label'] = args.label or os.path.basename(os.path.normpath(args.run))
  artifacts.append(args.json, data)
  print(render_table(args.json))


if __name__ == '__main__':
  main()
