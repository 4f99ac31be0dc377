"""Runs DeepMind FermiNet's command line on a JAX without `jax.device_put_replicated`.

JAX 0.11 removed `jax.device_put_replicated`, which FermiNet and kfac-jax call to put one
copy of an array on each local device. Where it is missing, this installs the replacement
JAX's pmap migration guide gives (stack the copies along a new leading axis, one slice per
device), then runs `ferminet.main` with the arguments given; nothing else changes. Where
JAX still has it, FermiNet runs untouched. Used to time FermiNet on machines whose only
JAX is new (e.g. a GPU image), with kfac-jax from its repository's main branch.

  python -m scripts.ferminet_launch --config FERMINET/ferminet/configs/atom.py \
      --config.system.atom Ne ...
"""

import jax
import jax.numpy as jnp
import numpy as np


def device_put_replicated(x, devices):
  """x (a pytree) with a new leading axis of len(devices), slice i on devices[i]."""
  devices = list(devices)
  mesh = jax.sharding.Mesh(np.array(devices), ('devices',))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('devices'))
  return jax.tree.map(
      lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)), sharding), x)


if __name__ == '__main__':
  if not hasattr(jax, 'device_put_replicated'):  # Removed in jax 0.11.
    jax.device_put_replicated = device_put_replicated
  from ferminet import main
  main.main_wrapper()
