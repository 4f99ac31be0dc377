"""DeepMind FermiNet's training step counted by XLA, as scripts/step_cost.py counts ours.

Run with FermiNet's interpreter and its command-line flags (scripts/step_cost.py --ferminet
DIR does):

  /tmp/fn/venv/bin/python scripts/ferminet_cost.py --config FERMINET/ferminet/configs/atom.py \
      --config.system.atom=Ne --config.optim.iterations=1 ...

Every `jax.pmap` that FermiNet and kfac-jax make is wrapped so that a pmapped computation,
at its first call, is also lowered and compiled once more for XLA's count of its
floating-point operations (`Compiled.cost_analysis()`); the training itself runs untouched.
At the first call of the training step (Adam: FermiNet's pmapped `step`, with its MCMC
inside; KFAC: its pmapped `mcmc_step`), the same walkers and parameters are also used to
count FermiNet's own forward pass (log|psi| of every walker of a device, its network's
`apply` vmapped as its MCMC does) and its MCMC call alone. One line per count on stdout:

  FERMINET_COST {"name": "...", "flops": ...}

with the names `forward`, `mcmc` and each pmapped function's own (`step`, `_step`, ...);
and `FERMINET_LOOP {"counted": k}`: how many passes of a 10-pass `fori_loop` XLA's count
holds (1: a loop's body is counted once, as step_cost.py assumes for ours). Counts are per
device: run it on one device (FermiNet's 'best' settings).
"""

import functools
import json
import sys

import jax
import jax.numpy as jnp

import ferminet_launch

_PMAP = jax.pmap
_CAPTURED = {}  # 'apply': FermiNet's network.apply; 'mcmc': its MCMC step, not pmapped.


def flops(compiled) -> float:
  """Floating-point operations of a compiled computation by XLA's count."""
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):  # Older JAX: one dict per computation.
    return float(sum(c.get('flops', 0.0) for c in cost))
  return float(cost.get('flops', 0.0))


def report(kind: str, **fields) -> None:
  print(f'{kind} {json.dumps(fields)}', flush=True)


def loop_passes_counted() -> int:
  """How many of a fori_loop's 10 passes XLA's count holds."""
  x = jnp.ones((64, 64))
  def loop(n):
    return jax.jit(lambda y: jax.lax.fori_loop(0, n, lambda i, z: jnp.tanh(z @ z), y))
  one = flops(loop(1).lower(x).compile())
  ten = flops(loop(10).lower(x).compile())
  return round(ten / one)


def _count_walkers(params, data, key, width) -> None:
  """FermiNet's forward pass and MCMC call at these (pmapped: leading device axis) inputs."""
  apply, mcmc = _CAPTURED.get('apply'), _CAPTURED.get('mcmc')
  if apply is not None and 'forward' not in _CAPTURED:
    _CAPTURED['forward'] = True
    def forward(p, d):
      return jax.vmap(lambda x, s, a, c: apply(p, x, s, a, c)[1])(
          d.positions, d.spins, d.atoms, d.charges)
    report('FERMINET_COST', name='forward',
           flops=flops(_PMAP(forward).lower(params, data).compile()))
  if mcmc is not None and 'mcmc_counted' not in _CAPTURED:
    _CAPTURED['mcmc_counted'] = True
    pm = _PMAP(mcmc, axis_name=_CAPTURED['axis_name'])
    report('FERMINET_COST', name='mcmc', flops=flops(pm.lower(params, data, key, width).compile()))


def counting_pmap(fun=None, *args, **kwargs):
  """jax.pmap, whose function also reports its count at its first call."""
  if fun is None:
    return functools.partial(counting_pmap, *args, **kwargs)
  mapped = _PMAP(fun, *args, **kwargs)
  name = getattr(fun, '__name__', repr(fun))
  done = []

  @functools.wraps(fun)
  def call(*a, **kw):
    if not done:
      done.append(True)
      if name == 'mcmc_step':  # KFAC's path: (params, data, key, width).
        _count_walkers(*a[:4])
      elif name == 'step' and len(a) == 5:  # Adam's path: (data, params, state, key, width).
        _count_walkers(a[1], a[0], a[3], a[4])
      report('FERMINET_COST', name=name, flops=flops(mapped.lower(*a, **kw).compile()))
    return mapped(*a, **kw)

  return call


def main():
  report('FERMINET_LOOP', counted=loop_passes_counted())
  jax.pmap = counting_pmap
  if not hasattr(jax, 'device_put_replicated'):  # Removed in jax 0.11.
    jax.device_put_replicated = ferminet_launch.device_put_replicated
  from ferminet import constants, mcmc, networks, psiformer
  from ferminet import main as ferminet_main
  _CAPTURED['axis_name'] = constants.PMAP_AXIS_NAME

  def capturing(make):
    @functools.wraps(make)
    def wrapped(*a, **kw):
      network = make(*a, **kw)
      _CAPTURED['apply'] = network.apply
      return network
    return wrapped

  networks.make_fermi_net = capturing(networks.make_fermi_net)
  psiformer.make_fermi_net = capturing(psiformer.make_fermi_net)
  make_mcmc_step = mcmc.make_mcmc_step

  @functools.wraps(make_mcmc_step)
  def capturing_mcmc(*a, **kw):
    step = make_mcmc_step(*a, **kw)
    _CAPTURED['mcmc'] = step
    return step

  mcmc.make_mcmc_step = capturing_mcmc
  ferminet_main.main_wrapper()


if __name__ == '__main__':
  sys.exit(main())
