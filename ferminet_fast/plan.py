"""A run's plan: the one place where the settings become typed objects (`resolve` ->
`Plan`: the system with its boundary and geometry, the ansatz, the Hamiltonian with its
Laplacian operator, the optimizer, the clipping window, the walkers per chunk, the devices),
and the one build path of every stage from it (training, evaluation, DMC): plan -> the
step's parts -> the state.

Every piece's name, 'auto' and 'best' setting is resolved here, once: the Laplacian method ('best' by
what is installed, the system's size and the device; 'auto' by timing the candidates on the
built network) and the chunk of walkers per local-energy evaluation (by the compiled step's
memory, in train). Training records what they became in the run directory's resolved.json;
the later stages take them from there, so that they evaluate the same functions training
used.
"""

import os
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from ml_collections import config_dict

from ferminet_fast import config
from ferminet_fast.environment import cpu_devices, distributed, xla_flags
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import optim
from ferminet_fast.physics import hamiltonian, laplacians, systems
from ferminet_fast.runtime import profiling, rundir
from ferminet_fast.vmc import loss, mcmc, step
from ferminet_fast.wavefunction import envelopes, jastrows, networks

RESOLVED = 'resolved.json'  # What 'auto' and 'best' settings became, by dotted key.


class Plan(NamedTuple):
  """A run's every choice resolved into its object, once (`resolve`): what each stage is
  built from. `record()` is the run's resolved.json, from which later stages resolve the
  same plan again."""
  cfg: Any  # The settings, validated and frozen (`settings`).
  system: systems.System  # Electrons, nuclei (the geometry), ECPs and the boundary.
  network: networks.Network  # The ansatz, its envelope and Jastrow records inside.
  # The Hamiltonian (its Laplacian operator), optimizer, clipping window, walkers per chunk.
  pieces: step.Pieces
  ctx: Optional[distributed.Context] = None  # Devices of the walkers (None: all devices).
  laplacian_ms: Optional[dict] = None  # Name -> ms per local energy, when 'auto' timed them.

  @property
  def boundary(self):
    return self.system.boundary

  @property
  def hamiltonian(self) -> hamiltonian.Hamiltonian:
    """The Hamiltonian whose local energy every stage takes: the system's, with the resolved
    Laplacian operator and the Coulomb energy in the network's precision."""
    return self.pieces.hamiltonian

  def parts(self, chunk_size: Optional[int] = None) -> step.Parts:
    """The step's parts (vmc/step.py); `chunk_size` replaces the planned walkers per chunk
    (the memory fit of the compiled step tries smaller ones)."""
    pieces = self.pieces if chunk_size is None else self.pieces._replace(chunk_size=chunk_size)
    return step.make_parts(self.system, self.network, self.cfg.mcmc, self.cfg.optim, pieces)

  def record(self, parts: Optional[step.Parts] = None) -> dict:
    """resolved.json: what the 'auto' and 'best' settings became (with `parts`, the chunk
    of walkers they were compiled with), and the CPU devices per process the walkers were
    split over (None on other devices)."""
    ctx, chunk = self.ctx, (parts or self.pieces).chunk_size
    cpu = ctx is not None and ctx.mesh.devices.flat[0].platform == 'cpu'
    return {'optim.laplacian': self.hamiltonian.laplacian.name,
            'optim.energy_chunk_size': chunk,
            'distributed.cpu_devices': ctx.device_count // ctx.process_count if cpu else None}


class Built(NamedTuple):
  """A stage's plan, with the step's parts and a fresh state built from it."""
  plan: Plan
  parts: step.Parts  # The step's functions (vmc/step.py), with the resolved pieces.
  state: step.TrainState  # Fresh: initial parameters, walkers and optimizer state.

  @property
  def system(self) -> systems.System:
    return self.plan.system

  @property
  def network(self) -> networks.Network:
    return self.plan.network

  @property
  def laplacian_ms(self) -> Optional[dict]:
    return self.plan.laplacian_ms


def settings(user_cfg, later_stage: bool = False):
  """The validated settings, frozen (each module gets its own block from them); the CPU's
  devices and the XLA flag that debug.deterministic needs set before JAX starts.
  `later_stage`: the settings are a trained run's (evaluation, DMC), whose CPU device count
  is kept where it can no longer take effect, instead of refused."""
  config.validate(user_cfg)
  cfg = config.freeze(user_cfg)
  cpu_devices.split(cfg.distributed.cpu_devices, cfg.batch_size,
                    distributed.wants_initialize(cfg.distributed), strict=not later_stage)
  if cfg.debug.deterministic and not xla_flags.request(xla_flags.GPU_DETERMINISTIC):
    raise InputError('config.debug.deterministic needs XLA_FLAGS to hold '
                     f'{xla_flags.GPU_DETERMINISTIC} before JAX starts, and JAX has already '
                     'started in this process: set the environment variable before importing '
                     'jax (or run from the command line)')
  return cfg


def dry_run(user_cfg) -> str:
  """The settings as a run resolves them before it builds anything (what --dry-run prints):
  'best' and the 'auto's that the settings and this machine decide (the envelope, the
  multi-process start, the CPU device count), and a closing comment naming the 'auto's that
  only the built network decides (recorded in the run directory's resolved.json)."""
  config.validate(user_cfg)
  d = user_cfg.to_dict()
  if d['optim']['laplacian'] == 'best':
    d['optim']['laplacian'] = best_laplacian(systems.make_system(user_cfg.system)).name
  if d['dmc']['tau'] == 'auto':
    d['dmc']['tau'] = dmc_time_steps(user_cfg.system)
  d['network']['envelope'] = envelopes.resolve(
      d['network']['envelope'], systems.is_periodic(user_cfg.system),
      user_cfg.system.rs is None).name
  multi = distributed.wants_initialize(user_cfg.distributed)
  d['distributed']['initialize'] = 'yes' if multi else 'no'
  n = cpu_devices.count(d['distributed']['cpu_devices'], user_cfg.batch_size,
                        cpu_devices.cores(), os.environ, multi)
  if n is not None:
    d['distributed']['cpu_devices'] = n
  kept = ('' if n is not None else "\n# distributed.cpu_devices = 'auto' keeps JAX's own count: "
          + ('one device per process' if multi else
             'the one set in JAX_NUM_CPU_DEVICES or XLA_FLAGS'))
  if user_cfg.distributed.cpu_devices == 'auto' and n == 1 and cpu_devices.lapack_fault():
    kept = "\n# distributed.cpu_devices = 'auto' keeps one device: " + cpu_devices.fault_note()
  pending = [f'{key} = {value!r} ({why})' for key, value, why in (
      ('optim.laplacian', d['optim']['laplacian'], 'by timing the methods on the network'),
      ('optim.energy_chunk_size', d['optim']['energy_chunk_size'],
       "by the device and the compiled step's memory")) if value == 'auto']
  text = str(config_dict.ConfigDict(d)) + kept
  if pending:
    text += '\n# Resolved when the run builds: ' + '; '.join(pending)
  return text


def system_of(cfg) -> systems.System:
  """The system of `cfg`, with JAX first set to the settings' precision: float64 where they
  ask for it, and the precision of float32 matrix products (JAX's default on NVIDIA GPUs
  is TF32). Over a set of geometries the walkers must split evenly among them."""
  if cfg.precision == 'float64':
    jax.config.update('jax_enable_x64', True)
  jax.config.update('jax_default_matmul_precision',
                    None if cfg.matmul_precision == 'default' else cfg.matmul_precision)
  system = systems.make_system(cfg.system)
  g = system.geometry_count
  if cfg.batch_size % g:
    raise InputError(f'config.batch_size = {cfg.batch_size} does not split evenly over the {g} '
                     f'geometries (a chain of walkers each): use a multiple of {g}, e.g. '
                     f'{g * max(1, cfg.batch_size // g)}')
  drawn = cfg.optim.geometries_per_step
  if drawn and system.surface is None:
    raise InputError(f'config.optim.geometries_per_step = {drawn} is for a set of geometries '
                     '(system.geometries or system.scan); this run has one: use 0')
  if drawn > g:
    raise InputError(f'config.optim.geometries_per_step = {drawn} exceeds the {g} geometries '
                     f'of the set: use 1 to {g} (or 0 for all)')
  return system


def best_laplacian(system: systems.System, platform: Optional[str] = None
                   ) -> laplacians.Method:
  """The Laplacian 'best' stands for: with folx installed, its sparse forward Laplacian for
  the ground state of a molecule (one state, not periodic) of
  laplacians.SPARSE_PAYS_FROM electrons or more on a CPU, else its dense one; without
  folx, jacfwd. `platform`: JAX's backend name (default: this process's)."""
  if not laplacians.FOLX.installed():
    return laplacians.JACFWD
  sparse = (system.n_electrons >= laplacians.SPARSE_PAYS_FROM and not system.periodic
            and system.states == 1 and (platform or jax.default_backend()) == 'cpu')
  return laplacians.FOLX_SPARSE if sparse else laplacians.FOLX


# dmc.tau = 'auto': the largest time step, Ha^-1, and its divisors (plan.dmc_time_steps).
TAU_CAP = 0.02  # The largest time step taken for any system (He, H2: the linear regime).
TAU_TIMES_Z = 0.04  # tau_1 Z: the core's length scales as 1/Z, its kinetic energy as Z^2.
TAU_RATIOS = (1, 2, 4)  # The time steps: tau_1 / each.


def dmc_time_steps(sys_cfg) -> tuple:
  """The time steps (Ha^-1) dmc.tau = 'auto' stands for: tau_1, tau_1 / 2, tau_1 / 4, with
  tau_1 = min(TAU_CAP, TAU_TIMES_Z / Z) for the largest charge Z the electrons see (the
  effective charge of an ECP atom), so that the electrons nearest a heavy nucleus move as
  far in units of its core as they do at He; for the electron gas tau_1 = TAU_CAP r_s^2,
  the Hamiltonian's own scaling (lengths as r_s, energies as r_s^-2)."""
  if sys_cfg.rs is not None:  # The electron gas (physics/systems.py).
    first = TAU_CAP * float(sys_cfg.rs) ** 2
  else:
    first = min(TAU_CAP, TAU_TIMES_Z / float(max(systems.make_system(sys_cfg).charges)))
  return tuple(float(f'{first / r:.4g}') for r in TAU_RATIOS)


def chunk_size_of(cfg, network: networks.Network) -> int:
  """optim.energy_chunk_size for `network`: 'auto' by the size of the network's largest
  intermediate on this process's view of all devices (loss.auto_chunk_size), else the
  walkers per chunk given."""
  setting = cfg.optim.energy_chunk_size
  if setting != 'auto':
    return int(setting)
  params = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  return loss.auto_chunk_size(network.log_psi, params, network.n_coords, network.dtype,
                              jax.devices())


def laplacian_of(cfg, network: networks.Network, system: systems.System,
                 key: jax.Array, time_auto: bool = True,
                 chunk_size: Optional[int] = None) -> tuple:
  """(method, ms per method name or None) for optim.laplacian: 'best' as best_laplacian
  says; 'auto' by timing the candidates on `network` at the initial walkers in chunks of
  `chunk_size` (None: chunk_size_of) (runtime/profiling.py), or without `time_auto` as 'best'
  (the method does not change the energy); a name, its method."""
  setting = cfg.optim.laplacian
  if setting == 'best' or (setting == 'auto' and not time_auto):
    return best_laplacian(system), None
  if setting != 'auto':
    return laplacians.METHODS[setting], None
  params = network.init(key)
  x = mcmc.init_positions(key, system, cfg.batch_size, cfg.mcmc.init_width, network.dtype)
  chunk_size = chunk_size_of(cfg, network) if chunk_size is None else chunk_size
  return profiling.choose_laplacian(network, system, params, x, chunk_size)


def recorded_laplacian(name: str) -> laplacians.Method:
  """The method a run recorded in resolved.json."""
  if name not in laplacians.METHODS:
    raise InputError(f'{RESOLVED}: optim.laplacian = {name!r} is not one of '
                     f'{", ".join(laplacians.METHODS)}')
  method = laplacians.METHODS[name]
  if not method.installed():
    raise InputError(f'the run was trained with the Laplacian {name!r}, which needs the '
                     f"optional package {method.package}: pip install 'ferminet_fast[folx]'")
  return method


def resolve(cfg, key: jax.Array, ctx=None, recorded: Optional[dict] = None,
            system: Optional[systems.System] = None, time_auto: bool = True) -> Plan:
  """The plan of validated, frozen settings `cfg`: the one place where a piece's name,
  'best' and 'auto' become objects. `recorded`: what an earlier stage of the run resolved
  (`recorded_of`), taken instead of resolving again; `time_auto`: whether an 'auto'
  Laplacian not recorded is chosen by timing (else 'best'). `ctx`: the device context the
  walkers are laid out on (environment/distributed.py)."""
  recorded = recorded or {}
  system = system or system_of(cfg)
  network = network_of(cfg.network, system, step.DTYPES[cfg.precision])
  chunk_size = recorded.get('optim.energy_chunk_size')
  chunk_size = chunk_size_of(cfg, network) if chunk_size is None else chunk_size
  timed = None
  if 'optim.laplacian' in recorded:
    laplacian = recorded_laplacian(recorded['optim.laplacian'])
  else:
    laplacian, timed = laplacian_of(cfg, network, system, key, time_auto, chunk_size)
  pieces = pieces_of(cfg, system, network, laplacian, chunk_size)
  return Plan(cfg, system, network, pieces, ctx, timed)


def build(cfg, key: jax.Array, ctx=None, recorded: Optional[dict] = None,
          system: Optional[systems.System] = None, time_auto: bool = True) -> Built:
  """A stage built from validated settings: its plan (`resolve`, with the same arguments),
  the step's parts and a fresh state."""
  resolved = resolve(cfg, key, ctx, recorded, system, time_auto)
  parts = resolved.parts()
  state = step.init_state(parts, resolved.system, cfg.batch_size, cfg.mcmc, key, ctx)
  return Built(resolved, parts, state)


def network_of(net_cfg, system: systems.System, dtype=jnp.float32) -> networks.Network:
  """The network the settings `net_cfg` describe for `system`, its ansatz, envelope ('auto':
  plane waves for the electron gas, else isotropic) and Jastrow factor resolved from their
  names; parameters in `dtype`."""
  envelope = envelopes.resolve(net_cfg.envelope, system.periodic, len(system.positions) > 0)
  return networks.make_network(net_cfg, system, dtype, networks.ANSATZES[net_cfg.network_type],
                               envelope, jastrows.JASTROWS[net_cfg.jastrow])


def pieces_of(cfg, system: systems.System, network: networks.Network,
              laplacian: laplacians.Method, chunk_size: int) -> step.Pieces:
  """The step's pieces: the Hamiltonian of `system` with the resolved Laplacian method, in
  the network's precision; the resolved chunk of walkers; the optimizer and clipping window
  resolved here from their names."""
  return step.Pieces(hamiltonian.of(system, laplacian, network.dtype),
                     optim.OPTIMIZERS[cfg.optim.optimizer],
                     loss.CLIPPING[cfg.optim.clip_method], chunk_size)


def make_parts(cfg, system, network, laplacian: laplacians.Method,
               chunk_size: Optional[int] = None) -> step.Parts:
  """The step's parts of a network built by hand (scripts, tests): the settings with the
  resolved Laplacian method and chunk of walkers (None: chunk_size_of)."""
  if chunk_size is None:
    chunk_size = chunk_size_of(cfg, network)
  pieces = pieces_of(cfg, system, network, laplacian, chunk_size)
  return Plan(cfg, system, network, pieces).parts()


def recorded_of(run_dir: str) -> dict:
  """What the run resolved (its resolved.json, written with its first checkpoint)."""
  path = os.path.join(run_dir, RESOLVED)
  if not os.path.exists(path):
    raise InputError(f'--run {run_dir!r} has checkpoints but no {RESOLVED}: it was not '
                     'written by this version of ferminet_fast')
  return rundir.read_json(path)
