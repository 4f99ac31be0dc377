"""Default configuration: every key, what it means and its unit.

Key names follow DeepMind FermiNet where the concept is the same, so a FermiNet
config translates line by line. Per-system files in `configs/` start from
`default()` and change what they need; the result is locked, so a misspelt key
is an error rather than a silently ignored setting.
"""

import importlib.util

from ml_collections import config_dict

from ferminet_fast import InputError


def default() -> config_dict.ConfigDict:
  """The defaults: a helium atom with a small network; within 1 mHa of the exact energy in
  under 30 s on 2 CPU cores."""
  c = config_dict.ConfigDict()

  c.batch_size = 256  # Walkers (electron configurations) per step, summed over devices.
  c.precision = 'float32'  # 'float32' or 'float64' for every array of the run.

  c.system = config_dict.ConfigDict()
  c.system.atom = 'He'  # Element symbol of a single atom at the origin; '' when `molecule` is used.
  # Nuclei as 'SYMBOL x y z; SYMBOL x y z; ...' (the pyscf atom string), in `units`.
  c.system.molecule = ''
  c.system.units = 'bohr'  # Units of `molecule` coordinates: 'bohr' or 'angstrom'.
  c.system.charge = 0  # Total charge in units of e (positive: electrons removed).
  # n_up - n_down. None: the ground-state spin for atoms (Hund's rules), else the lowest.
  c.system.spin = config_dict.placeholder(int)
  # (n_up, n_down) given explicitly; () derives them from charge and spin. Must agree with both.
  c.system.electrons = ()
  # Reference (exact) energy in Ha for reporting the error; None looks neutral atoms H-Ne up.
  c.system.exact_energy = config_dict.placeholder(float)
  c.system.name = ''  # Label for logs and the run directory; '' derives it from the geometry.

  c.network = config_dict.ConfigDict()
  # Wavefunction ansatz: 'ferminet' (Pfau et al. 2020) or 'psiformer' (self-attention over
  # electrons, von Glehn et al. 2023). Both use the determinant, envelope and Jastrow below.
  c.network.network_type = 'ferminet'
  c.network.determinants = 2  # Number of determinants summed in psi.
  # True: one N x N determinant over all electrons; False: one per spin (block diagonal).
  c.network.full_det = True
  c.network.envelope = 'isotropic'  # Orbital envelope: 'isotropic' exp(-s r) or 'full' exp(-|S r|).
  c.network.jastrow = 'simple_ee'  # 'none' or 'simple_ee' (learned e-e cusp factor).
  c.network.ferminet = config_dict.ConfigDict()
  # Widths (one-electron, two-electron) of each layer; its length is the number of layers.
  c.network.ferminet.hidden_dims = ((32, 8), (32, 8))
  c.network.psiformer = config_dict.ConfigDict()
  c.network.psiformer.layers = 2  # Self-attention layers.
  c.network.psiformer.heads = 4  # Attention heads per layer.
  c.network.psiformer.head_dim = 16  # Features per head; the stream width is heads * head_dim.
  c.network.psiformer.layer_norm = False  # Layer-normalise the input of each sublayer.

  c.optim = config_dict.ConfigDict()
  c.optim.iterations = 2000  # Parameter updates (training steps).
  # 'kfac' (Kronecker-factored natural gradient, FermiNet's), 'adam', 'spring' (natural
  # gradient solved in the space of walkers, with momentum) or 'sgd'.
  c.optim.optimizer = 'kfac'
  # Laplacian of log|psi| for the kinetic energy: 'jacfwd' (jacfwd of grad: all 3N
  # tangents at once; memory ~3N gradients), 'jvp_loop' (a loop of 3N forward-mode
  # products: memory of one gradient), 'folx' / 'folx_sparse' (forward Laplacian, dense or
  # with per-electron sparsity; needs the folx extra), 'auto' (times jacfwd, jvp_loop and
  # folx on the real state before training and uses the fastest), or 'best' ('folx' when
  # installed, the fastest in our benchmarks, else 'jacfwd'). All are exact.
  c.optim.laplacian = 'best'
  # Walkers per chunk when evaluating local energies (0: all at once). Smaller chunks bound
  # the memory of the Laplacian for large batches or systems, at some speed.
  c.optim.energy_chunk_size = 0
  # Local energies used in the gradient are clipped to centre +- k * scale; this is k.
  # 0 disables clipping. The reported energy is always the unclipped mean.
  c.optim.clip_local_energy = 5.0
  # How centre and scale are taken: 'median_absdev' (median, mean |E - median|),
  # 'mean_absdev' (FermiNet: mean, mean |E - mean|), 'median_mad' (median, median |E - median|).
  c.optim.clip_method = 'median_absdev'
  c.optim.lr = config_dict.ConfigDict()
  # Learning rate at step 0; None: the optimizer's default (adam, sgd 0.01; kfac 0.05;
  # spring 0.2).
  c.optim.lr.rate = config_dict.placeholder(float)
  c.optim.lr.decay = 1.0  # Exponent of the decay: rate * (1 + t / delay) ** -decay.
  # Steps over which the rate halves (decay = 1); None: adam, sgd 1000; kfac, spring 10000.
  c.optim.lr.delay = config_dict.placeholder(float)
  # Recovery from non-finite numbers. Non-finite local energies are left out of the step
  # and an update that would make a parameter non-finite is not applied; after this many
  # such bad steps in a row the run rewinds to its last all-finite state (kept in device
  # memory every `snapshot_every` steps) with a new random stream, at most `max_rewinds`
  # times, then stops with an error (the last good state checkpointed).
  c.optim.rewind_after = 5
  c.optim.snapshot_every = 100  # steps
  c.optim.max_rewinds = 5
  c.optim.adam = config_dict.ConfigDict()
  c.optim.adam.b1 = 0.9  # First-moment decay.
  c.optim.adam.b2 = 0.999  # Second-moment decay.
  c.optim.adam.eps = 1e-8  # Denominator offset.
  c.optim.kfac = config_dict.ConfigDict()  # FermiNet's KFAC settings.
  c.optim.kfac.damping = 1e-3  # Tikhonov damping added to the curvature blocks.
  c.optim.kfac.norm_constraint = 1e-3  # Bound on lr^2 <F^-1 g, g> of each update.
  c.optim.kfac.cov_ema_decay = 0.95  # Moving-average decay of the curvature estimates.
  c.optim.kfac.invert_every = 1  # Steps between re-inverting the curvature blocks.
  c.optim.spring = config_dict.ConfigDict()  # SPRING (Goldshmid et al. 2024) settings.
  c.optim.spring.damping = 1e-3  # Added to the diagonal of the B x B walker kernel.
  # mu: weight of the previous direction. 0 is MinSR, our default: in float32, momentum
  # 0.9-0.99 made the walker-space solve diverge at the rates that converge fastest (He:
  # lr 0.2 with mu 0.9), and at stable rates it converged more slowly than mu = 0.
  c.optim.spring.momentum = 0.0
  c.optim.spring.norm_constraint = 0.1  # Bound on lr^2 |d|^2 of each update.

  # Hartree-Fock pretraining (needs the pyscf extra): before VMC, the network's orbitals are
  # fitted to the occupied HF orbitals by Adam, at walkers sampled from
  # hf_fraction * |psi_HF|^2 + (1 - hf_fraction) * |psi_net|^2 (FermiNet's scheme).
  # Without pyscf a run that asks for it says so and trains without it.
  c.pretrain = config_dict.ConfigDict()
  c.pretrain.iterations = 0  # Pretraining steps (0: none). Skipped when resuming.
  c.pretrain.basis = 'sto-6g'  # Gaussian basis of the HF calculation (any pyscf basis name).
  c.pretrain.restricted = False  # False: UHF; True: ROHF (same spatial orbitals per spin).
  c.pretrain.lr = 3e-4  # Adam learning rate of the orbital fit.
  # Weight of |psi_HF|^2 in the sampling density, in [0, 1]. 1 (FermiNet's default) samples
  # the HF density only, so the moves never evaluate the network: the cheapest.
  c.pretrain.hf_fraction = 1.0
  c.pretrain.mcmc_steps = 1  # Metropolis-Hastings moves per pretraining step.

  c.mcmc = config_dict.ConfigDict()
  c.mcmc.steps = 10  # Metropolis-Hastings steps per training step.
  c.mcmc.burn_in = 200  # MH steps before training, with the move width adapted.
  c.mcmc.move_width = 0.02  # Initial std of the Gaussian all-electron proposal, bohr.
  c.mcmc.init_width = 1.0  # Std of the initial electron positions around their nuclei, bohr.
  c.mcmc.target_pmove = 0.5  # Acceptance rate the move width is adapted toward.
  # Width update after every sweep of `steps` moves: width *= exp(rate * (pmove - target)).
  # The width is fixed within a sweep, so each sweep is an exact MH kernel.
  c.mcmc.adapt_rate = 1.0

  # Evaluation (python -m ferminet_fast.evaluate --run DIR): parameters frozen, the energy
  # recorded over many sweeps and reblocked. These are its defaults for this system.
  c.evaluation = config_dict.ConfigDict()
  c.evaluation.steps = 2000  # MCMC sweeps (of mcmc.steps moves each) whose energies are kept.
  c.evaluation.burn_in = 100  # Sweeps discarded first (walkers re-equilibrate to fixed params).

  c.log = config_dict.ConfigDict()
  c.log.save_path = ''  # Run directory; '' makes runs/<name>_<date>_<time>.
  c.log.print_every = 100  # Print a progress line every this many steps (0: never).
  # Compile the stages of the step separately and time them on the equilibrated state
  # before the loop (costs a compilation of about the step's; off unless asked for).
  c.log.timers = False
  c.log.timers_every = 0  # Re-measure the stage timers every this many steps (0: never).
  c.log.final_fraction = 0.2  # Fraction of the last steps averaged for the final estimate.
  # Checkpoints (orbax, in <save_path>/checkpoints) every this many minutes and/or steps
  # (0 disables either), and always at the end or on SIGTERM/SIGINT/SIGUSR1. Running again
  # with the same save_path resumes from the newest valid one.
  c.log.save_frequency = 10.0  # minutes
  c.log.save_every = 0  # steps
  c.log.keep_checkpoints = 3  # Newest checkpoints kept; older ones are deleted.
  c.log.restore_path = ''  # Start from the newest checkpoint of this other run directory.
  # A progress bar (energy, variance, pmove, it/s, ETA) when the output is a terminal;
  # batch jobs' logs get the `print_every` lines instead.
  c.log.progress = True
  # TensorBoard scalars in <save_path>/tensorboard (needs the tensorboard extra).
  c.log.tensorboard = False

  # Devices and processes. Walkers are split over all devices of all processes;
  # batch_size must be a multiple of the device count.
  c.distributed = config_dict.ConfigDict()
  # Call jax.distributed.initialize() (multi-host): 'auto' (under a SLURM step with more
  # than one task, or when `coordinator` is set), 'yes' (cluster auto-detected by JAX),
  # 'no' (this process's devices only).
  c.distributed.initialize = 'auto'
  c.distributed.coordinator = ''  # 'host:port' of process 0, for clusters JAX cannot detect.
  c.distributed.num_processes = 0  # Processes in the run (with `coordinator`).
  c.distributed.process_id = -1  # This process's index, 0..num_processes-1 (with `coordinator`).

  c.debug = config_dict.ConfigDict()
  c.debug.seed = 0  # Seed of every random number in the run.
  # Deterministic (bit-reproducible, slower) GPU kernels: adds --xla_gpu_deterministic_ops to
  # XLA_FLAGS before JAX starts (an error if it has already started in this process). The
  # seed is always fixed by `seed` (FermiNet's key of this name fixes its seed instead).
  c.debug.deterministic = False
  # Fault injection for reliability tests: after `inject_nan_step` steps, NaN into every
  # parameter ('params') or into half of the walkers' positions ('walkers'); '' never.
  c.debug.inject_nan = ''
  c.debug.inject_nan_step = 0

  c.lock()
  return c


def get_config() -> config_dict.ConfigDict:
  """Entry point used by `--config` when no file is given."""
  return default()


_CHOICES = {
    'precision': ('float32', 'float64'),
    'system.units': ('bohr', 'angstrom'),
    'network.network_type': ('ferminet', 'psiformer'),
    'network.envelope': ('isotropic', 'full'),
    'network.jastrow': ('none', 'simple_ee'),
    'optim.clip_method': ('median_absdev', 'mean_absdev', 'median_mad'),
    'distributed.initialize': ('auto', 'yes', 'no'),
    'debug.inject_nan': ('', 'params', 'walkers'),
}

_POSITIVE_INT = ('batch_size', 'network.determinants', 'mcmc.steps', 'pretrain.mcmc_steps',
                 'log.keep_checkpoints',
                 'network.psiformer.layers', 'network.psiformer.heads',
                 'network.psiformer.head_dim',
                 'evaluation.steps',
                 'optim.kfac.invert_every', 'optim.rewind_after', 'optim.snapshot_every')
_NON_NEGATIVE_INT = ('optim.iterations', 'optim.energy_chunk_size', 'mcmc.burn_in',
                     'pretrain.iterations',
                     'evaluation.burn_in',
                     'log.print_every', 'log.timers_every', 'log.save_every',
                     'optim.max_rewinds', 'debug.inject_nan_step')
_POSITIVE_FLOAT = ('optim.lr.delay', 'pretrain.lr', 'mcmc.move_width', 'mcmc.init_width',
                   'optim.kfac.damping', 'optim.kfac.norm_constraint',
                   'optim.spring.damping', 'optim.spring.norm_constraint')
_NON_NEGATIVE_FLOAT = ('optim.lr.rate', 'optim.lr.decay', 'optim.clip_local_energy',
                       'mcmc.adapt_rate', 'log.save_frequency')


def _get(cfg, dotted):
  for part in dotted.split('.'):
    cfg = cfg[part]
  return cfg


def validate(cfg: config_dict.ConfigDict) -> None:
  """Checks values (types are checked by the locked ConfigDict). Raises InputError."""
  from ferminet_fast import hamiltonian, optim  # Tables of names live with their code.

  choices = dict(_CHOICES)
  choices['optim.laplacian'] = tuple(hamiltonian.LAPLACIANS)
  choices['optim.optimizer'] = tuple(optim.OPTIMIZERS)
  choices['optim.laplacian'] += ('auto', 'best')
  for key, allowed in choices.items():
    value = _get(cfg, key)
    if value not in allowed:
      raise InputError(f'config.{key} = {value!r} is not one of {", ".join(allowed)}')
  if cfg.log.tensorboard and importlib.util.find_spec('tensorboardX') is None:
    raise InputError("config.log.tensorboard = True needs the optional package tensorboardX: "
                     "pip install 'ferminet_fast[tensorboard]'")
  method = cfg.optim.laplacian
  if method in hamiltonian.OPTIONAL and method not in hamiltonian.available_laplacians():
    raise InputError(f'config.optim.laplacian = {method!r} needs the optional package '
                     f"{hamiltonian.OPTIONAL[method]}: pip install 'ferminet_fast[folx]'")
  for key in _POSITIVE_INT:
    if _get(cfg, key) <= 0:
      raise InputError(f'config.{key} must be a positive integer, got {_get(cfg, key)}')
  for key in _NON_NEGATIVE_INT:
    if _get(cfg, key) < 0:
      raise InputError(f'config.{key} must be >= 0, got {_get(cfg, key)}')
  for key in _POSITIVE_FLOAT:
    if _get(cfg, key) is not None and not _get(cfg, key) > 0:
      raise InputError(f'config.{key} must be > 0, got {_get(cfg, key)}')
  for key in _NON_NEGATIVE_FLOAT:
    if _get(cfg, key) is not None and not _get(cfg, key) >= 0:
      raise InputError(f'config.{key} must be >= 0, got {_get(cfg, key)}')
  if not 0 <= cfg.optim.spring.momentum < 1:
    raise InputError(f'config.optim.spring.momentum must lie in [0, 1), got '
                     f'{cfg.optim.spring.momentum}')
  if not 0 <= cfg.pretrain.hf_fraction <= 1:
    raise InputError(f'config.pretrain.hf_fraction must lie in [0, 1], got '
                     f'{cfg.pretrain.hf_fraction}')
  if not 0 < cfg.mcmc.target_pmove < 1:
    raise InputError(f'config.mcmc.target_pmove must lie in (0, 1), got {cfg.mcmc.target_pmove}')
  if not 0 < cfg.log.final_fraction <= 1:
    raise InputError(f'config.log.final_fraction must lie in (0, 1], got {cfg.log.final_fraction}')
  dims = cfg.network.ferminet.hidden_dims
  if (not isinstance(dims, (tuple, list)) or not dims or
      not all(isinstance(d, (tuple, list)) and len(d) == 2 and
              all(isinstance(w, int) and w > 0 for w in d) for d in dims)):
    raise InputError('config.network.ferminet.hidden_dims must be a non-empty tuple of '
                     f'(one_electron_width, two_electron_width) positive integer pairs, got {dims!r}')
