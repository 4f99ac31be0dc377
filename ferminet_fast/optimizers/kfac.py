"""KFAC (Martens & Grosse 2015; Pfau et al. 2020 for FermiNet) as an optax transformation,
written against public JAX and flax only.

Curvature: the Fisher matrix of a normal likelihood of variance 1/2 on log|psi| of each
walker, F = (2 / B) sum_i J_i^T J_i with J_i = d log|psi(x_i)| / d params (what FermiNet
registers with kfac-jax, so that its damping carries over), approximated block-diagonally:

- every dense layer of the network (networks.Dense and SymmetricDense, each applied to R
  rows per walker: electrons, electron pairs) is a Kronecker-factored block (A kron G) / R,
  A = (1/B) sum_{i,r} a a^T over its inputs a (a 1 appended when it has a bias),
  G = (2/B) sum_{i,r} d d^T over d = d log|psi_i| / d (output row r): kfac-jax's
  repeated-dense block (KFAC-expand, ROWS' `expand`: the rows as if independent examples,
  so the terms that couple two rows of one configuration are left out); or `reduce`,
  KFAC-reduce (Eschenhagen, Immer, Turner, Schneider and Hennig, NeurIPS 2023): one row per
  configuration, A = (1/B) sum_i abar abar^T over the mean abar of its rows' inputs that
  reach log|psi| (the bias's entry 1), G = (2/B) sum_i dbar dbar^T over the sum dbar of
  their d, repeats 1 (K with K states): a configuration's derivative sum_r a_r d_r^T taken
  as abar dbar^T, exact where every row has the same input (the shared columns); or
  `split`: the sum of reduce's block and expand's over each row's input less abar
  (deviations, zero in the shared columns), inverted exactly by diagonalising each pair of
  factors jointly; it leaves out, besides what each leaves out, the terms that couple the
  mean part abar dbar^T of a derivative with its deviations' part sum_r (a_r - abar) d_r^T;
- every other parameter (envelopes, Jastrow, layer norms) gets the diagonal of F from the
  per-walker gradients (as kfac-jax treats what it finds no block for), or, with
  `dense_rest`, all of them together one dense block of F, which couples each orbital's
  envelope exponents and weights. Its P parameters are about 4 x atoms x electrons x
  determinants with the isotropic envelope (82 at Ne, 226 at N2 with 2 determinants; 1.8k
  at N2 with 16), about five times that with the full one: the block holds P^2 numbers and
  each inversion costs O(P^3).

The inputs and output derivatives come from taps put on the layers here, from outside the
network (a flax method interceptor on every layer that defines `dense_rows`, through
`Network.instrumented`): each such layer sows its input rows and has a zero perturbation
added to its output, whose derivative is d log|psi| / d (output). Columns that every row of
one configuration shares (SymmetricDense's spin-wise means, most of a FermiNet layer's
inputs) are sown once per configuration, and their parts of A and of the gradient are
formed from sums over the rows: the same factors, without the R-fold repeated outer
products of those columns. One batched forward and
backward pass of log|psi|, inside the same jitted step as everything else; the same pass
gives the VMC gradient (a kernel's is the sum over rows of a (w d)^T with each walker's
weight w = dE / d log|psi|: `make_gradient`), so in the train step it replaces the
energy's own derivative pass (BENCHMARKS.md, "KFAC's gradient from its curvature
pass"). Factors are
averaged over steps (a normalised exponential moving average, `cov_ema_decay`) and
inverted with factored Tikhonov damping (pi-adjusted, as in kfac-jax) every
`invert_every` steps. The transformation gives the direction F^-1 g; the
learning rate and FermiNet's trust region (lr^2 <F^-1 g, g> <= norm_constraint) are
applied around it (optim.scaled_by_schedule). The gradient g is the energy's own,
(2 / B) sum_i (E_L,i - <E_L>) J_i, twice the one FermiNet hands kfac-jax (it leaves out the
2): where the trust region binds, the step is FermiNet's whatever the learning rate; where
it does not, twice FermiNet's at the same rate.
"""

from typing import NamedTuple

from flax import traverse_util
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
import numpy as np
import optax

from ferminet_fast import batching, choices

FISHER_SCALE = 2.0  # 1 / variance of the normal likelihood on log|psi|.
TRIMMED = 0.01  # Fraction of the walkers' largest terms a squared length leaves out.
TAPS_IN = 'kfac_inputs'  # Collection of the dense layers' input rows (sown when mutable).
TAPS_OUT = 'kfac_outputs'  # Collection of zero perturbations of the dense layers' outputs.


class KfacState(NamedTuple):
  weight: jax.Array  # () sum_t decay^(T - t): normaliser of the moving averages.
  # Layer -> (A, G, repeats) (SPLIT: (A1, G1, R1, A2, G2, K)): decayed sums of the per-step
  # statistics.
  factors: dict
  # Parameter -> decayed sum of the diagonal of F; with dense_rest, REST -> (P, P) block.
  diagonal: dict
  # Layer -> (A^-1, G^-1 * repeats) (SPLIT: (Wa, sa, Wg, sg), _invert); parameter -> 1 /
  # (diag + damping), or with dense_rest REST -> (block + damping I)^-1.
  inverses: dict


def squared_length(change: jax.Array) -> jax.Array:
  """() the squared length in F of a step that changes log|psi| at the walkers by `change`
  (B,) (to first order: J_i u for a step u), robustly: (2 / K) times the sum of the K
  smallest (change_i - median)^2 over the B' walkers where change is finite, the largest
  ceil(TRIMMED B') left out (at least one kept). Centred, as a change of log|psi| that is
  the same at every walker leaves |psi|^2 where it was: to first order 2 u^T C u, C the
  covariance of the J_i (the walkers of a set of geometries are centred together).
  Trimmed, as log|psi| is singular at the nodes: a walker near one changes by about
  (u . d psi / d params) / psi, so one or two walkers can carry most of an untrimmed sum,
  which then says how near the nearest walker is to a node rather than how far the step
  moved psi where it is sampled. (For many normal changes it is about 0.92 of 2 var.)
  0 where no walker's change is finite."""
  change = change.reshape(-1)
  finite = jnp.isfinite(change)
  count = jnp.sum(finite)
  centre = jnp.nanmedian(jnp.where(finite, change, jnp.nan))
  terms = jnp.sort(jnp.where(finite, (change - centre)**2, jnp.inf))  # Non-finite last.
  kept = jnp.maximum(count - jnp.ceil(TRIMMED * count).astype(count.dtype), 1)
  total = jnp.sum(jnp.where(jnp.arange(terms.shape[0]) < kept, terms, 0.0))
  return jnp.where(count > 0, FISHER_SCALE * total / kept, 0.0)


def _name(path: tuple) -> str:
  return '/'.join(path)


def _tap(next_fun, args, kwargs, context):
  """flax method interceptor: a layer that defines `dense_rows` (networks.py) sows its
  input rows, when that collection is mutable, and gets a zero perturbation on its
  output; every other call passes through."""
  module = context.module
  out = next_fun(*args, **kwargs)
  if context.method_name != '__call__' or not hasattr(module, 'dense_rows'):
    return out
  if module.is_mutable_collection(TAPS_IN):
    module.sow(TAPS_IN, 'inputs', module.dense_rows(*args, **kwargs))
  return module.perturb('outputs', out, collection=TAPS_OUT)


def tapped_log_psi(network, params, taps, x, *nuclei):
  """(log|psi|, inputs) at one configuration x (n_coords,) with `taps` (from `zero_taps`)
  added to every dense layer's output, the nuclei at `nuclei` (the network's trailing
  arguments: atoms (M, 3) and a scaled cell's scale; none: the network's own); inputs: each
  layer's rows ({path: {'inputs': ((..., R, n_in),)}}). The derivative w.r.t. the taps is
  d log|psi| / d (layer output)."""
  variables = {**params, TAPS_OUT: taps}
  (_, log_abs), state = network.instrumented(variables, x, [TAPS_IN], _tap, *nuclei)
  return log_abs, state[TAPS_IN]


def zero_taps(network, params, x):
  """The taps of one configuration x (n_coords,), all zero: {path: {'outputs': zeros}}."""
  _, state = jax.eval_shape(lambda: network.instrumented(params, x, [TAPS_OUT], _tap))
  return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state[TAPS_OUT])


def _layers(taps) -> list:
  """Module paths of the tapped dense layers."""
  return sorted(path[:-1] for path in traverse_util.flatten_dict(taps))


def _columns(blocks: tuple, bias: bool) -> tuple:
  """A layer's input columns from its `dense_rows` blocks (kernel input order, each with
  the leading axes (B, [K,]) of the configurations): per-row blocks (..., R, n) and blocks
  shared by every row of a configuration (..., n). Returns (a (C, R, n_a): the per-row
  columns, then a column of ones when the layer has a bias; s (C, n_s): the shared columns,
  or None; order: for each column of the kernel's input (then the bias), its index among
  [a, s]), so that a factor over [a, s] reordered by `order` is the factor over the
  concatenated rows [input, 1] that the kernel and bias multiply."""
  depth = max(x.ndim for x in blocks)
  r = next(x for x in blocks if x.ndim == depth).shape[-2]
  per_row, shared, row_index, shared_index, start = [], [], [], [], 0
  for x in blocks:
    index = list(range(start, start + x.shape[-1]))
    start += x.shape[-1]
    if x.ndim == depth:
      per_row.append(x.reshape(-1, r, x.shape[-1]))
      row_index += index
    else:
      shared.append(x.reshape(-1, x.shape[-1]))
      shared_index += index
  a = jnp.concatenate(per_row, axis=-1) if len(per_row) > 1 else per_row[0]
  if bias:
    a = jnp.concatenate([a, jnp.ones_like(a[..., :1])], axis=-1)
    row_index.append(start)  # The bias after the kernel's input columns.
  s = jnp.concatenate(shared, axis=-1) if shared else None
  return a, s, np.argsort(row_index + shared_index)


def _expand(a, s, order, mask, d, bias: bool, b: int) -> tuple:
  """KFAC-expand's (A, G, repeats) of one layer (module docstring) from its per-row input
  columns a (C, R, n_a) (masked, but for the bias's column of ones), shared columns s
  (C, n_s) or None with their `order` (_columns), row mask (C, R, 1) and output derivatives
  d (C, R, n_out) over b walkers."""
  del bias
  c, r = a.shape[:2]
  rows = a.reshape(c * r, -1)
  factor = rows.T @ rows
  if s is not None:  # Shared columns: sums over a configuration's rows first.
    # The shared columns are masked with the rows; so is, here, the bias's column.
    cross = jnp.sum(a * mask, axis=1).T @ s  # (n_a, n_s)
    shared = (s * jnp.sum(mask, axis=1)).T @ s  # (n_s, n_s)
    factor = jnp.block([[factor, cross], [cross.T, shared]])[np.ix_(order, order)]
  d_rows = d.reshape(c * r, -1)
  return factor / b, FISHER_SCALE * (d_rows.T @ d_rows) / b, jnp.sum(mask) / b


def _row_mean(a, mask):
  """(C, 1, n_a) each configuration's mean of the per-row columns a (C, R, n_a) over its
  rows that reach log|psi| (mask (C, R, 1)); 0 where none does."""
  return (jnp.sum(a * mask, axis=1, keepdims=True)
          / jnp.maximum(jnp.sum(mask, axis=1, keepdims=True), 1.0))


def _mean_input(a, s, order, mask, bias: bool):
  """(C, n_in (+1)) each configuration's mean input over its rows that reach log|psi|, in
  the kernel's order (the bias's entry 1, the shared columns as they are)."""
  mean = _row_mean(a, mask)[:, 0]
  if bias:  # The bias's derivative is exactly sum_r d_r: its column is 1.
    mean = jnp.concatenate([mean[:, :-1], jnp.ones_like(mean[:, -1:])], axis=-1)
  return mean if s is None else jnp.concatenate([mean, s], axis=-1)[:, order]


def _reduce(a, s, order, mask, d, bias: bool, b: int) -> tuple:
  """KFAC-reduce's (A, G, repeats) of one layer (module docstring; arguments: `_expand`)."""
  mean = _mean_input(a, s, order, mask, bias)
  summed = jnp.sum(d, axis=1)  # (C, n_out)
  return (mean.T @ mean / b, FISHER_SCALE * (summed.T @ summed) / b,
          jnp.asarray(a.shape[0] / b, a.dtype))


def _split(a, s, order, mask, d, bias: bool, b: int) -> tuple:
  """(A1, G1, R1, A2, G2, K) of one layer (arguments: `_expand`): KFAC-expand's factors of
  each row's input less its configuration's mean (zero in the shared columns and the
  bias's), then KFAC-reduce's (A1 kron G1 / R1 + A2 kron G2 / K)."""
  deviation = (a - _row_mean(a, mask)) * mask
  if bias:
    deviation = deviation.at[..., -1].set(0.0)
  a1, g1, r1 = _expand(deviation, None, order, mask, d, bias, b)
  if s is not None:  # Zero in the shared columns, which every row has alike.
    n_s = s.shape[-1]
    a1 = jnp.pad(a1, ((0, n_s), (0, n_s)))[np.ix_(order, order)]
  return (a1, g1, r1) + _reduce(a, s, order, mask, d, bias, b)


EXPAND = choices.Choice('expand', _expand, "kfac-jax's and FermiNet's: every row its own "
                        'example')
REDUCE = choices.Choice('reduce', _reduce, 'one row per configuration: its mean input, its '
                        'summed output derivative (Eschenhagen et al. 2023)')
SPLIT = choices.Choice('split', _split, 'reduce over the mean inputs plus expand over each '
                       "row's deviation from them, inverted together")
ROWS = choices.table(EXPAND, REDUCE, SPLIT)  # How a dense layer's rows are factored.


REST = 'rest'  # Key of the one dense block over every parameter outside the dense layers,
# its rows in ravel_pytree's order of their flattened {path: array} dict.


def make_statistics(network, params, n_coords: int, dense_rest: bool = False,
                    factoring: choices.Choice = EXPAND) -> tuple:
  """(statistics(params, x (B, 3N), weights=None, atoms=None, scale=None), layers): per-layer
  factors (a record of ROWS: (A, G, repeats), or SPLIT's six) and per-parameter diagonal of
  F of this batch (with `dense_rest`, instead
  {REST: the dense block of F over those parameters}; the nuclei at
  `atoms`: (M, 3), or (B, M, 3) per walker; None: the network's own; `scale`, a scaled
  cell's factor, batching.over_walkers), as defined above, and with `weights` (B,) also
  sum_i weights_i d log|psi(x_i)| / d params, assembled from the same pass (the VMC
  gradient, for weights dE/dlog|psi_i|): `((factors, diagonal), grads)`. `params` (arrays
  or shapes) fix the layers."""
  dtype = jax.tree.leaves(params)[0].dtype
  layers = _layers(zero_taps(network, params, jnp.zeros((n_coords,), dtype)))
  dense = {path + (leaf,) for path in layers for leaf in ('kernel', 'bias')}

  def per_walker(params, x, *nuclei):
    flat = traverse_util.flatten_dict(params['params'])
    diagonal = {k: v for k, v in flat.items() if k not in dense}

    def log_psi(diagonal, taps):
      merged = traverse_util.unflatten_dict({**flat, **diagonal})
      return tapped_log_psi(network, {'params': merged}, taps, x, *nuclei)

    (_, inputs), grads = jax.value_and_grad(log_psi, argnums=(0, 1), has_aux=True)(
        diagonal, zero_taps(network, params, x))
    return inputs, grads

  def statistics(params, x, weights=None, atoms=None, scale=None):
    inputs, (g_diag, g_taps) = batching.over_walkers(per_walker)(params, x, atoms, scale)
    b = x.shape[0]
    inputs, g_taps = traverse_util.flatten_dict(inputs), traverse_util.flatten_dict(g_taps)
    flat = traverse_util.flatten_dict(params['params'])
    factors, grads = {}, {}
    for path in layers:
      (blocks,) = inputs[path + ('inputs',)]  # The layer's column blocks, a tuple as sown.
      bias = path + ('bias',) in flat
      a, s, order = _columns(blocks, bias)  # (C, R, n_a), (C, n_s) or None.
      c, r = a.shape[:2]  # C = B configurations (B K with K states), R rows each.
      d = g_taps[path + ('outputs',)].reshape(c, r, -1)  # (C, R, n_out)
      # Rows whose output does not reach log|psi| are not counted (kfac-jax's masking);
      # the bias's column of ones is counted in every row.
      mask = jnp.any(d != 0, axis=-1, keepdims=True).astype(a.dtype)  # (C, R, 1)
      if bias:
        a = jnp.concatenate([a[..., :-1] * mask, a[..., -1:]], axis=-1)
      else:
        a = a * mask
      rows = a.reshape(c * r, -1)
      factors[_name(path)] = factoring(a, s, order, mask, d, bias, b)
      if weights is not None:  # d log|psi| / d kernel = sum over rows of a d^T.
        wd = jnp.repeat(weights, c // b)[:, None, None] * d  # (C, R, n_out)
        g = rows.T @ wd.reshape(c * r, -1)  # (n_a, n_out)
        if s is not None:
          g = jnp.concatenate([g, s.T @ jnp.sum(wd, axis=1)])[order]
        kernel = flat[path + ('kernel',)]
        if bias:
          grads[path + ('bias',)] = g[-1].reshape(flat[path + ('bias',)].shape)
          g = g[:-1]
        grads[path + ('kernel',)] = g.reshape(kernel.shape)
    if dense_rest:  # One block of F over all of them: (2 / B) sum_i J_i^T J_i.
      j = jax.vmap(lambda g: ravel_pytree(g)[0])(g_diag)  # (walkers, P)
      diagonal = {REST: FISHER_SCALE * (j.T @ j) / b}
    else:
      diagonal = {_name(k): FISHER_SCALE * jnp.sum(g**2, axis=0) / b
                  for k, g in g_diag.items()}
    if weights is None:
      return factors, diagonal
    grads.update({k: jnp.tensordot(weights, g, axes=1) for k, g in g_diag.items()})
    return (factors, diagonal), {'params': traverse_util.unflatten_dict(grads)}

  return statistics, layers


def make_gradient(network, n_coords: int, dense_rest: bool = False,
                  factoring: choices.Choice = EXPAND):
  """gradient(params, x (B, 3N), weights (B,), atoms=None, scale=None) -> (sum_i weights_i d
  log|psi(x_i)| / d params, this batch's curvature statistics), the nuclei at `atoms` (M, 3)
  (None: the network's own; `scale`: make_statistics): the VMC gradient and what `kfac`'s
  update (with the same `dense_rest` and `factoring`) would otherwise compute from x with a
  second pass through the network (samples.curvature)."""

  def gradient(params, x, weights, atoms=None, scale=None):
    statistics, _ = make_statistics(network, params, n_coords, dense_rest, factoring)
    curvature, grads = statistics(params, x, weights, atoms, scale)
    return grads, curvature

  return gradient


def damped_factors(a: jax.Array, g: jax.Array, damping) -> tuple:
  """(A_d, G_d), the pi-adjusted factored damping of A kron G + damping I, A_d kron G_d: each
  factor normalised to unit mean eigenvalue, sqrt(damping) / sqrt(norm_A norm_G) added to
  both, the scale restored (kfac-jax's `pi_adjusted_kronecker_factors`). A zero factor gives
  sqrt(damping) I for both."""
  norm_a = jnp.trace(a) / a.shape[0]
  norm_g = jnp.trace(g) / g.shape[0]
  c = jnp.sqrt(norm_a * norm_g)
  positive = jnp.minimum(norm_a, norm_g) > 0
  safe = lambda v: jnp.where(positive, v, 1.0)
  extra = jnp.sqrt(damping) / safe(c)

  def damped(m, norm):
    eye = jnp.eye(m.shape[0], dtype=m.dtype)
    return jnp.where(positive, (m / safe(norm) + extra * eye) * c, jnp.sqrt(damping) * eye)

  return damped(a, norm_a), damped(g, norm_g)


def _spd_inverse(m: jax.Array) -> jax.Array:
  eye = jnp.eye(m.shape[0], dtype=m.dtype)
  return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(m), eye)


def damped_inverses(a: jax.Array, g: jax.Array, damping) -> tuple:
  """(A_d^-1, G_d^-1) of `damped_factors`."""
  return tuple(_spd_inverse(m) for m in damped_factors(a, g, damping))


def _jointly_diagonal(p: jax.Array, q: jax.Array) -> tuple:
  """(W, s): W p W^T = I and W q W^T = diag(s) for p positive definite and q positive
  semi-definite (s below 0 by round-off taken as 0), from p's Cholesky factor."""
  lower = jnp.linalg.cholesky(p)
  inv = jax.scipy.linalg.solve_triangular(lower, jnp.eye(p.shape[0], dtype=p.dtype),
                                          lower=True)
  values, vectors = jnp.linalg.eigh(inv @ q @ inv.T)
  return vectors.T @ inv, jnp.maximum(values, 0.0)


def _invert(factors: dict, diagonal: dict, weight, damping, dense_rest: bool) -> dict:
  out = {}
  for name, factor in factors.items():
    a, g, repeats = factor[:3]
    repeats = repeats / weight
    # F = (A kron G) / repeats: damping the bracket by damping * repeats damps F by damping.
    if len(factor) == 3:
      a_inv, g_inv = damped_inverses(a / weight, g / weight, damping * repeats)
      out[name] = (a_inv, g_inv * repeats)
      continue
    # SPLIT: A1_d kron G1_d / R1 + A2 kron G2 / K = (Wa^-1 kron Wg^-1) (I + Sa kron Sg)
    # (Wa^-T kron Wg^-T) with Wa, Wg jointly diagonalising each pair of factors.
    a2, g2, states = factor[3:]
    a1, g1 = damped_factors(a / weight, g / weight, damping * repeats)
    wa, sa = _jointly_diagonal(a1, a2 / weight)
    wg, sg = _jointly_diagonal(g1 / repeats, g2 / states)
    out[name] = (wa, sa, wg, sg)
  if dense_rest:  # By eigenvalues, those that round-off made negative taken as 0: float32.
    values, vectors = jnp.linalg.eigh(diagonal[REST] / weight)
    out[REST] = (vectors / (jnp.maximum(values, 0.0) + damping)) @ vectors.T
    return out
  for name, d in diagonal.items():
    out[name] = 1.0 / (d / weight + damping)
  return out


def _stacked(flat: dict, path: tuple, n_out: int) -> jax.Array:
  """A layer's [kernel; bias] (n_in (+1), n_out): the rows its factor A is over."""
  v = flat[path + ('kernel',)].reshape(-1, n_out)
  if path + ('bias',) in flat:
    v = jnp.concatenate([v, flat[path + ('bias',)].reshape(1, n_out)])
  return v


def precondition(grads, inverses: dict, layers: list, dense_rest: bool = False):
  """F^-1 g with the block inverses: A^-1 [dK; db] G^-1 per layer (SPLIT's: _invert), g /
  diag elsewhere (with `dense_rest`, the rest block's inverse times those parameters'
  g)."""
  flat = traverse_util.flatten_dict(grads['params'])
  out = {}
  for path in layers:
    inverse = inverses[_name(path)]
    kernel = flat[path + ('kernel',)]
    if len(inverse) == 2:
      a_inv, g_inv = inverse
      u = a_inv @ _stacked(flat, path, g_inv.shape[0]) @ g_inv
    else:  # SPLIT's: Wa^T [(Wa V Wg^T) / (1 + sa sg^T)] Wg.
      wa, sa, wg, sg = inverse
      w = wa @ _stacked(flat, path, sg.shape[0]) @ wg.T
      u = wa.T @ (w / (1.0 + sa[:, None] * sg[None, :])) @ wg
    bias = path + ('bias',)
    if bias in flat:
      out[bias] = u[-1].reshape(flat[bias].shape)
      u = u[:-1]
    out[path + ('kernel',)] = u.reshape(kernel.shape)
  others = {k: v for k, v in flat.items() if k not in out}
  if dense_rest:
    g, unravel = ravel_pytree(others)
    out.update(unravel(inverses[REST] @ g))
  else:
    out.update({k: inverses[_name(k)] * v for k, v in others.items()})
  return {'params': traverse_util.unflatten_dict(out)}


def model_length(update, factors: dict, diagonal: dict, layers: list, weight=1.0):
  """() u^T F~ u: the squared length of `update` u (a params pytree) in KFAC's block-diagonal
  curvature F~, undamped, from statistics as `make_statistics` gives them (`weight` 1) or
  as KfacState holds them (decayed sums over steps, normalised by its `weight`)."""
  flat = traverse_util.flatten_dict(update['params'])
  total, blocked = 0.0, set()
  for path in layers:
    factor = factors[_name(path)]
    v = _stacked(flat, path, factor[1].shape[0])
    blocked |= {path + ('kernel',), path + ('bias',)}
    for a, g, repeats in [factor[i:i + 3] for i in range(0, len(factor), 3)]:
      total = total + jnp.sum((a @ v @ g) * v) / repeats  # vec(V)^T (A kron G) vec(V) / R
  others = {k: v for k, v in flat.items() if k not in blocked}
  if REST in diagonal:
    r = ravel_pytree(others)[0]
    total = total + r @ diagonal[REST] @ r
  else:
    total = total + sum(jnp.sum(diagonal[_name(k)] * v**2) for k, v in others.items())
  return total / weight


def kfac(network, n_coords: int, damping: float, cov_ema_decay: float,
         invert_every: int, dense_rest: bool = False,
         factoring: choices.Choice = EXPAND) -> optax.GradientTransformationExtraArgs:
  """The KFAC direction F^-1 g. Its `update(grads, state, params, *, samples, count)` needs
  the step's walkers (`samples.x`, (B, 3N)), whose curvature statistics it folds in first
  (`samples.curvature` when the gradient's pass gave them: `make_gradient`), and the number
  of updates applied before (`count`, () int32), which decides when the factors are
  inverted."""

  def init(params):
    dtype = jax.tree.leaves(params)[0].dtype
    statistics, _ = make_statistics(network, params, n_coords, dense_rest, factoring)
    shapes = jax.eval_shape(statistics, params, jnp.zeros((1, n_coords), dtype))
    zeros = lambda tree: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), tree)
    factors, diagonal = zeros(shapes)
    # Placeholders of the inverses' shapes, never used: the first update (count 0) inverts.
    # Not computed: their factorisations would only add compilation to the start-up.
    invert = lambda f, d, w: _invert(f, d, w, damping, dense_rest)
    inverses = zeros(jax.eval_shape(invert, factors, diagonal, jnp.ones((), dtype)))
    return KfacState(jnp.zeros((), dtype), factors, diagonal, inverses)

  def update(grads, state: KfacState, params=None, *, samples=None, count=None, **extra):
    del extra
    dtype = jax.tree.leaves(params)[0].dtype
    statistics, layers = make_statistics(network, params, n_coords, dense_rest, factoring)
    if samples.curvature is None:
      factors, diagonal = statistics(params, samples.x, atoms=samples.atoms,
                                     scale=samples.scale)
    else:
      factors, diagonal = samples.curvature
    decay = jnp.asarray(cov_ema_decay, dtype)
    acc = lambda old, new: decay * old + new
    factors = jax.tree.map(acc, state.factors, factors)
    diagonal = jax.tree.map(acc, state.diagonal, diagonal)
    weight = decay * state.weight + 1.0
    if invert_every == 1:
      inverses = _invert(factors, diagonal, weight, damping, dense_rest)
    else:
      inverses = jax.lax.cond(count % invert_every == 0,
                              lambda: _invert(factors, diagonal, weight, damping, dense_rest),
                              lambda: state.inverses)
    direction = precondition(grads, inverses, layers, dense_rest)
    return direction, KfacState(weight, factors, diagonal, inverses)

  return optax.GradientTransformationExtraArgs(init, update)
