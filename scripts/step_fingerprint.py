"""Fingerprint of the compiled local energy and gradient: whether a change to the code left
the step that XLA runs exactly as it was.

  python -m scripts.step_fingerprint --system Ne      # in this checkout, from its root
  cd OTHER_CHECKOUT && PYTHONPATH=THIS_CHECKOUT python -m scripts.step_fingerprint --system Ne

Prints, for each Laplacian method, a hash of the StableHLO of `Parts.energy_grad` (the
local energies and the VMC gradient of a batch of walkers) with source locations stripped.
Equal hashes in two checkouts mean the same program, hence the same speed; a different
hash says only that the program changed, which a timed benchmark then has to judge. The
working directory comes first on the import path: the second line fingerprints
OTHER_CHECKOUT's ferminet_fast with this script.
"""

import argparse
import hashlib
import re


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--system', default='Ne', help='atom symbol')
  parser.add_argument('--walkers', type=int, default=8)
  args = parser.parse_args()

  import jax
  import jax.numpy as jnp
  from ferminet_fast import config, plan
  from ferminet_fast.physics import laplacians, systems
  from ferminet_fast.wavefunction import networks

  cfg = config.default()
  cfg.system.atom = args.system
  system = systems.make_system(cfg.system)
  network = networks.make_network(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = jnp.zeros((args.walkers, network.n_coords), network.dtype)
  for method in laplacians.available():
    parts = plan.make_parts(cfg, system, network, method, chunk_size=0)
    text = jax.jit(parts.energy_grad).lower(params, x).as_text()
    text = re.sub(r'#loc\d* = .*', '', re.sub(r'loc\([^)]*\)', '', text))
    print(f'{args.system} {method.name}: {hashlib.sha256(text.encode()).hexdigest()[:16]}')


if __name__ == '__main__':
  main()
