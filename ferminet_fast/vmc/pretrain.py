"""Hartree-Fock pretraining: fit the network's orbitals to UHF (or ROHF) orbitals.

A freshly initialised network is far from any physical wavefunction; VMC from there
spends its first steps finding the shell structure. As in FermiNet, the network's
orbitals (times envelopes, before the determinants) are first fitted by least squares
to the occupied Hartree-Fock orbitals from pyscf, at electron positions drawn by MCMC
from the mixture hf_fraction * |psi_HF|^2 + (1 - hf_fraction) * |psi_net|^2, so that the
fit covers where both wavefunctions live. Every determinant is fitted to the same HF
orbitals; with full_det the target is block diagonal (up electrons in up orbitals).

pyscf is an optional dependency (pip install 'ferminet_fast[pyscf]'); without it the
pretraining is skipped with a message. It is called once, for the SCF; the orbitals are
evaluated on the device (hartree_fock.py), so the whole pretraining step is one jitted call.
"""

import dataclasses
import importlib.util
import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ferminet_fast.environment import dispatch
from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import hartree_fock, periodic_hartree_fock, systems
from ferminet_fast.vmc import mcmc
from ferminet_fast.wavefunction import networks


CHUNK = 100  # Pretraining steps per jitted call.


def available() -> bool:
  return importlib.util.find_spec('pyscf') is not None


def target_blocks(hf_orbitals: list, full_det: bool, n: int) -> list:
  """The HF orbitals laid out like the network's blocks (B, n_s, n_orb): with full_det,
  spin-up electrons fill the first n_up columns and spin-down the last n_down."""
  if not full_det:
    return hf_orbitals
  out, col = [], 0
  for m in hf_orbitals:
    b, n_s, _ = m.shape
    out.append(jnp.concatenate([jnp.zeros((b, n_s, col), m.dtype), m,
                                jnp.zeros((b, n_s, n - col - n_s), m.dtype)], axis=-1))
    col += n_s
  return out


def squared_modulus(z: jax.Array) -> jax.Array:
  """|z|^2, real, for real or complex z (smooth where z = 0, unlike jnp.abs)."""
  return jnp.real(z) ** 2 + jnp.imag(z) ** 2 if jnp.iscomplexobj(z) else z * z


class PretrainState(NamedTuple):
  params: object
  opt_state: object
  walkers: mcmc.Walkers  # log_psi holds log of the mixture density's square root.
  key: jax.Array


def make_pretrain_step(pretrain_cfg, mcmc_cfg, network: networks.Network, hf_orbitals: Callable,
                       n: int, geometries: Optional[tuple] = None,
                       wrap: Callable = lambda x, geometry=None: x) -> tuple:
  """(init, step) from the `pretrain` and `mcmc` settings: init(params, x (B, 3N), key) ->
  PretrainState; step(PretrainState) -> (PretrainState, mismatch): `mcmc_steps` MCMC moves
  from the mixture (move width adapted after them, as in burn-in), then one Adam step on the
  mean squared orbital mismatch sum_{k, spin} |orbitals_k - HF|^2 per walker, averaged over
  walkers. hf_orbitals(x (3N,)) -> [(n_s, n_s) per spin]. Over a set of G geometries,
  `geometries` = (nuclei (G, M, 3), HF data (G, ...)) and hf_orbitals(x, one's data): G
  groups of B / G walkers in a row, a chain of each one's mixture with its own width (G,),
  the mismatch the mean over the geometries. `wrap`: systems.wrap_in, as in training."""
  f = pretrain_cfg.hf_fraction

  def at(where):
    """(orbitals, HF orbitals, log|psi|) of walkers x (B, 3N) at one geometry, `where` =
    (nuclei, HF data), or at the network's own (None)."""
    geometry, data = where if where is not None else (None, None)
    nuclei = systems.network_arguments(geometry)
    hf = hf_orbitals if where is None else lambda x: hf_orbitals(x, data)
    return (jax.vmap(lambda p, x: network.orbitals(p, x, *nuclei), in_axes=(None, 0)),
            jax.vmap(hf), jax.vmap(lambda p, x: network.log_psi(p, x, *nuclei),
                                   in_axes=(None, 0)))

  def mixture_log_psi(params, x, where=None):
    """log sqrt(f |psi_HF|^2 + (1 - f) |psi_net|^2), the sampling density of pretraining."""
    _, batch_hf, batch_log_psi = at(where)
    log_hf = sum(networks.slogdet(m)[1] for m in batch_hf(x))
    terms = []
    if f > 0:
      terms.append(jnp.log(f) + 2.0 * log_hf)
    if f < 1:
      terms.append(jnp.log1p(-f) + 2.0 * batch_log_psi(params, x))
    return 0.5 * jax.nn.logsumexp(jnp.stack(terms), axis=0)

  sweep = mcmc.make_sweep(mixture_log_psi, pretrain_cfg.mcmc_steps,
                          lambda x, where=None: wrap(x, *(() if where is None else where[:1])))
  optimizer = optax.adam(pretrain_cfg.lr)

  def mismatch(params, x, where=None):
    batch_orbitals, batch_hf, _ = at(where)
    targets = target_blocks(batch_hf(x), network.full_det, n)
    blocks = batch_orbitals(params, x)  # [(B, k, n_s, n_orb)], complex at a twist
    return sum(jnp.mean(jnp.sum(squared_modulus(b - t[:, None]), axis=(1, 2, 3)))
               for b, t in zip(blocks, targets))

  def adapted(walkers, pmove):
    return walkers._replace(width=mcmc.adapt_width(
        walkers.width, pmove, mcmc_cfg.target_pmove, mcmc_cfg.adapt_rate))

  def step(state: PretrainState):
    key, k_mcmc = jax.random.split(state.key)
    if geometries is None:
      walkers, pmove = sweep(state.params, state.walkers, k_mcmc)
      walkers = adapted(walkers, pmove)
      loss, grads = jax.value_and_grad(mismatch)(state.params, walkers.x)
    else:
      g = geometries[0].positions.shape[0]
      chains = mcmc.as_chains(state.walkers, g)
      chains, pmove = jax.vmap(sweep, in_axes=(None, 0, 0, 0))(
          state.params, chains, jax.random.split(k_mcmc, g), geometries)
      chains = adapted(chains, pmove)
      loss, grads = jax.value_and_grad(lambda p: jnp.mean(jax.vmap(
          mismatch, in_axes=(None, 0, 0))(p, chains.x, geometries)))(state.params)
      walkers = mcmc.in_a_row(chains)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return PretrainState(params, opt_state, walkers, key), loss

  def init(params, x, key):
    width = jnp.asarray(mcmc_cfg.move_width, x.dtype)
    if geometries is None:
      return PretrainState(params, optimizer.init(params),
                           mcmc.Walkers(x, mixture_log_psi(params, x), width), key)
    g = geometries[0].positions.shape[0]
    log_psi = jax.vmap(mixture_log_psi, in_axes=(None, 0, 0))(
        params, x.reshape(g, -1, x.shape[-1]), geometries)
    return PretrainState(params, optimizer.init(params),
                         mcmc.Walkers(x, log_psi.reshape(-1), jnp.full((g,), width)), key)

  return init, step


def _molecular_reference(pretrain_cfg, system: systems.System) -> tuple:
  """Molecular UHF / ROHF from pyscf (open boundaries)."""
  p = pretrain_cfg
  hf = hartree_fock.hartree_fock(system, p.basis, p.restricted, p.ecp_basis)
  return hartree_fock.make_orbitals(hf, system), 'ROHF' if p.restricted else 'UHF', hf.energy


def _periodic_reference(pretrain_cfg, system: systems.System) -> tuple:
  """pyscf.pbc's HF of the simulation cell (periodic_hartree_fock.for_system)."""
  p = pretrain_cfg
  hf, method = periodic_hartree_fock.for_system(system, p.basis, p.restricted)
  return periodic_hartree_fock.make_orbitals(hf, *system.electrons), method, hf.energy


# The Hartree-Fock reference of each kind of boundary (physics/boundary.py), by its type.
_REFERENCES = {boundary_lib.Open: _molecular_reference,
               boundary_lib.Periodic: _periodic_reference}


def reference_orbitals(pretrain_cfg, system: systems.System) -> tuple:
  """(x (3N,) -> [(n_s, n_s) HF orbitals per spin], the method's name, its energy in Ha)
  from pyscf: molecular UHF / ROHF for open boundaries; for a crystal, pyscf.pbc's HF of the
  simulation cell (k-point RHF of the primitive cell unfolded, or Gamma-point;
  periodic_hartree_fock.for_system), the energy per simulation cell."""
  return _REFERENCES[type(system.boundary)](pretrain_cfg, system)


def surface_orbitals(pretrain_cfg, system: systems.System) -> tuple:
  """(hf_orbitals(x, data), (the geometries (a systems.Geometry of (G, ...)), data (G,
  ...)), the method's name, the energies (G,) Ha): the molecular HF at each geometry of the
  set (system.surface) as one function of data (hartree_fock.orbitals_over_geometries), or
  over a scan of a crystal's cell pyscf.pbc's HF in each cell
  (periodic_hartree_fock.orbitals_over_cells)."""
  orbitals, data, method, hfs = _SURFACE_REFERENCES[type(system.boundary)](pretrain_cfg, system)
  return orbitals, (system.geometries, data), method, np.array([hf.energy for hf in hfs])


def _molecular_surface(pretrain_cfg, system: systems.System) -> tuple:
  """(orbitals, data, the method's name, the HF of each geometry) of a molecule's set."""
  p = pretrain_cfg
  hfs = [hartree_fock.hartree_fock(dataclasses.replace(system, positions=r, surface=None),
                                   p.basis, p.restricted, p.ecp_basis)
         for r in system.geometries.positions]
  orbitals, data = hartree_fock.orbitals_over_geometries(hfs, system)
  return orbitals, data, 'ROHF' if p.restricted else 'UHF', hfs


def _periodic_surface(pretrain_cfg, system: systems.System) -> tuple:
  """(orbitals, data, the method's name, the HF of each cell) of a scan of a crystal's
  cell."""
  p = pretrain_cfg
  hfs, methods = zip(*[periodic_hartree_fock.for_system(
      systems.at_scale(system, float(scale)), p.basis, p.restricted)
      for scale in system.geometries.scale])
  orbitals, data = periodic_hartree_fock.orbitals_over_cells(hfs, *system.electrons)
  return orbitals, data, methods[0], hfs


# The Hartree-Fock reference over a set of geometries of each kind of boundary, by its type.
_SURFACE_REFERENCES = {boundary_lib.Open: _molecular_surface,
                       boundary_lib.Periodic: _periodic_surface}


class Pretraining(NamedTuple):
  """Pretraining dispatched to the devices and maybe still running (JAX dispatches
  asynchronously): its final parameters and walkers (B, 3N), and the orbital mismatch of
  each chunk of steps. Reading a value waits for it."""
  params: object
  x: jax.Array
  chunks: list  # The mismatch of each chunk's steps, (steps of the chunk,) each.

  def wait(self, beat: Optional[Callable[[str], None]] = None) -> None:
    """Waits for every chunk; `beat(what comes next)`, if given, as each completes."""
    for i, chunk in enumerate(self.chunks):
      chunk.block_until_ready()
      if beat is not None:
        beat(f'pretraining chunk {i + 2} of {len(self.chunks)}' if i + 1 < len(self.chunks)
             else 'the pretrained walkers and parameters')

  def mismatch(self) -> np.ndarray:
    """The mismatch per step (iterations,), once every step has run."""
    return np.concatenate([np.zeros((0,))] + jax.device_get(self.chunks))


def start(pretrain_cfg, mcmc_cfg, system: systems.System, network: networks.Network, params,
          x: jax.Array, key: jax.Array, say: Callable = print) -> Pretraining:
  """Dispatches `pretrain_cfg.iterations` steps from (params, walkers x (B, 3N)) without
  waiting for them: the caller can compile the training step meanwhile."""
  p = pretrain_cfg
  geometries = None
  if system.surface is None:
    hf_orbitals, method, energy = reference_orbitals(p, system)
    said = f'energy {energy:.6f} Ha'
  else:
    hf_orbitals, geometries, method, energies = surface_orbitals(p, system)
    geometries = jax.tree.map(lambda a: jnp.asarray(a, x.dtype), geometries)
    said = (f'energies {energies.min():.6f} to {energies.max():.6f} Ha over '
            f'{len(energies)} geometries')
  say(f'Pretrain {method}/{p.basis} {said}; fitting the orbitals for {p.iterations} steps')
  init, step = make_pretrain_step(p, mcmc_cfg, network, hf_orbitals, system.n_electrons,
                                  geometries, systems.wrap_in(system.boundary))

  def run(state, n):
    """n <= CHUNK steps (n is traced, so one compilation serves every chunk length) inside one
    call: dispatching each step from Python was a sizeable part of a step (BENCHMARKS.md,
    "Convergence at size")."""
    def body(i, carry):
      state, losses = carry
      state, loss = step(state)
      return state, losses.at[i].set(loss)
    return jax.lax.fori_loop(0, n, body, (state, jnp.zeros((CHUNK,), x.dtype)))

  state = jax.jit(init)(params, x, key)
  run = jax.jit(run)
  chunks, ahead = [], dispatch.Bounded(dispatch.LIMIT // 2)  # Two programs per chunk.
  for first in range(0, p.iterations, CHUNK):
    n = min(CHUNK, p.iterations - first)
    state, chunk = run(state, n)
    chunks.append(chunk[:n])
    ahead.pushed(chunks[-1])
  return Pretraining(state.params, state.walkers.x, chunks)


def _say_mismatch(losses: np.ndarray, say: Callable):
  if len(losses):
    say(f'Pretrain orbital mismatch {losses[0]:.4g} -> {losses[-1]:.4g}')


def pretrain(pretrain_cfg, mcmc_cfg, system: systems.System, network: networks.Network, params,
             x: jax.Array, key: jax.Array, say: Callable = print) -> tuple:
  """Runs `pretrain_cfg.iterations` steps from (params, walkers x (B, 3N)) to the end;
  returns (params, x, mismatch per step (iterations,))."""
  done = start(pretrain_cfg, mcmc_cfg, system, network, params, x, key, say)
  losses = done.mismatch()
  _say_mismatch(losses, say)
  return done.params, done.x, losses


def pretrain_state(pretrain_cfg, mcmc_cfg, system: systems.System, network: networks.Network,
                   walkers_log_psi: Callable, state, say: Callable = print) -> tuple:
  """(`state` (a fresh TrainState) with its parameters pretrained and its walkers moved to
  where the pretraining left them, its layout over devices kept; `finish`). The steps are
  dispatched, not awaited, so that the training step compiles while they run (a start-up
  cost of its own otherwise, BENCHMARKS.md); `finish()` waits for them and says how the
  fit went (`finish(beat)`: a watchdog's beat as each chunk of steps completes). Without
  pyscf, says so and returns `state` unchanged."""
  if not available():
    say(f'Pretrain skipped: config.pretrain.iterations = {pretrain_cfg.iterations} needs the '
        "optional package pyscf (pip install 'ferminet_fast[pyscf]')")
    return state, lambda beat=None: None
  t0 = time.perf_counter()
  key, k_pre = jax.random.split(state.key)
  running = start(pretrain_cfg, mcmc_cfg, system, network, state.params, state.walkers.x,
                  k_pre, say)
  # Jitted: op by op, each operation is dispatched and compiled on its own, a noticeable
  # part of start-up (BENCHMARKS.md, "Start-up at Ne and N2 with pretraining").
  walkers = state.walkers._replace(
      x=running.x, log_psi=jax.jit(walkers_log_psi)(running.params, running.x))
  shardings = jax.tree.map(lambda a: a.sharding, state)

  def finish(beat: Optional[Callable[[str], None]] = None):
    running.wait(beat)
    _say_mismatch(running.mismatch(), say)
    say(f'Pretrain finished {time.perf_counter() - t0:.1f} s after it began')

  return jax.device_put(state._replace(params=running.params, walkers=walkers, key=key),
                        shardings), finish
