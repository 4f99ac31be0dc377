"""DeepMind FermiNet's training step counted by XLA, stage by stage: run in FermiNet's own
environment by scripts/step_cost.py (--ferminet DIR), never imported by this project.

  DIR/venv/bin/python scripts/ferminet_step_cost_probe.py OUT.json --config FILE --config.k=v ...

FermiNet trains for one step (no pretraining, no burn-in) with its own command-line settings,
while every function it maps over devices is compiled once more on its first call and asked
for XLA's count of floating-point operations (`Compiled.cost_analysis()`); its network, its
MCMC step and its loss are caught where its train() builds them and counted on the same
parameters and walkers:

  forward     log|psi| of every walker (its batch_network)
  mcmc_call   its MCMC step at the settings given: one log|psi| of every walker, then the
              moves (XLA counts a loop's body once: give --config.mcmc.steps=1 and scale)
  energy      its loss: the local energies of every walker, clipped, and their mean
  optimizer   KFAC's whole mapped step (its `_step`: the loss and its gradient in one pass,
              the curvature statistics and the update; matrix inversions in LAPACK calls
              are not counted by XLA)

KFAC only: with it FermiNet maps its MCMC step and the optimizer's step separately (with
Adam both are in one mapped step). Writes {'flops': {stage: count}, 'mapped': [{'name',
'flops'}], 'optimizer_name', 'electrons', 'walkers'} to OUT.json.
"""

import functools
import json
import sys
import tempfile

import jax

_PMAP = jax.pmap
MAPPED = []  # [{'name', 'flops'}] of every mapped function, in the order first called.
CAUGHT = {}  # 'batch_network', 'loss', 'mcmc_args': what train() built and first passed.


def flops(compiled, required: bool = True) -> float:
  """XLA's count of a compiled function's floating-point operations; a function without
  arithmetic (a broadcast) has no count, 0 unless `required`."""
  cost = compiled.cost_analysis()
  cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
  if required and 'flops' not in cost:
    raise RuntimeError('XLA gave no count of floating-point operations')
  return float(cost.get('flops', 0.0))


def counting_pmap(fun, *args, **kwargs):
  """jax.pmap that counts the mapped function once, at its first call."""
  mapped = _PMAP(fun, *args, **kwargs)
  name = getattr(fun, '__name__', type(fun).__name__)
  counted = []

  @functools.wraps(fun)
  def call(*a, **kw):
    if not counted:
      counted.append(True)
      if name == 'mcmc_step':  # Its walkers are donated: keep a copy to count on.
        CAUGHT['mcmc_args'] = jax.tree_util.tree_map(lambda x: x.copy(), a)
      MAPPED.append({'name': name,
                     'flops': flops(mapped.lower(*a, **kw).compile(), required=False)})
    return mapped(*a, **kw)

  return call


def catch(module, name: str, label: str, position: int):
  """Wraps module.name so that argument `position` of its call (or its result, for -1)
  is kept in CAUGHT[label]."""
  original = getattr(module, name)

  @functools.wraps(original)
  def wrapped(*a, **kw):
    out = original(*a, **kw)
    CAUGHT[label] = out if position < 0 else a[position]
    return out

  setattr(module, name, wrapped)


def main():
  out_path, flags = sys.argv[1], sys.argv[2:]
  jax.pmap = counting_pmap  # Before FermiNet binds jax.pmap (its constants.pmap).
  from absl import flags as absl_flags
  from ml_collections.config_flags import config_flags
  from ferminet import base_config, constants, loss, mcmc, train

  catch(mcmc, 'make_mcmc_step', 'batch_network', 0)
  catch(loss, 'make_loss', 'loss', -1)
  config_flags.DEFINE_config_file('config', None, 'Path to config file.')
  with tempfile.TemporaryDirectory() as save_path:
    absl_flags.FLAGS([sys.argv[0], *flags])
    cfg = absl_flags.FLAGS.config
    cfg.optim.iterations, cfg.pretrain.iterations, cfg.mcmc.burn_in = 1, 0, 0
    cfg.log.save_path = save_path
    cfg = base_config.resolve(cfg)
    train.train(cfg)

  params, data, key, _ = CAUGHT['mcmc_args']
  first = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)  # noqa: E731
  p, d = first(params), first(data)
  forward = jax.jit(CAUGHT['batch_network']).lower(
      p, d.positions, d.spins, d.atoms, d.charges).compile()
  evaluate_loss = CAUGHT['loss']
  energy = _PMAP(evaluate_loss, axis_name=constants.PMAP_AXIS_NAME)
  counts = {'forward': flops(forward),
            'mcmc_call': next(m['flops'] for m in MAPPED if m['name'] == 'mcmc_step'),
            'energy': flops(energy.lower(params, key, data).compile()),
            'optimizer': MAPPED[-1]['flops']}
  with open(out_path, 'w') as f:
    json.dump({'flops': counts, 'mapped': MAPPED, 'optimizer_name': MAPPED[-1]['name'],
               'electrons': int(d.positions.shape[-1] // 3), 'walkers': int(
                   d.positions.shape[0] * jax.local_device_count())}, f)


if __name__ == '__main__':
  main()
