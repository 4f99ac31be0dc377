"""ferminet_fast: variational Monte Carlo with FermiNet-style wavefunctions in JAX.

Imports point one way, down these floors (setup.cfg's import contracts check it):
train, evaluate, dmc -> plot -> run (the loop and its machinery, the resolver of every
choice) -> config (the settings, whose allowed choices come from the pieces' tables) -> vmc
(mcmc, loss, step, dmc) -> optimizers -> wavefunction (networks) -> physics (systems,
hamiltonian, Laplacians) -> choices (the record of a swappable piece) -> environment (XLA
flags, threads, signals, devices and hosts) -> errors.
"""

from ferminet_fast.environment import xla_flags as _xla_flags
from ferminet_fast.errors import InputError, TrainingError  # noqa: F401  (the public API)

__version__ = "0.1.0"

_xla_flags.set_defaults()  # Before JAX's backend starts (xla_flags.py says why).
