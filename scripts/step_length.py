"""How far each update moves psi, at the walkers whose gradient made it and at walkers that
had no part in it, against the optimizer's own model of it.

  python -m scripts.step_length --run DIR --system N2 --seed S --from STEP [--steps 60]
                                [--offset 20] [--label NAME]
  python -m scripts.render_docs                       # the table in ACCURACY.md

Every step records in stats.csv the squared length of its update u = params_s -
params_(s-1) in the Fisher metric of log|psi| (`fisher_step`: kfac.squared_length of the
change of log|psi| at the step's walkers x_s, centred, the largest 1% left out) and the
length the optimizer's model gave it (`model_step`: KFAC's lr^2 <F_d^-1 g, g> with its
damped curvature F_d, which its norm constraint bounds). In the races' trainings the first
is several times the second. The update is made from the gradient at x_s, a few hundred
walkers, and lies in the span of their own derivatives J_i = d log|psi(x_i)| / d params, so
a direction picked from a sample may look longer on that sample than on another; KFAC's
model may also miss the curvature, in its damping, its average over earlier steps, its
Kronecker factors and diagonal, or the blocks it leaves out. This script tells these apart.
It replays (scripts/replay.py) --steps steps of a kept KFAC training from its checkpoint at
or before STEP with a checkpoint after every step, and measures every update s from the
model outwards, each measure differing from the one before in one respect (WAYS):
  - in KFAC's averaged statistics as the checkpoint after the update holds them, undamped;
  - in KFAC's statistics of one set of walkers alone (kfac.make_statistics, undamped);
  - in the exact blocks of the Fisher matrix those statistics approximate (one per dense
    layer, one over the other parameters), 2 mean_i (J_i u_block)^2 each;
  - in the whole Fisher matrix, 2 mean_i (J_i u)^2;
  - the same centred and without the largest 1% of terms (kfac.squared_length of J_i u);
  - realised: the change of log|psi| itself (what fisher_step records; checked against it),
each of the last five at the update's own walkers x_s and at those of a step `offset` steps
away (x_(s+offset), or x_(s-offset) near the replay's end), drawn from nearly the same
|psi|^2 but not used by update s; each over the model's length. Beside them (OTHERS), at
both sets of walkers, the same updates in their statistics factored as KFAC-reduce and as
the split (kfac.ROWS): other models of the same exact blocks.

Each run is appended to benchmarks/step_length.json (scripts/artifacts.py).
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

from scripts import artifacts
from scripts import race
from scripts import replay

JSON = os.path.join(artifacts.BENCHMARKS, 'step_length.json')
SETS = ('own', 'other')  # The update's own walkers x_s; another step's.
# What each update's squared length is measured in, at each set of walkers, from KFAC's
# model outwards: KFAC's statistics of these walkers alone (undamped), the exact Fisher
# blocks KFAC's are of, the whole Fisher matrix (both plain means over the walkers, as
# KFAC's statistics are), the whole centred and trimmed to first order, and realised.
WAYS = ('kfac_batch', 'blocks', 'whole', 'first_order', 'realised')
REST = ('kfac_batch_rest', 'blocks_rest')  # The first two ways' part outside the layers.
# Beside them: the statistics of these walkers factored by KFAC-reduce and by the split of
# each row's input into its mean and its deviation (kfac.ROWS), other models of the same
# exact blocks.
OTHERS = {'kfac_reduce': 'reduce', 'kfac_split': 'split'}


def measure(run_dir: str, offset: int) -> dict:
  """Each update s of `run_dir` (a KFAC training) whose checkpoints s - 1 and s are both
  kept, measured in each way of WAYS at its own walkers and at another step's (those of
  checkpoint s + offset, else s - offset), and in KFAC's averaged statistics after the
  update (`kfac_ema`), with stats.csv's fisher_step and model_step of that update (its row
  s - 1: rows count the updates from 0)."""
  import jax
  import jax.numpy as jnp
  from flax import traverse_util
  from ferminet_fast import plan
  from ferminet_fast.environment import distributed
  from ferminet_fast.optimizers import kfac
  from ferminet_fast.runtime import checkpoint, rundir
  from ferminet_fast.stages import trained
  cfg = rundir.read_config(run_dir)
  cfg.distributed.cpu_devices = 1  # A diagnostic: one device (scripts/outliers.py).
  cfg = plan.settings(cfg, later_stage=True)
  if cfg.optim.optimizer != 'kfac' or cfg.optim.kfac.invert_every != 1:
    # With inverses kept over steps the model's damped curvature is not the averaged one.
    raise SystemExit(f'{run_dir}: measured against KFAC\'s model, inverted every step; this '
                     f'run used {cfg.optim.optimizer} (invert_every '
                     f'{cfg.optim.kfac.invert_every})')
  run = trained.TrainedRun.load(run_dir, cfg, 'last', distributed.context(cfg.batch_size))
  parts, network = run.built.parts, run.built.network
  if parts.geometries is not None or run.built.system.states > 1:
    raise SystemExit(f'{run_dir}: measured for one geometry and one state')
  statistics, layers = kfac.make_statistics(network, run.state.params, network.n_coords,
                                            cfg.optim.kfac.dense_rest,
                                            kfac.ROWS[cfg.optim.kfac.rows])
  others = {k: kfac.make_statistics(network, run.state.params, network.n_coords,
                                    cfg.optim.kfac.dense_rest, kfac.ROWS[rows])[0]
            for k, rows in OTHERS.items()}
  blocks = [{p + ('kernel',), p + ('bias',)} for p in layers]
  in_layers = set().union(*blocks)
  blocks.append(None)  # The parameters outside the dense layers, one block.

  def only(u, block):
    """u with every parameter outside `block` (None: those in any layer) zeroed."""
    flat = traverse_util.flatten_dict(u['params'])
    inside = (lambda k: k not in in_layers) if block is None else block.__contains__
    flat = {k: v if inside(k) else jnp.zeros_like(v) for k, v in flat.items()}
    return {'params': traverse_util.unflatten_dict(flat)}

  @jax.jit
  def lengths(old, new, x):
    f = lambda p: parts.walkers_log_psi(p, x)
    u = jax.tree.map(lambda a, b: a - b, new, old)
    linear = jax.jvp(f, (old,), (u,))[1]
    plain = lambda change: kfac.FISHER_SCALE * jnp.mean(change**2)
    factors, diagonal = statistics(old, x)
    each = [plain(jax.jvp(f, (old,), (only(u, b),))[1]) for b in blocks]
    return {'kfac_batch': kfac.model_length(u, factors, diagonal, layers),
            **{k: kfac.model_length(u, *other(old, x), layers) for k, other in others.items()},
            'blocks': sum(each), 'whole': plain(linear),
            'first_order': kfac.squared_length(linear),
            'realised': kfac.squared_length(f(new) - f(old)),
            # Of which the parameters outside the dense layers (their part of u alone).
            'kfac_batch_rest': kfac.model_length(only(u, None), factors, diagonal, layers),
            'blocks_rest': each[-1]}

  @jax.jit
  def averaged(old, new, state):
    u = jax.tree.map(lambda a, b: a - b, new, old)
    return kfac.model_length(u, state.factors, state.diagonal, layers, state.weight)

  is_kfac = lambda t: isinstance(t, kfac.KfacState)
  cache = {}  # Step -> (params, walkers' x, KFAC's state) of the checkpoints read lately.

  def state_at(s):
    if s not in cache:
      found, state = checkpoint.restore_latest(run_dir, run.built.state,
                                               ('params', 'opt_state', 'walkers'), s)
      if found != s:
        raise SystemExit(f'{run_dir}: checkpoint {s} did not restore')
      if len(cache) > 2 * offset + 4:
        cache.pop(min(cache))
      (kfac_state,) = [t for t in jax.tree.leaves(state.opt_state, is_leaf=is_kfac)
                       if is_kfac(t)]
      cache[s] = (state.params, state.walkers.x, kfac_state)
    return cache[s]

  rows = {int(r['step']): r for r in race._rows(os.path.join(run_dir, 'stats.csv'))}
  kept = set(checkpoint.saved_steps(run_dir))
  steps = []
  for s in sorted(kept):
    other = s + offset if s + offset in kept else s - offset
    if s - 1 not in kept or other not in kept or other == s or s - 1 not in rows:
      continue
    if float(rows[s - 1]['rejected']) or not float(rows[s - 1]['model_step']) > 0:
      continue  # A rejected update: no step to measure.
    (old, _, _), (new, x_own, kfac_state) = state_at(s - 1), state_at(s)
    record = {'step': s, 'other_walkers_step': other,
              'fisher_step': float(rows[s - 1]['fisher_step']),
              'model_step': float(rows[s - 1]['model_step']),
              'kfac_ema': float(averaged(old, new, kfac_state))}
    for name, x in (('own', x_own), ('other', state_at(other)[1])):
      record.update({f'{way}_{name}': float(v) for way, v in lengths(old, new, x).items()})
    steps.append(record)
  return {'run': os.path.basename(os.path.normpath(run_dir)), 'offset': offset,
          'walkers': int(cfg.batch_size), 'steps': steps, 'summary': summarise(steps)}


def summarise(steps: list) -> dict:
  """Per measure (kfac_ema, and each way of WAYS at each set of walkers), the median, 10th
  and 90th percentiles over the updates of its length over the model's."""
  if not steps:
    return {}
  model = np.array([s['model_step'] for s in steps])
  out = {}
  for key in ('kfac_ema',) + tuple(f'{w}_{n}' for n in SETS for w in WAYS + REST + tuple(OTHERS)):
    q = np.array([s[key] for s in steps]) / model
    out[key] = {'median': float(np.median(q)), 'p10': float(np.percentile(q, 10)),
                'p90': float(np.percentile(q, 90))}
  return out


def render_table(path: str = JSON) -> str:
  """ACCURACY.md's table: per replayed stretch and set of walkers, each measure of the
  updates' length over KFAC's model of it."""
  runs = artifacts.read(path)
  if not runs:
    return 'No update has been measured yet.'
  lines = ['| training | updates (from step) | walkers | KFAC, averaged statistics | KFAC, '
           'these walkers\' statistics | exact blocks | whole Fisher matrix | whole, centred '
           'and trimmed, first order | realised | outside the dense layers: KFAC, exact | '
           'KFAC-reduce, these walkers\' statistics | split, these walkers\' statistics |',
           '|' + '---|' * 12]
  for run in runs:
    r, s = run.data, run.data['summary']
    cell = lambda k: f'{s[k]["median"]:.2f} ({s[k]["p10"]:.2f} to {s[k]["p90"]:.2f})'
    for name, text in (('own', 'its own (x_s)'),
                       ('other', f'another step\'s ({r["offset"]} away)')):
      ema = cell('kfac_ema') if name == 'own' else '〃'
      lines.append(f'| {r.get("label") or r["run"]} | {len(r["steps"])} '
                   f'({r["steps"][0]["step"]}) | {text} | {ema} | '
                   + ' | '.join(cell(f'{w}_{name}') for w in WAYS) + ' | '
                   + ', '.join(f'{s[f"{w}_{name}"]["median"]:.2f}' for w in REST) + ' | '
                   + ' | '.join(cell(f'{k}_{name}') for k in OTHERS) + ' |')
  return '\n'.join(lines + [
      '', 'Each update\'s squared length over the length KFAC\'s model gave it (stats.csv\'s '
      'model_step, its averaged statistics damped): median over the updates (10th to 90th '
      'percentile). Left to right, each measure differs from the one before in one respect: '
      'the damping; the statistics of these walkers alone; the exact blocks of the Fisher '
      'matrix for the Kronecker factors (and for the diagonal of the parameters outside '
      'the dense layers); the whole matrix for its blocks; centred and without the 1% of '
      'walkers that change most (stats.csv\'s fisher_step, to first order); the change of '
      'log|psi| itself. "Outside the dense layers": the part of the first two measures that the '
      'parameters outside the dense layers (envelopes, Jastrow) make, their part of the '
      'update alone (medians). Beside them, the same updates in these walkers\' statistics '
      'factored as KFAC-reduce (optim.kfac.rows = \'reduce\') and as its sum with expand over '
      'each row\'s deviation from its configuration\'s mean input (\'split\'), other models of '
      'the same exact blocks. ' + artifacts.provenance(path, runs)])


TABLES = {'step-length': ('ACCURACY.md', render_table)}  # Rendered by scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  replay.add_arguments(p, 60)
  p.add_argument('--offset', type=int, default=20,
                 help='steps between an update and the walkers it is measured at besides its own')
  p.add_argument('--label', help='the training\'s name in the table')
  p.add_argument('--json', default=JSON)
  args = p.parse_args()
  if not 0 < args.offset < args.steps:
    p.error('--offset must lie between 0 and --steps')
  work = tempfile.mkdtemp(prefix='step_length_')
  try:
    out = os.path.join(work, 'run')
    replayed = replay.replay(args.run, args.system, args.seed, args.start, args.steps, out,
                             save_every=1)
    if not replayed['identical']:
      sys.exit(f'the replay did not match the training: {replayed}')
    r = measure(out, args.offset)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  r.update(run=os.path.basename(os.path.normpath(args.run)), label=args.label,
           system=args.system, seed=args.seed, replay=replayed)
  artifacts.append(args.json, r)
  print({k: round(v['median'], 2) for k, v in r['summary'].items()})


if __name__ == '__main__':
  main()
