"""Optimizers: each a `Method` record of `OPTIMIZERS` (its direction, default schedule, step
bound and what it supports), resolved from config.optim.optimizer by the run.

Every optimizer is an optax `GradientTransformationExtraArgs`: `init(params)` and
`update(grads, state, params, samples=Samples(...))`, where the step's `Samples` (walkers,
a PRNG key, the centred local energies) are what curvature-based methods (KFAC, SPRING)
need; first-order optax transformations ignore them. Each is composed the same way:

  reject_nonfinite(averaged(scaled_by_schedule(direction, schedule, ...)))

`direction` gives an ascent direction d (Adam's m / sqrt(v), KFAC's F^-1 g, SPRING's natural
gradient); `scaled_by_schedule` makes the update -lr d with FermiNet's schedule
lr = rate * (1 + t / delay) ** -decay, t counting the updates applied (the one counter),
each step annealed over the last ones where optim.lr.anneal says (`anneal_factor`), and
keeps the rate it applied; `averaged` keeps a moving average of the parameters the
updates lead to, which evaluation uses (`averaged_params`); `reject_nonfinite` drops an
update that would make a parameter non-finite and keeps the state (the average too) as it
was.
"""

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import flax.struct
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.scipy.linalg
import optax

from ferminet_fast import batching, choices
from ferminet_fast.optimizers import kfac as kfac_lib


@flax.struct.dataclass
class Samples:
  """What one step measured, besides the gradient."""
  x: jax.Array  # (B, 3N) bohr, the walkers.
  key: jax.Array  # PRNG key for stochastic curvature estimates.
  centred: jax.Array  # (B,) Ha, clipped local energies minus their mean (loss.EnergyAux).
  # What the gradient's pass measured for the optimizer besides the gradient (KFAC's
  # curvature statistics: `fused_gradient`), or None.
  curvature: Any = None
  # bohr, the nuclei of the walkers' geometry (M, 3), or of each walker's (B, M, 3); None: the
  # system's own.
  atoms: Any = None
  # The walkers are this many groups of B / groups in a row, each of one geometry, each
  # sampling its own |psi|^2 (`centred` centred within each). Static: it fixes shapes.
  groups: int = flax.struct.field(pytree_node=False, default=1)
  # A scaled periodic cell's factor (systems.Geometry.scale): () or each walker's (B,); None:
  # the cell as it is.
  scale: Any = None


def lr_schedule(method: 'Method', lr_cfg) -> Callable:
  """t (steps) -> learning rate, from the `optim.lr` settings, whose None values take the
  method's defaults."""
  rate = method.rate if lr_cfg.rate is None else lr_cfg.rate
  delay = method.delay if lr_cfg.delay is None else lr_cfg.delay
  decay = lr_cfg.decay

  def schedule(t):
    return rate * jnp.power(1.0 + t / delay, -decay)

  return schedule


def anneal_factor(lr_cfg, iterations: int) -> Optional[Callable]:
  """(t, clock=None) -> the factor on each step that falls from 1 to lr_cfg.anneal_to along a
  half cosine over the last lr_cfg.anneal fraction of the run, and stays there after: late
  in training the last parameters carry the gradient's noise. None where anneal is 0 (the
  step is then built as without it). The run's progress is t / `iterations`, t the
  optimizer's update counter (kept in checkpoints; a fine-tuned run starts it at 0; a
  resumed run with more iterations anneals to its new end), or, where the step is given a
  `clock` (a () fraction of a time budget spent: `anneals_by_clock`), whichever of the two
  is further on: the run anneals towards whichever end comes first. The factor multiplies
  the step after any norm bound (`scaled_by_schedule`), so the steps themselves shrink;
  damping (KFAC's) is not annealed."""
  anneal, anneal_to = lr_cfg.anneal, lr_cfg.anneal_to
  if not anneal:
    return None
  start = (1.0 - anneal) * iterations
  span = max(iterations - start, 1e-12)

  def factor(t, clock=None):
    frac = (t - start) / span
    if clock is not None:
      frac = jnp.maximum(frac, (clock - (1.0 - anneal)) / anneal)
    frac = jnp.clip(frac, 0.0, 1.0)
    return anneal_to + (1.0 - anneal_to) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))

  return factor


def anneals_by_clock(optim_cfg) -> bool:
  """Whether the run's step takes a clock, the fraction of its time budget spent
  (optim.seconds), and anneals its steps towards that end too (`anneal_factor`)."""
  return bool(optim_cfg.seconds and optim_cfg.lr.anneal)


def fisher_length(network) -> Callable:
  """(params, d, Samples) -> the squared length of d in the Fisher metric of log|psi| at
  the B walkers of Samples (each at its nuclei), from the J_i d with J_i = d log|psi(x_i)|
  / d params (kfac.py's F, whole rather than in blocks), centred and without the largest
  1% of terms (kfac.squared_length), from one forward-mode derivative of log|psi| along
  d."""
  batch_log_psi = batching.over_walkers(network.log_psi)

  def length(params, d, samples: Samples):
    def log_psi(p):
      return batch_log_psi(p, samples.x, samples.atoms, samples.scale)
    return kfac_lib.squared_length(jax.jvp(log_psi, (params,), (d,))[1])

  return length


class ScheduleState(NamedTuple):
  count: jax.Array  # () int32, updates applied so far: the schedule's t.
  lr: jax.Array  # () learning rate of the latest update, after any norm constraint.
  inner: Any  # The direction's own state (Adam's moments, KFAC's factors, ...).


class RejectState(NamedTuple):
  rejected: jax.Array  # () bool: the latest update was not applied (non-finite).
  inner: Any


def norm_constrained(lr, sq_norm, constraint):
  """The step size lr, reduced so that lr^2 * sq_norm <= constraint (FermiNet's trust region)."""
  return lr * jnp.minimum(1.0, jnp.sqrt(constraint / (lr**2 * sq_norm + 1e-30)))


def _vdot(a, b) -> jax.Array:
  return sum(jnp.vdot(u, v) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def scaled_by_schedule(direction: optax.GradientTransformation, schedule: Callable,
                       norm_constraint: Optional[float] = None, norm: str = 'fisher',
                       factor: Optional[Callable] = None,
                       walker_bound: Optional[tuple] = None
                       ) -> optax.GradientTransformationExtraArgs:
  """Updates -lr * d for the ascent direction d that `direction` gives, lr = schedule(count),
  reduced with a norm constraint if one is given so that lr^2 |d|^2 <= norm_constraint,
  |d|^2 = <d, g> ('fisher': for d = F^-1 g, the step's length in the Fisher metric, as KFAC
  in FermiNet) or <d, d> ('euclidean'), then times factor(count, clock) where `factor` is
  given (`anneal_factor`; `clock` an extra argument of the update, or None), then, where
  `walker_bound` = (length, bound) is given, reduced so that lr^2 length(params, d, samples)
  <= bound (`fisher_length`: the step's length in the Fisher metric of the step's walkers,
  which the curvature behind `norm_constraint` may understate). `direction` gets `count`
  (updates applied before this one) among its extra arguments; the state keeps the rate
  applied."""
  direction = optax.with_extra_args_support(direction)

  def init(params):
    dtype = jax.tree.leaves(params)[0].dtype
    return ScheduleState(jnp.zeros((), jnp.int32), jnp.zeros((), dtype), direction.init(params))

  def update(grads, state: ScheduleState, params=None, *, clock=None, **extra):
    d, inner = direction.update(grads, state.inner, params, count=state.count, **extra)
    dtype = jax.tree.leaves(d)[0].dtype
    lr = jnp.asarray(schedule(state.count), dtype)
    if norm_constraint is not None:
      sq_norm = _vdot(d, grads) if norm == 'fisher' else _vdot(d, d)
      lr = norm_constrained(lr, sq_norm, norm_constraint).astype(dtype)
    if factor is not None:
      lr = lr * jnp.asarray(factor(state.count, clock), dtype)
    if walker_bound is not None:
      length, bound = walker_bound
      lr = norm_constrained(lr, length(params, d, extra['samples']), bound).astype(dtype)
    updates = jax.tree.map(lambda v: -lr * v, d)
    return updates, ScheduleState(state.count + 1, lr, inner)

  return optax.GradientTransformationExtraArgs(init, update)


def reject_nonfinite(inner: optax.GradientTransformation) -> optax.GradientTransformationExtraArgs:
  """An update that would make any parameter non-finite is replaced by zeros and `inner`'s
  state is kept as it was (so its counter and schedule do not move); `rejected` says so.
  (optax.apply_if_finite looks at the incoming gradients; a curvature solve can turn finite
  gradients into a non-finite update, so this looks at the result.)"""
  inner = optax.with_extra_args_support(inner)

  def init(params):
    return RejectState(jnp.zeros((), bool), inner.init(params))

  def update(grads, state: RejectState, params=None, **extra):
    updates, new_inner = inner.update(grads, state.inner, params, **extra)
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(p))
                            for p in jax.tree.leaves(optax.apply_updates(params, updates))]))
    updates, new_inner = jax.lax.cond(
        ok, lambda: (updates, new_inner),
        lambda: (jax.tree.map(jnp.zeros_like, updates), state.inner))
    return updates, RejectState(~ok, new_inner)

  return optax.GradientTransformationExtraArgs(init, update)


class AverageState(NamedTuple):
  params: Any  # The moving average of the parameters after each update (any while count 0).
  count: jax.Array  # () int32, updates averaged so far.
  inner: Any  # The wrapped transformation's state (a ScheduleState).


def averaged(inner: optax.GradientTransformation, fraction: float
             ) -> optax.GradientTransformationExtraArgs:
  """Keeps, beside `inner`'s state, a moving average of the parameters after each update
  over about the last `fraction` of the updates: after update t, mean += (params_t - mean)
  / max(1, fraction * t), an exponential average whose horizon grows with the run (the
  last parameters while fraction * t <= 1; fraction 0: always the last). The updates
  themselves are `inner`'s.

  Why: late in training the parameters fluctuate around their optimum with the gradient's
  noise, which raises the energy of the last parameters; the average cancels much of it.
  Early on the parameters drift fast and an average would lag behind them; a horizon that
  is a fraction of the steps done keeps the lag a small part of the run."""
  inner = optax.with_extra_args_support(inner)

  def init(params):
    return AverageState(params, jnp.zeros((), jnp.int32), inner.init(params))

  def update(grads, state: AverageState, params=None, **extra):
    updates, new_inner = inner.update(grads, state.inner, params, **extra)
    count = state.count + 1
    rate = 1.0 / jnp.maximum(1.0, fraction * count.astype(jnp.float32))
    mean = jax.tree.map(lambda m, p, u: m + (p + u - m) * rate.astype(m.dtype),
                        state.params, params, updates)
    return updates, AverageState(mean, count, new_inner)

  return optax.GradientTransformationExtraArgs(init, update)


# The parts of a state of `make_optimizer`'s optimizer, found by the names of their types
# (optax.tree.get) rather than by their places in the nesting, which wrappers change.


def schedule_state(state: RejectState) -> ScheduleState:
  """The ScheduleState in `state`: the update counter, the latest rate, the direction's state."""
  return optax.tree.get(state, 'ScheduleState')


def average_state(state: RejectState) -> AverageState:
  """The AverageState in `state`: the parameters' moving average and how many it holds."""
  return optax.tree.get(state, 'AverageState')


def applied_updates(state: RejectState) -> jax.Array:
  """() int32: updates applied so far (rejected ones not counted), the schedule's t."""
  return schedule_state(state).count


def averaged_updates(state: RejectState) -> jax.Array:
  """() int32: updates the parameters' average holds (0: none, e.g. after restoring a
  checkpoint that held no average)."""
  return average_state(state).count


def learning_rate(state: RejectState) -> jax.Array:
  """() the learning rate of the latest update, applied or not (see `applied_lr`)."""
  return schedule_state(state).lr


def averaged_params(state: RejectState, params):
  """The moving average of the parameters (`averaged`), or `params` if no update has been
  averaged yet (a fresh state, or one restored from a checkpoint that held no average).
  `state`: the state of `make_optimizer`'s optimizer."""
  average = average_state(state)
  return jax.tree.map(lambda m, p: jnp.where(average.count > 0, m, p), average.params, params)


def average_horizon(state: RejectState, fraction: float) -> float:
  """About how many of the last updates the average spans (1: the last parameters)."""
  return max(1.0, fraction * float(averaged_updates(state)))


def applied_lr(state: RejectState) -> jax.Array:
  """The learning rate of the update last applied: 0 when it was rejected."""
  lr = learning_rate(state)
  return jnp.where(state.rejected, jnp.zeros_like(lr), lr)


def adam(optim_cfg, network) -> optax.GradientTransformation:
  del network
  a = optim_cfg.adam
  return optax.scale_by_adam(b1=a.b1, b2=a.b2, eps=a.eps)


def sgd(optim_cfg, network) -> optax.GradientTransformation:
  del optim_cfg, network
  return optax.identity()


def kfac(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """KFAC with FermiNet's settings (kfac.py)."""
  k = optim_cfg.kfac
  return kfac_lib.kfac(network, network.n_coords, k.damping, k.cov_ema_decay, k.invert_every,
                       k.dense_rest, KFAC_ROWS[k.rows])


def kfac_gradient(optim_cfg, network) -> Callable:
  """KFAC's gradient with its curvature statistics from one pass (kfac.make_gradient)."""
  k = optim_cfg.kfac
  return kfac_lib.make_gradient(network, network.n_coords, k.dense_rest, KFAC_ROWS[k.rows])


class SpringState(NamedTuple):
  previous: jax.Array  # (P,) the previous step's descent direction (before the learning rate).


def spring(optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """SPRING (Goldshmid et al., J. Comput. Phys. 2024): a natural gradient solved in the
  B x B space of walkers, with momentum in the parameter space.

  O (B, P) holds d log|psi(x_i)| / d params, centred over walkers and divided by sqrt(B);
  eps_i = -(E_L(x_i) - <E_L>) / sqrt(B) (clipped). The descent direction
    d = mu * d_prev + O^T (O O^T + damping I + 11^T / B)^-1 (eps - mu O d_prev)
  minimises |O d - eps|^2 + damping |d - mu d_prev|^2 (mu = 0 is MinSR). The B x B solve
  costs O(B^2 P + B^3) instead of the P x P Fisher's, exact rather than Kronecker-factored;
  the 11^T / B term only lifts the zero eigenvalue that centring creates. Walkers of several
  geometries (Samples.groups) are centred within their own geometry, and 11^T is then one
  block of ones per geometry. The step is
  lr * d, bounded like KFAC's but in the Euclidean norm: lr^2 |d|^2 <= norm_constraint
  (`scaled_by_schedule`; this transformation gives the ascent direction -d).
  """
  s = optim_cfg.spring
  grad_log_psi = jax.grad(network.log_psi)

  def init(params):
    flat, _ = jax.flatten_util.ravel_pytree(params)
    return SpringState(jnp.zeros_like(flat))

  def update(grads, state, params=None, *, samples=None, **extra):
    del grads, extra  # The direction is rebuilt from per-walker gradients.
    _, unravel = jax.flatten_util.ravel_pytree(params)
    per_walker = batching.over_walkers(grad_log_psi)(params, samples.x, samples.atoms,
                                                     samples.scale)
    o = jnp.concatenate([g.reshape(g.shape[0], -1) for g in jax.tree.leaves(per_walker)],
                        axis=1)  # (B, P)
    b, groups = o.shape[0], samples.groups
    # Walkers whose gradient is non-finite (they also have zero weight in eps) are dropped.
    o = jnp.where(jnp.all(jnp.isfinite(o), axis=1, keepdims=True), o, 0.0)
    o = o.reshape(groups, b // groups, -1)  # Centred within each group (geometry).
    o = ((o - jnp.mean(o, axis=1, keepdims=True)) / jnp.sqrt(b)).reshape(b, -1)
    eps = -samples.centred / jnp.sqrt(b)
    ones = 1.0 / b  # 11^T / B, or a block of ones per geometry.
    if groups > 1:
      same = jnp.repeat(jnp.eye(groups, dtype=o.dtype), b // groups, axis=0)  # (B, G)
      ones = same @ same.T / b
    kernel = o @ o.T + s.damping * jnp.eye(b, dtype=o.dtype) + ones
    rhs = eps - s.momentum * (o @ state.previous)
    coef = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(kernel), rhs)
    descent = o.T @ coef + s.momentum * state.previous
    return unravel(-descent), SpringState(descent)

  return optax.GradientTransformationExtraArgs(init, update)


@dataclasses.dataclass(frozen=True, repr=False)
class Method(choices.Choice):
  """An optimizer. Calling it with (optim settings, network) gives its direction; its own
  settings are the block optim.<name>. The default schedule, used where optim.lr leaves
  rate or delay None: FermiNet's for KFAC, and for the others what reached chemical
  accuracy fastest on our small systems."""
  rate: float = 0.01  # Learning rate at step 0.
  delay: float = 1000.0  # Steps over which the rate halves (decay 1).
  # The norm ('fisher' or 'euclidean', scaled_by_schedule) in which the step length is
  # bounded by optim.<name>.norm_constraint; None: unbounded.
  norm: Optional[str] = None
  complex: bool = True  # Trains a complex wavefunction (a periodic system at a twist).
  # (optim settings, network) -> gradient(params, x (B, 3N), weights (B,), atoms=None) ->
  # (grads, curvature for Samples.curvature): a curvature pass that also gives the gradient,
  # or None.
  fused_gradient: Optional[Callable] = None


KFAC = Method('kfac', kfac, "Kronecker-factored natural gradient, FermiNet's", rate=0.05,
              delay=10000.0, norm='fisher', fused_gradient=kfac_gradient)
ADAM = Method('adam', adam, 'Adam')
# SPRING's sample-space solve is written for a real log|psi|.
SPRING = Method('spring', spring, 'natural gradient solved in the space of walkers, with '
                'momentum', rate=0.2, delay=10000.0, norm='euclidean', complex=False)
SGD = Method('sgd', sgd, 'plain gradient descent')
OPTIMIZERS = choices.table(KFAC, ADAM, SPRING, SGD)
KFAC_ROWS = kfac_lib.ROWS  # How KFAC factors a dense layer's rows (optim.kfac.rows).


def fused_gradient(method: Method, optim_cfg, network) -> Optional[Callable]:
  """The gradient of `method` that comes with its curvature statistics from one pass
  through the network (the step then differentiates the energy no further), or None.
  None for a complex wavefunction, whose gradient has a term in its phase that the pass
  through log|psi| does not give."""
  make = None if network.complex else method.fused_gradient
  return make(optim_cfg, network) if make else None


def make_optimizer(method: Method, optim_cfg, network) -> optax.GradientTransformationExtraArgs:
  """`method` with the `optim` settings. network: a networks.Network, whose log|psi|
  curvature-based methods differentiate. The state is a RejectState around an AverageState
  around a ScheduleState (module docstring)."""
  direction = method(optim_cfg, network)
  constraint = getattr(optim_cfg, method.name).norm_constraint if method.norm else None
  bound = optim_cfg.max_fisher_step
  return reject_nonfinite(averaged(scaled_by_schedule(
      direction, lr_schedule(method, optim_cfg.lr), constraint, method.norm or 'fisher',
      anneal_factor(optim_cfg.lr, optim_cfg.iterations),
      (fisher_length(network), bound) if bound else None), optim_cfg.average_fraction))
