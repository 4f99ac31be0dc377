"""Fixed-node (fixed-phase in a cell at a twist) diffusion Monte Carlo (DMC) with a trained
network as the trial function.

Importance-sampled DMC (Reynolds, Ceperley, Alder & Lester, J. Chem. Phys. 77, 5593 (1982))
in the form of Umrigar, Nightingale & Runge, J. Chem. Phys. 99, 2865 (1993) (UNR):

- drift-diffusion moves x' = x + tau v(x) + sqrt(tau) chi, chi ~ N(0, 1), with the drift
  v = grad log|psi| limited electron by electron (UNR eq. 33, a = DRIFT_A):
  v_i -> v_i (-1 + sqrt(1 + 2 a |v_i|^2 tau)) / (a |v_i|^2 tau); of one electron at a time
  in a sweep over the N (MOVES: 'electron', UNR's electron-by-electron moves) or of all at
  once ('all');
- a Metropolis accept/reject of each move with the Green's-function ratio, so the walk
  samples |psi|^2 exactly at any tau when the branching is off (detailed balance); a move to
  where psi has the other sign is rejected, so no walker crosses the trial function's node
  (fixed node);
- weights multiplied by UNR's expected branching factor exp(tau_eff (E_T - p (S' + S) / 2 -
  (1 - p) S)), with p the acceptance probability, S and S' the local energies before and
  after the move (electron moves: p = 1, S and S' at the start and end of the sweep), limited
  as Zen, Sorella, Gillan, Michaelides &
  Alfe, Phys. Rev. B 93, 241118(R) (2016): S = E_best + sign(E_L - E_best) min(|E_L -
  E_best|, ZEN_ALPHA sqrt(N / tau)), a cut-off that is size-consistent;
- the effective time step tau_eff = tau <p dR^2> / <dR^2> from the accepted (expected) and
  proposed squared displacements (UNR; of each electron's move with electron moves),
  accumulated over the population and the run at this tau: one for all walkers (as QMCPACK);
- a fixed population: after every step the walkers are resampled by weight with a comb
  (stochastic reconfiguration, Assaraf, Caffarel & Khelif, Phys. Rev. E 61, 4566 (2000)),
  each then of unit weight, so every array keeps its shape and the whole step is one jitted
  function. The trial energy E_T follows the running estimate E_best (feedback); with unit
  weights after each step it only sets the scale of the step's weights, whose mean gives
  the growth estimate E_T - log<w> / tau_eff (a check of the mixed estimate).

The mixed estimate of the energy at a step is sum_i w_i E_L(x_i) / sum_i w_i. The bias of
the fixed population (of order 1 / walkers) is not corrected.

Periodic cells (a crystal, the electron gas): the local energy is the cell's Hamiltonian's
(its Ewald sum, as VMC's: the run's Hamiltonian object), and every move is wrapped into
the cell by the system's boundary (physics/boundary.py; the identity for a molecule) after
its Green's functions are taken of the displacement itself. At a twist the trial function
is complex, psi = |psi| e^{i phi}, and the walk is fixed-phase DMC (Ortiz, Ceperley and
Martin, Phys. Rev. Lett. 71, 2777 (1993)): it is guided by |psi|^2 (drift grad log|psi|),
its local energy is Re(H psi / psi), which holds the fixed-phase potential |grad phi|^2 / 2,
and no move is rejected for the phase (node_sign: a complex psi's walkers carry sign 1).
A real psi keeps its node rejection, the fixed-phase walk's limit for a real function (the
fixed-phase potential is infinite on the node). The ECP's moves below are of molecules.

Effective core potentials (ECP_MOVES: dmc.ecp_moves). Their non-local part couples x to the
configurations x' that move one electron i to a point q of the quadrature about a nucleus
(physics/ecp.py), with matrix elements V_x'x psi(x') / psi(x) whose sum is the non-local
energy. With 'locality' they act through the locality approximation (Mitas, Shirley &
Ceperley, J. Chem. Phys. 95, 3467 (1991)): applied to the trial function, as in the VMC
local energy; the energy is then not an upper bound. With 'tmoves' the walk is that of
the effective Hamiltonian of T-moves (Casula, Phys. Rev. B 74, 161102(R) (2006)), whose
fixed-node energy is an upper bound of the ECP Hamiltonian's, in the size-consistent form
of Casula, Moroni, Sorella & Filippi, J. Chem. Phys. 132, 154113 (2010), their version 1
(QMCPACK's nonlocalmoves = v1):
- the sign-violating elements (V psi'/psi > 0) stay on the diagonal (the sign-flip term);
  the sign-obeying ones (< 0) give T = -tau V psi'/psi > 0, the T-moves;
- after the drift-diffusion part of the step (the electron sweep, or the all-electron move
  with its accept/reject), the electrons in turn, each from the configuration the ones
  before it left, jump to point q with probability T_q / (1 + sum_q' T_q') or stay with
  probability 1 / (1 + sum_q' T_q') (heat bath over that electron's sign-obeying
  elements, with the quadrature frame that the energy takes at that configuration). A
  jump may cross the trial function's node (those elements are sign-obeying too); the
  drift-diffusion moves never do;
- the weights keep the local energy E_L of the locality approximation, which is also the
  effective Hamiltonian's: E_L = E_L^TM + V^-, with E_L^TM the T-move local energy
  (kinetic, local potentials, sign-flip term) and V^- the sum of the sign-obeying
  elements, whose share of the weight is the T matrix's normalisation 1 + tau |V^-| =
  exp(-tau V^-) + O(tau^2) (Casula 2006; QMCPACK weighs the same way).
With electron moves the sweep's one local energy is evaluated after the T-moves; with
all-electron moves a second one where the T-moves took the walkers (kept where they jumped).
"""

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from ferminet_fast import choices
from ferminet_fast.physics import boundary, hamiltonian

DRIFT_A = 1.0  # UNR's a of the drift limit (a = 1: the limit of their eq. 33 away from nuclei).
ZEN_ALPHA = 0.2  # Zen et al.'s alpha of the local-energy cut-off alpha sqrt(N / tau).


class Walkers(NamedTuple):
  """The DMC population (B walkers) and what each carries, all evaluated at x."""
  x: jax.Array  # (B, 3N) bohr.
  sign: jax.Array  # (B,) sign of psi.
  log_psi: jax.Array  # (B,) log|psi|.
  local_energy: jax.Array  # (B,) Ha.
  drift: jax.Array  # (B, 3N) grad log|psi|, 1/bohr.


class DMCState(NamedTuple):
  """Everything a DMC run at one tau carries from step to step (a pytree; checkpointed)."""
  walkers: Walkers
  key: jax.Array
  step: jax.Array  # () int32, steps done at this tau (equilibration included).
  e_best: jax.Array  # () Ha, the running estimate: reference of the cut-off and E_T.
  e_sum: jax.Array  # () Ha, sum of the step energies that e_best averages ...
  e_count: jax.Array  # () ... and their number.
  moved: jax.Array  # () sum of p dR^2 over walkers and steps (bohr^2) ...
  proposed: jax.Array  # () ... and of dR^2: tau_eff = tau moved / proposed.


class StepStats(NamedTuple):
  """One step's results, device scalars."""
  energy: jax.Array  # Ha, the mixed estimate sum w E_L / sum w.
  growth: jax.Array  # Ha, E_T - log<w> / tau_eff.
  acceptance: jax.Array  # Mean acceptance probability of the moves.
  tau_eff: jax.Array  # Ha^-1, the running effective time step.
  nonfinite: jax.Array  # Walkers whose proposal or state was not finite (rejected / dropped).


def limit_drift(v: jax.Array, tau, a: float = DRIFT_A) -> jax.Array:
  """UNR's limited drift, electron by electron: v (3N,) -> v (-1 + sqrt(1 + 2 a v^2 tau)) /
  (a v^2 tau), which is v for small v^2 tau and at most sqrt(2 / (a tau)) in length."""
  vi = v.reshape(-1, 3)
  v2 = jnp.sum(vi * vi, axis=-1, keepdims=True)
  avt = a * v2 * tau
  safe = jnp.where(avt > 1e-8, avt, 1.0)
  factor = jnp.where(avt > 1e-8, (jnp.sqrt(1.0 + 2.0 * safe) - 1.0) / safe, 1.0 - 0.5 * avt)
  return (vi * factor).reshape(v.shape)


def limit_energy(e: jax.Array, e_best, cutoff) -> jax.Array:
  """Zen et al.'s cut-off: E_L kept within E_best +- cutoff (cutoff = ZEN_ALPHA sqrt(N / tau))."""
  return e_best + jnp.clip(e - e_best, -cutoff, cutoff)


def comb(key: jax.Array, weights: jax.Array) -> jax.Array:
  """(B,) indices of B walkers drawn by weight with one uniform number (a comb of B evenly
  spaced teeth over the cumulative weights): walker i is chosen floor or ceil of
  B w_i / sum w times, so the weighted mean of any quantity is kept on average."""
  b = weights.shape[0]
  c = jnp.cumsum(weights)
  teeth = (jax.random.uniform(key, (), c.dtype) + jnp.arange(b, dtype=c.dtype)) * (c[-1] / b)
  return jnp.clip(jnp.searchsorted(c, teeth, side='right'), 0, b - 1)


def node_sign(sign: jax.Array) -> jax.Array:
  """The sign a walker carries: a real psi's sign (its moves never cross the node), or for
  a complex psi's phase 1 (fixed phase: the walk has no node to respect; Ortiz, Ceperley
  and Martin, Phys. Rev. Lett. 71, 2777 (1993)). (B,) or (), real."""
  return jnp.ones_like(jnp.real(sign)) if jnp.iscomplexobj(sign) else sign


def make_evaluate(network, ham: hamiltonian.Hamiltonian, chunk_size: int = 0) -> Callable:
  """(params, x (B, 3N), geometry=None) -> Walkers at x: sign (node_sign), log|psi|, local
  energy under the Hamiltonian `ham` (its Coulomb energy the cell's Ewald sum in a cell;
  with the ECP's whole non-local energy: the E_L of the locality approximation, which the
  T-moves' weights take as well; for a complex psi the fixed-phase Re(H psi / psi)) and
  grad log|psi| of each walker, in chunks of `chunk_size` walkers (0: all at once), the
  nuclei of `geometry` (a systems.Geometry; None: the system's own)."""
  local = ham.local_energy_and_gradient(network.log_psi, network.log_psi_phase)
  ecp_energy = ham.ecp_energy(network.apply)

  def one(params, x, geometry):
    e, g = local(params, x, geometry)
    at = () if geometry is None else (geometry.positions,)
    if ecp_energy is not None:
      e = e + ecp_energy(params, x, *at)
    sign, log_psi = network.apply(params, x, *at)
    return node_sign(sign), log_psi, e, g

  def evaluate(params, x, geometry=None):
    if chunk_size and chunk_size < x.shape[0]:
      out = jax.lax.map(lambda xi: one(params, xi, geometry), x, batch_size=chunk_size)
    else:
      out = jax.vmap(lambda p, xi: one(p, xi, geometry), in_axes=(None, 0))(params, x)
    return Walkers(x, *out)

  return evaluate


def init_state(evaluate: Callable, params, x: jax.Array, key: jax.Array,
               e_best=None, geometry=None) -> DMCState:
  """The state at the start of a tau: walkers at x (from VMC or the previous tau), the
  estimate e_best (Ha) from before, or None: the median local energy of the walkers; the
  nuclei of `geometry` (None: the system's own)."""
  zero = jnp.zeros((), x.dtype)
  walkers = evaluate(params, x, geometry)
  if e_best is None:
    e_best = jnp.nanmedian(jnp.where(jnp.isfinite(walkers.local_energy),
                                     walkers.local_energy, jnp.nan))
  return DMCState(walkers, key, jnp.zeros((), jnp.int32), jnp.asarray(e_best, x.dtype),
                  zero, zero, zero, zero)


def _propose(w: Walkers, key, tau):
  """(x', ln G(x'<-x) without its constant, dR^2): the drift-diffusion proposal, x' not
  wrapped into a cell (the Green's functions take the displacement itself)."""
  v = jax.vmap(limit_drift, in_axes=(0, None))(w.drift, tau)
  chi = jax.random.normal(key, w.x.shape, w.x.dtype)
  x_new = w.x + tau * v + jnp.sqrt(tau) * chi
  return x_new, -0.5 * jnp.sum(chi * chi, axis=-1), jnp.sum((x_new - w.x) ** 2, axis=-1)


class Moved(NamedTuple):
  """What a move of the population (B walkers) gives the step's branching and statistics."""
  walkers: Walkers  # Where each walker is after the move (accepted or not), evaluated.
  new_energy: jax.Array  # (B,) Ha, E_L at the end point S' of the branching factor ...
  finite: jax.Array  # (B,) ... where this is true (else E_best stands in).
  p: jax.Array  # (B,) weight of S' in the branching factor, p S' + (1 - p) S (UNR).
  healthy: jax.Array  # (B,) whether the walker was finite before the move.
  moved: jax.Array  # () the state's sum of p dR^2 with this move's added (bohr^2) ...
  proposed: jax.Array  # () ... and of dR^2.
  acceptance: jax.Array  # (B,) mean acceptance probability of the walker's moves.
  nonfinite: Optional[jax.Array] = None  # (B,) a proposal not finite (None: ~finite).


def _healthy(w: Walkers) -> jax.Array:
  return jnp.isfinite(w.local_energy) & jnp.isfinite(w.log_psi) & jnp.all(jnp.isfinite(w.x), -1)


def make_all_electron_move(evaluate: Callable, psi: Optional[Callable], tau: float,
                           relocate: Optional[Callable] = None,
                           wrap: Callable = boundary.OPEN.wrap) -> Callable:
  """(params, DMCState, k_move, k_accept, geometry) -> Moved: every electron of a walker moved
  at once by drift and diffusion, the move accepted or rejected as a whole with the
  Metropolis-Hastings ratio (UNR); then, with `relocate` (a record of ECP_MOVES made it),
  the T-moves, the walkers that jumped evaluated again (UNR's branching factor is of the
  drift-diffusion move). `wrap` (the system's boundary's: x (..., 3N) -> x in the cell)
  takes the proposal into the cell before it is evaluated. `psi` is not needed (the
  record's common signature)."""
  del psi

  def move(params, s: DMCState, k_move, k_accept, geometry=None) -> Moved:
    old = s.walkers
    x_new, log_g_fwd, dr2 = _propose(old, k_move, tau)
    new = evaluate(params, wrap(x_new), geometry)
    v_new = jax.vmap(limit_drift, in_axes=(0, None))(new.drift, tau)
    back = old.x - x_new - tau * v_new
    log_g_back = -0.5 * jnp.sum(back * back, axis=-1) / tau
    finite = (jnp.isfinite(new.log_psi) & jnp.isfinite(new.local_energy)
              & jnp.all(jnp.isfinite(new.drift), axis=-1) & jnp.all(jnp.isfinite(x_new), -1))
    healthy = (jnp.isfinite(old.local_energy) & jnp.isfinite(old.log_psi)
               & jnp.all(jnp.isfinite(old.x), axis=-1))
    log_ratio = 2.0 * (new.log_psi - old.log_psi) + log_g_back - log_g_fwd
    movable = finite & healthy & (new.sign == old.sign)  # Never across the node.
    p = jnp.where(movable, jnp.exp(jnp.minimum(0.0, jnp.where(movable, log_ratio, 0.0))), 0.0)
    accept = jax.random.uniform(k_accept, p.shape, p.dtype) < p
    pick = lambda a, b: jnp.where(accept.reshape(-1, *[1] * (a.ndim - 1)), a, b)  # noqa: E731
    walkers = jax.tree.map(pick, new, old)
    if relocate is not None:
      walkers = _relocated(evaluate, relocate, params, walkers, k_move, geometry)
    moved = s.moved + jnp.sum(p * dr2)
    proposed = s.proposed + jnp.sum(jnp.where(finite & healthy, dr2, 0.0))
    return Moved(walkers, new.local_energy, finite, p, healthy, moved, proposed, p)

  return move


def make_psi(network) -> Callable:
  """(params, x (B, 3N), geometry=None) -> (sign (B,), log|psi| (B,), grad log|psi| (B, 3N)):
  the trial function and its gradient alone (no Laplacian), for the electron moves; the
  sign as node_sign gives it."""
  def one(params, x, geometry):
    at = () if geometry is None else (geometry.positions,)
    def f(x):
      sign, log_psi = network.apply(params, x, *at)
      return log_psi, sign
    (log_psi, sign), grad = jax.value_and_grad(f, has_aux=True)(x)
    return node_sign(sign), log_psi, grad

  return lambda params, x, geometry=None: jax.vmap(one, in_axes=(None, 0, None))(
      params, x, geometry)


def make_electron_move(evaluate: Callable, psi: Callable, tau: float,
                       relocate: Optional[Callable] = None,
                       wrap: Callable = boundary.OPEN.wrap) -> Callable:
  """(params, DMCState, k_move, k_accept, geometry) -> Moved: a sweep over the N electrons of
  every walker, each moved alone by its (limited) drift and a Gaussian of variance tau,
  accepted or rejected with its own Metropolis-Hastings ratio |psi'|^2 G(x <- x') /
  (|psi|^2 G(x' <- x)), never across the node (UNR's electron-by-electron moves, their
  sec. III.C; as QMCPACK's and CASINO's DMC). `psi` (make_psi) gives log|psi| and its
  gradient after each proposal (the whole network recomputed); the local energy is
  evaluated once, after the sweep, and the branching factor is then exp(tau_eff (E_T -
  (S + S') / 2)) with S, S' at the sweep's start and end. With `relocate` (a record of
  ECP_MOVES made it) the T-moves follow the sweep, before that evaluation. Each moved
  electron is wrapped by `wrap` (the system's boundary's) into the cell. A walker whose
  end point is not finite keeps its start (the sweep rejected, counted as not finite)."""
  sqrt_tau = tau ** 0.5

  def move(params, s: DMCState, k_move, k_accept, geometry=None) -> Moved:
    old = s.walkers
    b, n = old.x.shape[0], old.x.shape[1] // 3
    chi = jax.random.normal(k_move, (n, b, 3), old.x.dtype)
    uniform = jax.random.uniform(k_accept, (n, b), old.x.dtype)
    healthy = _healthy(old)

    def electron(i, carry):
      x, sign, log_psi, grad, moved, proposed, p_sum, bad = carry
      x3, g3 = x.reshape(b, n, 3), grad.reshape(b, n, 3)
      xi = x3[:, i]
      v = jax.vmap(limit_drift, in_axes=(0, None))(g3[:, i], tau)
      xi_new = xi + tau * v + sqrt_tau * chi[i]
      x_new = x3.at[:, i].set(wrap(xi_new)).reshape(b, 3 * n)
      sign_new, log_new, grad_new = psi(params, x_new, geometry)
      v_new = jax.vmap(limit_drift, in_axes=(0, None))(grad_new.reshape(b, n, 3)[:, i], tau)
      back = xi - xi_new - tau * v_new
      log_ratio = (2.0 * (log_new - log_psi) - 0.5 * jnp.sum(back * back, -1) / tau
                   + 0.5 * jnp.sum(chi[i] * chi[i], -1))
      finite = (jnp.isfinite(log_new) & jnp.all(jnp.isfinite(grad_new), -1)
                & jnp.all(jnp.isfinite(xi_new), -1))
      movable = finite & healthy & (sign_new == sign)  # Never across the node.
      p = jnp.where(movable, jnp.exp(jnp.minimum(0.0, jnp.where(movable, log_ratio, 0.0))),
                    0.0)
      accept = uniform[i] < p
      dr2 = jnp.sum((xi_new - xi) ** 2, -1)
      pick = lambda a, c: jnp.where(accept.reshape(-1, *[1] * (a.ndim - 1)), a, c)  # noqa
      return (pick(x_new, x), pick(sign_new, sign), pick(log_new, log_psi),
              pick(grad_new, grad), moved + p * dr2,
              proposed + jnp.where(finite & healthy, dr2, 0.0), p_sum + p, bad | ~finite)

    zero = jnp.zeros((b,), old.x.dtype)
    carry = (old.x, old.sign, old.log_psi, old.drift, zero, zero, zero,
             jnp.zeros((b,), bool))
    x, sign, log_psi, _, moved, proposed, p_sum, bad = jax.lax.fori_loop(0, n, electron, carry)
    if relocate is not None:
      x = relocate(params, x, sign, log_psi, _tmove_key(k_move), geometry).x
    new = evaluate(params, x, geometry)
    finite = (jnp.isfinite(new.log_psi) & jnp.isfinite(new.local_energy)
              & jnp.all(jnp.isfinite(new.drift), axis=-1))
    keep = lambda a, c: jnp.where(finite.reshape(-1, *[1] * (a.ndim - 1)), a, c)  # noqa
    walkers = jax.tree.map(keep, new, old)
    return Moved(walkers, walkers.local_energy, finite, finite.astype(x.dtype), healthy,
                 s.moved + jnp.sum(moved), s.proposed + jnp.sum(proposed), p_sum / n,
                 (bad | ~finite) & healthy)

  return move


class TMove(NamedTuple):
  """The T-move of one electron of one configuration x: where it may jump and how likely."""
  points: jax.Array  # (P, 3) bohr, the quadrature points about the atoms with an ECP.
  p: jax.Array  # (P,) T_q / (1 + sum T), T_q = tau max(0, -V_x'x psi(x') / psi(x)).
  stay: jax.Array  # () 1 / (1 + sum T): the rest.
  sign: jax.Array  # (P,) the sign of psi at each x' ...
  log_psi: jax.Array  # (P,) ... and log|psi|.


def tmove(elements: Callable, params, x: jax.Array, i, sign, log_psi, tau,
          atoms=None) -> TMove:
  """The heat-bath T-move of electron i of one configuration x (3N,) whose psi has `sign` and
  log|psi| `log_psi`: `elements` (Hamiltonian.nonlocal_elements) gives V_x'x psi(x') /
  psi(x) for each point; the sign-obeying (negative) ones, times -tau, are the weights of
  the jumps against 1 for staying (Casula et al. 2010). A non-finite element counts as 0."""
  e = elements(params, x, i, sign, log_psi, atoms)
  t = tau * jnp.where(jnp.isfinite(e.value), jnp.maximum(-e.value, 0.0), 0.0)
  norm = 1.0 + jnp.sum(t)
  return TMove(e.points, t / norm, 1.0 / norm, e.sign, e.log_abs)


class Relocated(NamedTuple):
  """The population after the T-moves: positions, psi there, electrons that jumped."""
  x: jax.Array  # (B, 3N) bohr.
  sign: jax.Array  # (B,)
  log_psi: jax.Array  # (B,)
  jumps: jax.Array  # (B,) int32, electrons of each walker that jumped.


def make_tmoves(elements: Optional[Callable], tau: float) -> Optional[Callable]:
  """(params, x (B, 3N), sign (B,), log|psi| (B,), key, geometry=None) -> Relocated: the
  T-moves of every walker, electron after electron (each one's TMove from the configuration
  the ones before it left; one uniform number each), the nuclei of `geometry` (None: the
  system's own). None when there is no non-local part to move by (`elements` None)."""
  if elements is None:
    return None

  def one(params, x, sign, log_psi, i, u, atoms):
    m = tmove(elements, params, x, i, sign, log_psi, tau, atoms)
    cumulative = jnp.cumsum(m.p)
    q = jnp.clip(jnp.searchsorted(cumulative, u, side='right'), 0, m.p.shape[0] - 1)
    jump = u < cumulative[-1]  # Point q with probability p_q; else stay.
    there = x.reshape(-1, 3).at[i].set(m.points[q]).reshape(x.shape)
    return (jnp.where(jump, there, x), jnp.where(jump, m.sign[q], sign),
            jnp.where(jump, m.log_psi[q], log_psi), jump.astype(jnp.int32))

  def relocate(params, x, sign, log_psi, key, geometry=None) -> Relocated:
    atoms = None if geometry is None else geometry.positions
    b, n = x.shape[0], x.shape[1] // 3
    uniform = jax.random.uniform(key, (n, b), x.dtype)

    def electron(i, carry):
      x, sign, log_psi, jumps = carry
      x, sign, log_psi, jump = jax.vmap(one, in_axes=(None, 0, 0, 0, None, 0, None))(
          params, x, sign, log_psi, i, uniform[i], atoms)
      return x, sign, log_psi, jumps + jump

    carry = (x, sign, log_psi, jnp.zeros((b,), jnp.int32))
    return Relocated(*jax.lax.fori_loop(0, n, electron, carry))

  return relocate


def make_locality(elements: Optional[Callable], tau: float) -> None:
  """No moves by the ECP: its non-local part stays in the local energy (the locality
  approximation). The record's common signature."""
  del elements, tau


def _tmove_key(k_move: jax.Array) -> jax.Array:
  """The T-moves' key, derived from the drift-diffusion's (whose draws stay as they were)."""
  return jax.random.fold_in(k_move, 1)


def _relocated(evaluate: Callable, relocate: Callable, params, walkers: Walkers, k_move,
               geometry) -> Walkers:
  """`walkers` after the T-moves: those that jumped evaluated where they went (kept where
  they were if that is not finite)."""
  r = relocate(params, walkers.x, walkers.sign, walkers.log_psi, _tmove_key(k_move), geometry)
  there = evaluate(params, r.x, geometry)
  ok = (r.jumps > 0) & _healthy(there) & jnp.all(jnp.isfinite(there.drift), axis=-1)
  return jax.tree.map(lambda a, c: jnp.where(ok.reshape(-1, *[1] * (a.ndim - 1)), a, c),
                      there, walkers)


# The DMC moves (dmc.moves): factory (evaluate, psi, tau, relocate=None, wrap=identity) ->
# move (params, DMCState, k_move, k_accept, geometry) -> Moved; `relocate`: the ECP's moves
# after the drift-diffusion ones (a record of ECP_MOVES makes it; None: none); `wrap`: the
# system's boundary's, x (..., 3N) -> x in the cell.
ELECTRON = choices.Choice('electron', make_electron_move, 'one electron at a time, each '
                          'accepted or rejected alone (Umrigar, Nightingale and Runge 1993)')
ALL = choices.Choice('all', make_all_electron_move, 'all electrons at once, the whole move '
                     'accepted or rejected')
MOVES = choices.table(ELECTRON, ALL)

# The treatments of an ECP's non-local part (dmc.ecp_moves): factory (elements, tau) ->
# relocate for the moves' factories, or None (no moves by the ECP).
TMOVES = choices.Choice('tmoves', make_tmoves, 'T-moves in the size-consistent form of '
                        'Casula, Moroni, Sorella and Filippi 2010 (version 1): variational')
LOCALITY = choices.Choice('locality', make_locality, 'the locality approximation (Mitas, '
                          'Shirley and Ceperley 1991): the non-local part applied to the '
                          'trial function; not variational')
ECP_MOVES = choices.table(TMOVES, LOCALITY)


def make_step(evaluate: Callable, tau: float, n_electrons: int, equilibration: int,
              move: Optional[Callable] = None) -> Callable:
  """(params, DMCState, geometry=None) -> (DMCState, StepStats): one DMC step of every walker
  (move, weight, resample by comb), all on the device, with the nuclei of `geometry` (a
  systems.Geometry; None: the system's own). `move`: made by a record of MOVES (None: the
  all-electron move). The running estimate e_best averages the step energies after the first
  half of `equilibration` steps."""
  cutoff = ZEN_ALPHA * (n_electrons / tau) ** 0.5
  move = move or make_all_electron_move(evaluate, None, tau)

  def step(params, s: DMCState, geometry=None):
    k_move, k_accept, k_comb, key = jax.random.split(s.key, 4)
    old = s.walkers
    m = move(params, s, k_move, k_accept, geometry)
    healthy, p = m.healthy, m.p
    tau_eff = jnp.where(m.proposed > 0, tau * m.moved / jnp.maximum(m.proposed, 1e-30), tau)
    # Weights: UNR's expected branching factor with Zen's limited local energies.
    s_old = limit_energy(old.local_energy, s.e_best, cutoff)
    s_new = limit_energy(jnp.where(m.finite, m.new_energy, s.e_best), s.e_best, cutoff)
    s_old = jnp.where(healthy, s_old, s.e_best)
    exponent = -tau_eff * (p * 0.5 * (s_old + s_new) + (1.0 - p) * s_old - s.e_best)
    weights = jnp.where(healthy, jnp.exp(exponent), 0.0)
    e_l = jnp.where(healthy, m.walkers.local_energy, 0.0)
    total = jnp.sum(weights)
    energy = jnp.sum(weights * e_l) / total
    growth = s.e_best - jnp.log(total / weights.shape[0]) / tau_eff
    chosen = comb(k_comb, weights)
    walkers = jax.tree.map(lambda a: a[chosen], m.walkers)
    count = s.step >= equilibration // 2
    e_sum = jnp.where(count, s.e_sum + energy, 0.0)
    e_count = jnp.where(count, s.e_count + 1.0, 0.0)
    # Before the running mean starts, e_best follows the step energies (smoothed).
    e_best = jnp.where(count, e_sum / jnp.maximum(e_count, 1.0), 0.9 * s.e_best + 0.1 * energy)
    e_best = jnp.where(jnp.isfinite(e_best), e_best, s.e_best)
    acceptance = jnp.mean(m.acceptance)
    bad = ~m.finite if m.nonfinite is None else m.nonfinite
    stats = StepStats(energy, growth, acceptance, tau_eff, jnp.sum(bad) + jnp.sum(~healthy))
    return (DMCState(walkers, key, s.step + 1, e_best, e_sum, e_count, m.moved, m.proposed),
            stats)

  return step


def make_block(step: Callable, length: int) -> Callable:
  """(params, DMCState, n) -> (DMCState, StepStats of (length,) arrays): `step` taken n times
  in turn (n a traced int, at most `length` taken) within one call, so that the host dispatches
  the steps and reads their results once per block rather than once per step, which costs
  small systems a large part of their step time. Rows n and after are zeros. The loop body
  is the same program whatever n, so a run's states do not depend on how its steps were
  grouped into blocks."""

  def block(params, s: DMCState, n):
    _, first = jax.eval_shape(step, params, s)
    rows = jax.tree.map(lambda a: jnp.zeros((length,) + a.shape, a.dtype), first)

    def body(carry):
      i, s, rows = carry
      s, stats = step(params, s)
      return i + 1, s, jax.tree.map(lambda r, v: r.at[i].set(v), rows, stats)

    start = (jnp.zeros((), jnp.int32), s, rows)
    _, s, rows = jax.lax.while_loop(lambda c: c[0] < jnp.minimum(n, length), body, start)
    return s, rows

  return block
