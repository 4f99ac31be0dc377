"""The naive VMC step of the FermiNeuT profile, timed against ferminet_fast's compiled step.

The profile's trainer ran, per walker, a Python loop with one nested `jax.grad` call per
electron coordinate for the Laplacian, a Python loop over walkers for the local energy,
the MCMC and the parameter gradient, and nothing jitted. That is reproduced here on
the same wavefunction and config (default: configs/h2_quick.py) and timed on a subset
of walkers, then scaled linearly to the full batch (each walker costs the same in a
Python loop); the subset size is printed with the result.

  python -m scripts.naive_baseline [--config configs/h2_quick.py] [--walkers 4] [--json F]
"""

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import plan
from ferminet_fast.physics import coulomb
from ferminet_fast.runtime import cli, profiling
from ferminet_fast.vmc import step

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def naive_kinetic(log_psi, r):
  """-1/2 (lap + |grad|^2) with one nested jax.grad per coordinate, eagerly (the profile's)."""
  grad_fn = jax.grad(log_psi)
  g = grad_fn(r)
  lap = 0.0
  for k in range(r.shape[0]):
    lap = lap + jax.grad(lambda y, k=k: grad_fn(y)[k])(r)[k]
  return -0.5 * (lap + jnp.sum(g**2))


def time_naive(parts, system, state, steps, n_walkers, key):
  """Seconds for n_walkers walkers of one naive step: (mcmc, energy, gradient)."""
  params = state.params
  log_psi = lambda x: parts.network.log_psi(params, x)
  atoms, charges = jnp.asarray(system.positions), jnp.asarray(system.charges)
  xs = [state.walkers.x[i] for i in range(n_walkers)]
  width = float(state.walkers.width)

  t0 = time.perf_counter()
  for i in range(n_walkers):  # MCMC: a Python loop over walkers and steps.
    x, lp = xs[i], log_psi(xs[i])
    for s in range(steps):
      key, k1, k2 = jax.random.split(key, 3)
      proposal = x + width * jax.random.normal(k1, x.shape)
      lp_new = log_psi(proposal)
      if float(jnp.log(jax.random.uniform(k2))) < float(2 * (lp_new - lp)):
        x, lp = proposal, lp_new
    xs[i] = x
  t1 = time.perf_counter()
  energies = []
  for x in xs:  # Local energies, one walker at a time.
    e = naive_kinetic(log_psi, x) + coulomb.potential_energy(x, atoms, charges,
                                                                 system.nuclear_repulsion)
    energies.append(float(e))
  t2 = time.perf_counter()
  mean = np.mean(energies)
  grads = None
  for x, e in zip(xs, energies):  # Parameter gradient, one walker at a time.
    g = jax.grad(parts.network.log_psi)(params, x)
    g = jax.tree.map(lambda a: 2 * (e - mean) * a / len(xs), g)
    grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
  jax.block_until_ready(grads)
  t3 = time.perf_counter()
  return t1 - t0, t2 - t1, t3 - t2


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default=os.path.join(REPO, 'configs', 'h2_quick.py'))
  parser.add_argument('--walkers', type=int, default=4, help='walkers actually timed')
  parser.add_argument('--json', help='write the result here')
  args = parser.parse_args()

  cfg = cli.load_config_file(args.config)
  system = plan.system_of(cfg)  # With the settings' float32 matmul precision, as training.
  network = plan.network_of(cfg.network, system, step.DTYPES[cfg.precision])
  laplacian, _ = plan.laplacian_of(cfg, network, system, jax.random.PRNGKey(0), time_auto=False)
  parts = plan.make_parts(cfg, system, network, laplacian)
  state = step.init_state(parts, system, cfg.batch_size, cfg.mcmc, jax.random.PRNGKey(0))
  compiled = step.compile_step(parts, state)
  state = step.burn_in(compiled, state, cfg.mcmc.burn_in, cfg.mcmc.steps)

  ours_ms = profiling.time_train_step(compiled, state, repeats=20)  # Ours, on the real state.

  # One untimed walker first: eager JAX caches each primitive's compilation, and the
  # profile's trainer paid that only once per process too.
  time_naive(parts, system, state, cfg.mcmc.steps, 1, jax.random.PRNGKey(2))
  mcmc_s, energy_s, grad_s = time_naive(parts, system, state, cfg.mcmc.steps, args.walkers,
                                        jax.random.PRNGKey(1))
  scale = cfg.batch_size / args.walkers
  naive = {'mcmc_ms': 1e3 * mcmc_s * scale, 'energy_ms': 1e3 * energy_s * scale,
           'gradient_ms': 1e3 * grad_s * scale}
  naive['train_step_ms'] = sum(naive.values())
  result = {'config': args.config, 'batch_size': cfg.batch_size, 'mcmc_steps': cfg.mcmc.steps,
            'walkers_timed': args.walkers, 'naive_extrapolated': naive,
            'ours_train_step_ms': ours_ms, 'speedup': naive['train_step_ms'] / ours_ms}
  print(f'naive step (timed on {args.walkers} of {cfg.batch_size} walkers, scaled x{scale:g}): '
        + '  '.join(f'{k}={v:.0f}' for k, v in naive.items()))
  print(f'ferminet_fast train_step_ms={ours_ms:.2f}  speed-up {result["speedup"]:.0f}x')
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(result, f, indent=2)


if __name__ == '__main__':
  main()
