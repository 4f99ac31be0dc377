"""ferminet_fast: variational Monte Carlo with FermiNet-style wavefunctions in JAX.

Data flows one way through the sub-packages: config -> physics (systems, hamiltonian) ->
wavefunction (networks) -> vmc (mcmc, loss, step) with optimizers -> run (the loop and its
machinery) -> train.
"""

from ferminet_fast.run import xla_flags as _xla_flags

__version__ = "0.1.0"

_xla_flags.set_defaults()  # Before JAX's backend starts (xla_flags.py says why).


class InputError(ValueError):
  """Bad user input (config, geometry, paths): reported as one line, no traceback."""


class TrainingError(RuntimeError):
  """Training cannot go on (e.g. diverged); the last good state is checkpointed."""
