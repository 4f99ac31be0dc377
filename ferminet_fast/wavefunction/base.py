"""What the wavefunction modules share: the Network interface (pure functions of params and
one configuration) and a determinant that stays finite and differentiable."""

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp


class Network(NamedTuple):
  """A wavefunction ansatz as pure functions of (params, x)."""
  init: Callable[[jax.Array], Any]  # PRNG key -> params
  apply: Callable[[Any, jax.Array], tuple]  # (params, x (3N,)) -> (sign, log|psi|)
  log_psi: Callable[[Any, jax.Array], jax.Array]  # (params, x (3N,)) -> log|psi|
  # (params, x (3N,)) -> [(k, n_s, n_orb) per spin]: orbitals times envelopes, before the
  # determinants; n_orb = N with full_det, else n_s.
  orbitals: Callable[[Any, jax.Array], list]
  # (variables, x (3N,), mutable, interceptor) -> (output, state): the flax module applied
  # with `variables` ('params' and any other collections), the collections named in
  # `mutable` returned in `state`, under the flax method interceptor `interceptor`: how an
  # optimizer instruments the layers without the network knowing (kfac.py). `output` is
  # what `apply` gives; with several states, the variables other than 'params' hold a
  # leading axis of the K configurations, as the returned state does.
  instrumented: Callable[[Any, jax.Array, list, Callable], tuple]
  # (params, x (3N,), atoms (M, 3)) -> log|psi| with the nuclei at `atoms` (bohr) instead of
  # the system's positions, the parameters unchanged: what nuclear forces differentiate.
  log_psi_at: Callable[[Any, jax.Array, jax.Array], jax.Array]
  n_coords: int  # 3N, the length of x.
  dtype: Any = jnp.float32  # dtype of the parameters and of x.
  full_det: bool = True  # The layout of `orbitals` (see there).
  # Several states (states.py): x holds K configurations, (K 3N,), and the functions above
  # are those of the total wavefunction det[psi_i(x_j)]; `apply_states(params, x (3N,))
  # -> (signs (K,), log|psi_i| (K,))` gives the K states at one configuration.
  states: int = 1
  apply_states: Optional[Callable[[Any, jax.Array], tuple]] = None


def slogdet(a: jax.Array) -> tuple:
  """(sign, log|det|) over the last two axes.

  Matrices of size <= 3 use closed forms, which are several times faster than a
  batched LU under vmap and differentiate cleanly to any order. Rows are scaled by
  their largest magnitude (held constant for differentiation, which leaves the
  result and all its derivatives exact) so that products of small envelopes do
  not underflow.
  """
  n = a.shape[-1]
  if n > 3:
    return jnp.linalg.slogdet(a)
  scale = jax.lax.stop_gradient(jnp.max(jnp.abs(a), axis=-1, keepdims=True))
  scale = jnp.where(scale > 0, scale, 1.0)
  b = a / scale
  if n == 1:
    det = b[..., 0, 0]
  elif n == 2:
    det = b[..., 0, 0] * b[..., 1, 1] - b[..., 0, 1] * b[..., 1, 0]
  else:
    det = (b[..., 0, 0] * (b[..., 1, 1] * b[..., 2, 2] - b[..., 1, 2] * b[..., 2, 1])
           - b[..., 0, 1] * (b[..., 1, 0] * b[..., 2, 2] - b[..., 1, 2] * b[..., 2, 0])
           + b[..., 0, 2] * (b[..., 1, 0] * b[..., 2, 1] - b[..., 1, 1] * b[..., 2, 0]))
  return jnp.sign(det), jnp.log(jnp.abs(det)) + jnp.sum(jnp.log(scale[..., 0]), axis=-1)
