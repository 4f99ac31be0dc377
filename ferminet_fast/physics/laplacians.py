"""Laplacian methods: from f = log|psi| of ONE configuration x (3N,), the operator x -> (lap
f, grad f), both exact. Each method is a `Method` record in `METHODS`; the run resolves the
setting optim.laplacian ('best', 'auto' or a name) into one of them once (plan.py),
and the local energy is built from the record itself.
"""

import dataclasses
import functools
from typing import Callable, Protocol

import jax
import jax.numpy as jnp

from ferminet_fast import choices
from ferminet_fast.physics import folx_tracing

LogPsi = Callable[[jax.Array], jax.Array]  # x (3N,) -> log|psi| () or (K,) for K states

# A sparse method ('best' takes it, plan.py) pays from this many electrons, for molecules on
# a CPU: from N2 on, each step's saving repays the seconds that tracing the sparsity adds to
# the start-up within a few hundred steps; at Ne, with KFAC, only after about a thousand
# (BENCHMARKS.md, "The sparse forward Laplacian's start-up"). Periodic systems, several
# states and GPUs keep the dense method, the setting measured there.
SPARSE_PAYS_FROM = 14


class Laplacian(Protocol):
  """Builds, from f = log|psi| of one configuration, x -> (lap f (), grad f (3N,)); for a
  vector f (K,) of several states, (lap f (K,), grad f (K, 3N))."""

  def __call__(self, f: LogPsi) -> Callable[[jax.Array], tuple]:
    ...


def laplacian_jacfwd(f: LogPsi) -> Callable[[jax.Array], tuple]:
  """Forward-over-reverse Hessian, jacfwd(grad f), and its trace.

  The 3N x 3N Hessian is formed (3N tangents pushed through grad at once) and only
  its diagonal summed; the gradient comes out of the same pass as the auxiliary value.
  """

  def lap(x):
    grad_f = _gradient(f, x)

    def grad_twice(y):
      g = grad_f(y)
      return g, g

    hessian, g = jax.jacfwd(grad_twice, has_aux=True)(x)
    return jnp.trace(hessian, axis1=-2, axis2=-1), g

  return lap


def laplacian_jvp_loop(f: LogPsi) -> Callable[[jax.Array], tuple]:
  """sum_i d/dx_i (grad f)_i as a loop of 3N Jacobian-vector products through grad f.

  `linearize` evaluates grad f once; each loop step pushes one unit tangent, so
  memory stays that of a single gradient whatever N is.
  """

  def lap(x):
    g, grad_jvp = jax.linearize(_gradient(f, x), x)
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    total = jax.lax.fori_loop(0, x.shape[0], lambda i, acc: acc + grad_jvp(eye[i])[..., i],
                              jnp.zeros(g.shape[:-1], x.dtype))
    return total, g

  return lap


def _folx(sparsity_threshold: int) -> Laplacian:
  """Forward Laplacian (Li et al. 2023) through folx: value, gradient and Laplacian are
  pushed forward together in one pass. `sparsity_threshold` > 0 lets folx keep per-electron
  sparsity of the Jacobian; 0 is dense."""

  def make(f: LogPsi) -> Callable[[jax.Array], tuple]:
    import folx  # Optional dependency: pip install 'ferminet_fast[folx]'.
    _register_folx_barrier(folx)
    if sparsity_threshold:
      folx_tracing.install()
    forward = folx.forward_laplacian(f, sparsity_threshold)

    def fn(x):
      out = forward(x)
      try:
        grad = out.jacobian.dense_array  # (3N,), or (3N, K) for K states
        if grad.ndim > 1:
          grad = grad.T
      except jax.errors.ConcretizationTypeError:
        # folx cannot densify a Jacobian that stays sparse to the output (a log|psi| that
        # is a sum of per-electron terms) under vmap; take the gradient directly then.
        grad = _gradient(f, x)(x)
      return out.laplacian, grad.reshape(out.laplacian.shape + x.shape)

    return fn

  return make


def _folx_barrier(args, kwargs, sparsity_threshold):
  """folx's rule for jax.lax.optimization_barrier (the identity): each operand's value,
  Jacobian entries and Laplacian pass through one barrier, the Jacobian's sparsity pattern
  unchanged. Without it folx falls back to its rule for a general function, through the
  function's Hessian, and warns on every periodic network that the call may be slow."""
  from folx.api import FwdJacobian, FwdLaplArray
  carried = [(a.x, a.jacobian.data, a.laplacian) if isinstance(a, FwdLaplArray) else a
             for a in args]
  out = jax.lax.optimization_barrier(carried)
  return [FwdLaplArray(o[0], FwdJacobian(o[1], a.jacobian.x0_idx), o[2])
          if isinstance(a, FwdLaplArray) else o for a, o in zip(args, out)]


@functools.cache
def _barrier_primitive():
  """jax.lax.optimization_barrier's primitive, found once from its jaxpr (JAX does not
  export it)."""
  return jax.make_jaxpr(jax.lax.optimization_barrier)((0.0,)).eqns[0].primitive


def _register_folx_barrier(folx) -> None:
  """Registers _folx_barrier for the barrier's primitive, once."""
  barrier = _barrier_primitive()
  if not folx.wrapped_functions.is_registered(barrier):
    folx.register_function(barrier, _folx_barrier)


def _gradient(f: LogPsi, x: jax.Array) -> Callable:
  """grad f for a scalar f; the Jacobian (K, 3N), by K reverse passes, for f of K states."""
  return jax.grad(f) if jax.eval_shape(f, x).shape == () else jax.jacrev(f)


@dataclasses.dataclass(frozen=True, repr=False)
class Method(choices.Choice):
  """A Laplacian method: calling it on f gives x -> (lap f, grad f) (`Laplacian`)."""
  # Keeps the Jacobian's per-electron sparsity ('best' takes it only where that pays:
  # SPARSE_PAYS_FROM).
  sparse: bool = False
  # Whether 'auto' times it before training (a method slow to compile is left out).
  timed: bool = True


JACFWD = Method('jacfwd', laplacian_jacfwd, 'jacfwd of grad: all 3N tangents at once; memory '
                '~3N gradients')
JVP_LOOP = Method('jvp_loop', laplacian_jvp_loop, 'a loop of 3N forward-mode products: '
                  'memory of one gradient')
FOLX = Method('folx', _folx(0), 'forward Laplacian (Li et al. 2023), dense', package='folx')
FOLX_SPARSE = Method('folx_sparse', _folx(6), 'forward Laplacian with per-electron sparsity '
                     "(FermiNet's threshold, 6)", package='folx', sparse=True, timed=False)
METHODS = choices.table(JACFWD, JVP_LOOP, FOLX, FOLX_SPARSE)


def available() -> list:
  """The methods whose packages are installed."""
  return [m for m in METHODS.values() if m.installed()]
