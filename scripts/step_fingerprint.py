"""Fingerprint of the compiled steps: whether a change to the code left the programs that
XLA runs exactly as they were.

  python -m scripts.step_fingerprint --system Ne      # in this checkout, from its root
  python -m scripts.step_fingerprint --case all       # every case below
  cd OTHER_CHECKOUT && PYTHONPATH=THIS_CHECKOUT python -m scripts.step_fingerprint --case all

Prints a hash of the StableHLO of a step's function with source locations stripped. For
`--system SYMBOL` (an atom) and every case, `Parts.energy_grad` (the local energies and the
VMC gradient of a batch of walkers); the atom's per Laplacian method, a case's with the
method named in CASES. A case named train_* fingerprints `Parts.train_step` (MCMC sweep,
energy, gradient and update), dmc_* one DMC step (diffusion/walk.py) of all-electron moves
(make_step's default, dmc.moves = 'all': the step of checkouts from before the moves
could be chosen, so the hashes compare across them). Equal hashes in two
checkouts mean the same program, hence the same speed; a different hash says only that
the program changed, which a timed benchmark then has to judge. The working directory
comes first on the import path: the third line fingerprints OTHER_CHECKOUT's ferminet_fast
with this script.
"""

import argparse
import hashlib
import importlib.util
import re

# name -> (config file, overrides, Laplacian method). Float32, as the configs are.
CASES = {
    'heg': ('configs/heg.py', {}, 'folx'),  # The electron gas at Gamma (no nuclei).
    'heg_twist': ('configs/heg.py', {'system.twist': (0.25, 0.0, 0.0)}, 'folx'),  # Complex.
    'lih_crystal': ('configs/lih_crystal.py', {}, 'folx'),  # Ewald sum, periodic features.
    'lih': ('configs/lih.py', {}, 'folx'),  # A molecule.
    'si_ecp': ('configs/si_ccecp.py', {}, 'folx'),  # An ECP atom (non-local quadrature).
    'h_states': ('configs/h_states.py', {}, 'folx'),  # Several states.
    'train_lih': ('configs/lih.py', {}, 'folx'),  # KFAC.
    'train_heg_twist': ('configs/heg.py', {'system.twist': (0.25, 0.0, 0.0)}, 'folx'),
    'dmc_lih': ('configs/lih.py', {}, 'folx'),
    'dmc_si_ecp': ('configs/si_ccecp.py', {}, 'folx'),
}


def _config(path: str, overrides: dict):
  spec = importlib.util.spec_from_file_location('fingerprinted_config', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  cfg = module.get_config()
  for dotted, value in overrides.items():
    block, key = dotted.split('.')
    cfg[block][key] = value
  return cfg


def _hash(lowered) -> str:
  text = lowered.as_text()
  text = re.sub(r'#loc\d* = .*', '', re.sub(r'loc\([^)]*\)', '', text))
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _lowered(name: str, cfg, method, walkers: int):
  """The lowered program of case `name` for settings `cfg` and Laplacian `method`."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast import plan
  from ferminet_fast.diffusion import walk
  from ferminet_fast.physics import hamiltonian, systems
  from ferminet_fast.vmc import mcmc, step

  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system, step.DTYPES[cfg.precision])
  params = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  x = jax.ShapeDtypeStruct((walkers, network.n_coords), network.dtype)
  scalar = jax.ShapeDtypeStruct((), network.dtype)
  key = jax.eval_shape(lambda: jax.random.PRNGKey(0))
  if name.startswith('dmc_'):
    evaluate = walk.make_evaluate(network, hamiltonian.of(system, method, network.dtype))
    state = walk.DMCState(jax.eval_shape(evaluate, params, x), key,
                         jax.ShapeDtypeStruct((), jnp.int32), *[scalar] * 5)
    return jax.jit(walk.make_step(evaluate, 0.01, system.n_electrons, 10)).lower(params, state)
  parts = plan.make_parts(cfg, system, network, method, chunk_size=0)
  if name.startswith('train_'):
    state = step.TrainState(params, jax.eval_shape(parts.optimizer.init, params),
                            mcmc.Walkers(x, jax.ShapeDtypeStruct((walkers,), network.dtype),
                                         scalar),
                            key, jax.ShapeDtypeStruct((), jnp.int32))
    return jax.jit(parts.train_step).lower(state)
  return jax.jit(parts.energy_grad).lower(params, x)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--system', default=None, help='atom symbol (default Ne without --case)')
  parser.add_argument('--case', action='append', default=[],
                      help=f"one of {', '.join(CASES)} or 'all'; repeatable")
  parser.add_argument('--walkers', type=int, default=8)
  args = parser.parse_args()
  cases = list(CASES) if 'all' in args.case else args.case
  unknown = [c for c in cases if c not in CASES]
  if unknown:
    parser.error(f"unknown case {unknown[0]!r}; known: {', '.join(CASES)}")
  symbol = args.system or (None if cases else 'Ne')

  from ferminet_fast import config
  from ferminet_fast.physics import laplacians

  if symbol:
    cfg = config.default()
    cfg.system.atom = symbol
    for method in laplacians.available():
      print(f'{symbol} {method.name}: {_hash(_lowered(symbol, cfg, method, args.walkers))}',
            flush=True)
  for name in cases:
    path, overrides, method = CASES[name]
    method = laplacians.METHODS[method]
    lowered = _lowered(name, _config(path, overrides), method, args.walkers)
    print(f'{name} {method.name}: {_hash(lowered)}', flush=True)


if __name__ == '__main__':
  main()
