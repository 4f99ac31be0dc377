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

import importlib.util
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ferminet_fast import hartree_fock, mcmc, networks, systems


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


class PretrainState(NamedTuple):
  params: object
  opt_state: object
  walkers: mcmc.Walkers  # log_psi holds log of the mixture density's square root.
  key: jax.Array


def make_pretrain_step(cfg, network: networks.Network, hf_orbitals: Callable, n: int) -> tuple:
  """(init, step): init(params, x (B, 3N), key) -> PretrainState; step(PretrainState) ->
  (PretrainState, mismatch): `pretrain.mcmc_steps` MCMC moves from the mixture (move width
  adapted after them, as in burn-in), then one Adam step on the mean squared orbital mismatch
  sum_{k, spin} |orbitals_k - HF|^2 per walker, averaged over walkers."""
  batch_orbitals = jax.vmap(network.orbitals, in_axes=(None, 0))
  batch_hf = jax.vmap(hf_orbitals)
  batch_log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))
  f = cfg.pretrain.hf_fraction

  def mixture_log_psi(params, x):
    """log sqrt(f |psi_HF|^2 + (1 - f) |psi_net|^2), the sampling density of pretraining."""
    log_hf = sum(networks.slogdet(m)[1] for m in batch_hf(x))
    terms = []
    if f > 0:
      terms.append(jnp.log(f) + 2.0 * log_hf)
    if f < 1:
      terms.append(jnp.log1p(-f) + 2.0 * batch_log_psi(params, x))
    return 0.5 * jax.nn.logsumexp(jnp.stack(terms), axis=0)

  sweep = mcmc.make_sweep(mixture_log_psi, cfg.pretrain.mcmc_steps)
  optimizer = optax.adam(cfg.pretrain.lr)

  def mismatch(params, x, targets):
    blocks = batch_orbitals(params, x)  # [(B, k, n_s, n_orb)]
    return sum(jnp.mean(jnp.sum((b - t[:, None]) ** 2, axis=(1, 2, 3)))
               for b, t in zip(blocks, targets))

  def step(state: PretrainState):
    key, k_mcmc = jax.random.split(state.key)
    walkers, pmove = sweep(state.params, state.walkers, k_mcmc)
    walkers = walkers._replace(width=mcmc.adapt_width(
        walkers.width, pmove, cfg.mcmc.target_pmove, cfg.mcmc.adapt_rate))
    targets = target_blocks(batch_hf(walkers.x), cfg.network.full_det, n)
    loss, grads = jax.value_and_grad(mismatch)(state.params, walkers.x, targets)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return PretrainState(params, opt_state, walkers, key), loss

  def init(params, x, key):
    return PretrainState(params, optimizer.init(params),
                         mcmc.Walkers(x, mixture_log_psi(params, x),
                                      jnp.asarray(cfg.mcmc.move_width, x.dtype)), key)

  return init, step


def pretrain(cfg, system: systems.System, network: networks.Network, params, x: jax.Array,
             key: jax.Array, say: Callable = print) -> tuple:
  """Runs cfg.pretrain.iterations steps from (params, walkers x (B, 3N)); returns
  (params, x, mismatch per step (iterations,))."""
  hf = hartree_fock.hartree_fock(system, cfg.pretrain.basis, cfg.pretrain.restricted)
  say(f'Pretrain {"ROHF" if cfg.pretrain.restricted else "UHF"}/{cfg.pretrain.basis} '
      f'energy {hf.energy:.6f} Ha; fitting the orbitals for {cfg.pretrain.iterations} steps')
  init, step = make_pretrain_step(cfg, network, hartree_fock.make_orbitals(hf, system),
                                  system.n_electrons)

  def run(state, n):
    """n <= CHUNK steps (n is traced, so one compilation serves every chunk length) inside one
    call: dispatching each step from Python cost ~0.8 ms of a ~4.7 ms Ne step."""
    def body(i, carry):
      state, losses = carry
      state, loss = step(state)
      return state, losses.at[i].set(loss)
    return jax.lax.fori_loop(0, n, body, (state, jnp.zeros((CHUNK,), x.dtype)))

  state = jax.jit(init)(params, x, key)
  run = jax.jit(run)
  losses = []
  for start in range(0, cfg.pretrain.iterations, CHUNK):
    n = min(CHUNK, cfg.pretrain.iterations - start)
    state, chunk = run(state, n)
    losses.append(chunk[:n])
  losses = np.concatenate([np.zeros((0,))] + jax.device_get(losses))
  if len(losses):
    say(f'Pretrain orbital mismatch {losses[0]:.4g} -> {losses[-1]:.4g}')
  return state.params, state.walkers.x, losses
