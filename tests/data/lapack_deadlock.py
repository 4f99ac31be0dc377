"""Two independent batched LU factorisations in one compiled program: log|psi| of a small
Psiformer at walkers of a sulfur atom and at their up-down electron exchanges, as the
<S^2> estimator once computed them.

  PJRT_NPROC=2 python tests/data/lapack_deadlock.py plain|ordered CALLS

On jaxlib 0.10.0-0.11.0's CPU backend (whose LAPACK kernels split a large batch over the
runtime's thread pool and wait for the pieces) with a pool of two threads, 'plain' never
finishes: each factorisation waits, on one of the two threads, for pieces queued behind the
other. 'ordered' makes the second depend on the first (vmc/ordering.after) and finishes.
jaxlib 0.8.3-0.9.2 and 0.11.1 on run each factorisation on its calling thread: both finish.
Prints 'finished' at the end.
"""

import sys

import jax
import jax.numpy as jnp

from ferminet_fast import config, plan
from ferminet_fast.physics import systems
from ferminet_fast.vmc import ordering

mode, calls = sys.argv[1], int(sys.argv[2])
cfg = config.default()
cfg.system.atom = 'S'
cfg.network.network_type = 'psiformer'
cfg.network.psiformer.layers, cfg.network.psiformer.heads = 1, 2
cfg.network.psiformer.head_dim = 4
system = systems.make_system(cfg.system)
network = plan.network_of(cfg.network, system)
pairs = jnp.array([(i, j) for i in range(system.n_up)
                   for j in range(system.n_up, system.n_electrons)])


def both(params, x):
  r = x.reshape(-1, 3)
  swapped = jax.vmap(lambda p: r.at[p[0]].set(r[p[1]]).at[p[1]].set(r[p[0]]).ravel())(pairs)
  here = network.apply(params, x)[1]  # LU of (2, 16, 16) per walker.
  if mode == 'ordered':
    swapped = ordering.after(swapped, here)
  there = jax.vmap(network.apply, in_axes=(None, 0))(params, swapped)[1]  # (63, 2, 16, 16).
  return here + jnp.sum(there)


key = jax.random.PRNGKey(0)
params = network.init(key)
x = jax.random.normal(key, (32, 3 * system.n_electrons))
f = jax.jit(jax.vmap(both, in_axes=(None, 0)))
for i in range(calls):
  f(params, x + 0.01 * i).block_until_ready()
print('finished', flush=True)
