"""KFAC: the curvature taps give exactly the per-walker derivatives autodiff gives; the
factors and the first update equal kfac-jax's (where kfac-jax still runs, jax < 0.9) with
the same blocks; the damped inverse is that of pi-adjusted Kronecker damping; where the
Kronecker factorisation is exact, the direction is the natural gradient solved in numpy."""

from flax import linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_network
from ferminet_fast.physics import laplacians
from ferminet_fast.optimizers import kfac, optim
from ferminet_fast.wavefunction import networks

NETWORKS = {
    'ferminet': {},
    'psiformer': {'network.network_type': 'psiformer', 'network.psiformer.heads': 2,
                  'network.psiformer.head_dim': 4, 'network.psiformer.layer_norm': True},
    'ferminet, 2 states': {'system.states': 2},  # Each layer's rows of both configurations.
}
# LapNet's layers are Psiformer's Dense; its taps are checked, not its whole update again.
TAPPED = {**NETWORKS, 'lapnet': {
    'network.network_type': 'lapnet', 'network.lapnet.heads': 2, 'network.lapnet.head_dim': 4,
    'network.lapnet.layer_norm': True}}
LAYERS = {'psiformer': 13, 'lapnet': 15}  # Psiformer's 5 per layer; LapNet's 5, 2 between.


def _rows(blocks):
  """A layer's sown column blocks as the rows its kernel multiplies (rows, n_in): the
  blocks shared by a configuration's rows repeated in each of them, all concatenated."""
  depth = max(x.ndim for x in blocks)
  r = next(x for x in blocks if x.ndim == depth).shape[-2]
  full = [x if x.ndim == depth else jnp.repeat(x[..., None, :], r, axis=-2) for x in blocks]
  full = jnp.concatenate(full, axis=-1)
  return full.reshape(-1, full.shape[-1])


@pytest.mark.parametrize('name', list(TAPPED))
@pytest.mark.jax_range
def test_taps_give_every_layers_parameter_gradient(name):
  """For each dense layer, sum over rows of input (x) d log|psi| / d output is the kernel's
  gradient (and the output derivative summed over rows the bias's), per walker; so A and
  G are built from the right quantities. float64, against jax.grad of log|psi| (with two
  states, of the total wavefunction's)."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64, **TAPPED[name])
    x = jax.random.normal(jax.random.PRNGKey(3), (3, network.n_coords), jnp.float64)
    gradient = jax.jit(jax.grad(network.log_psi))
    tapped = jax.jit(jax.value_and_grad(
        lambda taps, xi: kfac.tapped_log_psi(network, params, taps, xi), has_aux=True))
    for xi in x:
      grad = traverse_util.flatten_dict(gradient(params, xi)['params'])
      (value, inputs), d_taps = tapped(kfac.zero_taps(network, params, xi), xi)
      np.testing.assert_allclose(value, network.log_psi(params, xi), rtol=1e-12)
      inputs = traverse_util.flatten_dict(inputs)
      d_taps = traverse_util.flatten_dict(d_taps)
      layers = sorted(k[:-1] for k in d_taps)
      assert len(layers) == LAYERS.get(name, 5)
      for path in layers:
        a = _rows(inputs[path + ('inputs',)][0])
        kernel = grad[path + ('kernel',)]
        d = d_taps[path + ('outputs',)].reshape(a.shape[0], -1)
        np.testing.assert_allclose((a.T @ d).reshape(kernel.shape), kernel, atol=1e-10,
                                   err_msg=str(path))
        if path + ('bias',) in grad:
          np.testing.assert_allclose(d.sum(0).reshape(grad[path + ('bias',)].shape),
                                     grad[path + ('bias',)], atol=1e-10)


@pytest.mark.parametrize('name', list(NETWORKS))
def test_gradient_from_the_curvature_pass_is_the_vmc_gradient(name):
  """With KFAC the step takes the VMC gradient from the pass that gives the curvature
  statistics (kfac.make_gradient): equal to the derivative of the energy (loss.make_energy's,
  the step's with any other optimizer), and those statistics equal to the ones KFAC's update
  computes from the walkers itself. float64, with clipping active."""
  from ferminet_fast import config, plan
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64, **NETWORKS[name])
    x = jax.random.normal(jax.random.PRNGKey(3), (6, network.n_coords), jnp.float64)
    cfg = config.default()
    cfg.optim.clip_local_energy = 0.5  # Some walkers clipped: their weights change.
    parts = {}
    for method in ('kfac', 'adam'):
      cfg.optim.optimizer = method
      parts[method] = plan.make_parts(cfg, system, network, laplacians.JACFWD, 0)
    (e, aux), grads, curvature = jax.jit(parts['kfac'].energy_grad)(params, x)
    (e_ref, _), grads_ref, none = jax.jit(parts['adam'].energy_grad)(params, x)
    assert none is None and float(e) == pytest.approx(float(e_ref), rel=1e-12)
    unclipped = aux.local_energy - jnp.mean(aux.local_energy)
    assert not np.allclose(aux.centred, unclipped)  # The clipping took part.
    for (path, g), g_ref in zip(jax.tree_util.tree_leaves_with_path(grads),
                                jax.tree.leaves(grads_ref)):
      np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-12,
                                 err_msg=jax.tree_util.keystr(path))
    assert jax.tree.structure(grads) == jax.tree.structure(grads_ref)
    statistics, _ = kfac.make_statistics(network, params, network.n_coords)
    for got, want in zip(jax.tree.leaves(curvature),
                         jax.tree.leaves(jax.jit(statistics)(params, x))):
      np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)  # Roundoff only.


def test_statistics_with_each_walkers_nuclei_pool_those_of_each_geometry():
  """Walkers of two geometries in one batch, each with its own nuclei (atoms (B, M, 3)):
  the gradient is the sum, and every curvature statistic the mean, of those of each
  geometry's walkers alone with the nuclei shared (a set of geometries trained at once)."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('H', jnp.float64, **{
        'system.atom': '', 'system.molecule': 'H 0 0 0; H 0 0 1.4', 'system.units': 'bohr'})
    b = 6
    x = jax.random.normal(jax.random.PRNGKey(3), (2 * b, network.n_coords), jnp.float64)
    w = jax.random.normal(jax.random.PRNGKey(4), (2 * b,), jnp.float64)
    stack = jnp.asarray([[[0, 0, 0], [0, 0, 1.4]], [[0, 0, 0.1], [0, 0, 2.3]]], jnp.float64)
    statistics, _ = kfac.make_statistics(network, params, network.n_coords)
    statistics = jax.jit(statistics)
    (factors, diagonal), grads = statistics(params, x, w, jnp.repeat(stack, b, 0))
    alone = [statistics(params, x[i * b:(i + 1) * b], w[i * b:(i + 1) * b], stack[i])
             for i in range(2)]
    jax.tree.map(lambda got, *each: np.testing.assert_allclose(got, sum(each), rtol=1e-10,
                                                               atol=1e-12),
                 grads, *[g for _, g in alone])
    jax.tree.map(lambda got, *each: np.testing.assert_allclose(got, sum(each) / 2, rtol=1e-10,
                                                               atol=1e-12),
                 (factors, diagonal), *[c for c, _ in alone])
    one = statistics(params, x, w, stack[0])[1]  # The nuclei mattered.
    assert not np.allclose(jax.tree.leaves(one)[0], jax.tree.leaves(grads)[0])


@pytest.mark.parametrize('name', list(NETWORKS))
def test_statistics_are_the_kronecker_factors_of_the_concatenated_rows(name):
  """Each dense layer's factors as defined in kfac.py, formed here from the concatenated
  rows the kernel multiplies (the spin-wise means repeated in every electron's row):
  A = (1/B) sum [a, 1] [a, 1]^T over rows that reach log|psi|, G = (2/B) sum d d^T, and the
  weighted gradient sum_rows [a, 1] (w d)^T; the statistics get the shared columns' part
  from sums over each configuration's rows instead. float64."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64, **NETWORKS[name])
    b = 5
    kx, kw = jax.random.split(jax.random.PRNGKey(4))
    x = jax.random.normal(kx, (b, network.n_coords), jnp.float64)
    weights = jax.random.normal(kw, (b,), jnp.float64)
    statistics, layers = kfac.make_statistics(network, params, network.n_coords)
    (factors, _), grads = jax.jit(statistics)(params, x, weights)
    grads = traverse_util.flatten_dict(grads['params'])
    tapped = jax.jit(jax.vmap(jax.grad(
        lambda taps, xi: kfac.tapped_log_psi(network, params, taps, xi), has_aux=True),
        in_axes=(None, 0)))
    d_taps, inputs = tapped(kfac.zero_taps(network, params, x[0]), x)
    d_taps, inputs = traverse_util.flatten_dict(d_taps), traverse_util.flatten_dict(inputs)
    flat = traverse_util.flatten_dict(params['params'])
    for path in layers:
      a = _rows(inputs[path + ('inputs',)][0])
      d = d_taps[path + ('outputs',)].reshape(a.shape[0], -1)
      mask = np.any(d != 0, axis=-1, keepdims=True)
      a = a * mask
      w = np.repeat(weights, a.shape[0] // b)[:, None]
      if path + ('bias',) in flat:
        a = np.concatenate([a, np.ones_like(a[:, :1])], axis=1)
      got_a, got_g, repeats = factors['/'.join(path)]
      scale = lambda m: 1e-12 * np.abs(m).max()
      np.testing.assert_allclose(got_a, a.T @ a / b, rtol=0, atol=scale(a.T @ a / b),
                                 err_msg=str(path))
      np.testing.assert_allclose(got_g, 2 * d.T @ d / b, rtol=0, atol=scale(d.T @ d),
                                 err_msg=str(path))
      assert float(repeats) == pytest.approx(mask.sum() / b)
      g = a.T @ (w * d)
      if path + ('bias',) in flat:
        np.testing.assert_allclose(grads[path + ('bias',)].ravel(), g[-1], rtol=0,
                                   atol=scale(g))
        g = g[:-1]
      np.testing.assert_allclose(grads[path + ('kernel',)].reshape(g.shape), g, rtol=0,
                                 atol=scale(g), err_msg=str(path))


@pytest.mark.jax_range
def test_damped_inverse_is_the_pi_adjusted_kronecker_inverse():
  """(A^-1 kron G^-1) inverts (pi A + sqrt(l) I) kron (G / pi + sqrt(l) I), pi^2 the ratio of
  the factors' mean eigenvalues (Martens & Grosse 2015, section 6.3)."""
  with jax.enable_x64(True):
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(k1, (5, 5), jnp.float64)
    g = jax.random.normal(k2, (3, 3), jnp.float64)
    a, g, damping = a @ a.T, 4.0 * g @ g.T, 0.3
    a_inv, g_inv = kfac.damped_inverses(a, g, damping)
    pi = np.sqrt((np.trace(a) / 5) / (np.trace(g) / 3))
    expected = np.kron(a + pi * np.sqrt(damping) * np.eye(5),
                       g + np.sqrt(damping) / pi * np.eye(3))
    np.testing.assert_allclose(np.kron(a_inv, g_inv) @ expected, np.eye(15), atol=1e-10)


def _kfac_jax():
  """kfac-jax, where it runs (its graph tracing breaks on jax >= 0.9)."""
  kfac_jax = pytest.importorskip('kfac_jax')
  if tuple(int(v) for v in jax.__version__.split('.')[:2]) >= (0, 9):
    pytest.skip(f'kfac-jax 0.0.8 does not run on jax {jax.__version__}')
  return kfac_jax


@pytest.fixture
def x64():
  with jax.enable_x64(True):
    yield


@pytest.mark.jax_range
def test_first_update_equals_kfac_jax(x64):
  """Same dense blocks registered in kfac-jax (repeated dense, exact Fisher of the normal
  likelihood on log|psi|): equal factors and equal first preconditioned update for every
  dense layer and the envelope weights (kfac-jax's scale-and-shift blocks). The other
  parameters differ by design: kfac-jax squares their summed gradient, we sum per-walker
  squares."""
  import flax.linen as nn
  kfac_jax = _kfac_jax()
  system, network, params = tiny_network('Li', jnp.float64)
  b = 16
  x = jax.random.normal(jax.random.PRNGKey(1), (b, network.n_coords), jnp.float64)

  def tag(next_fun, args, kwargs, context):
    """Each of our dense layers as one kfac-jax repeated-dense layer on its input rows."""
    module = context.module
    if context.method_name != '__call__' or not isinstance(
        module, (networks.Dense, networks.SymmetricDense)):
      return next_fun(*args, **kwargs)
    out = next_fun(*args, **kwargs)
    w = module.variables['params']
    kernel, bias = w['kernel'], w.get('bias')
    if isinstance(module, networks.SymmetricDense):
      h1, h2 = args
      spins = [(lo, hi) for _, lo, hi in networks.systems.spin_blocks(module.n_up, module.n_down)]
      shared = jnp.concatenate([jnp.mean(h1[lo:hi], axis=0) for lo, hi in spins])
      pair = jnp.concatenate([jnp.mean(h2[:, lo:hi], axis=1) for lo, hi in spins], axis=-1)
      rows = jnp.concatenate([h1, jnp.broadcast_to(shared, (h1.shape[0], shared.shape[0])),
                              pair], axis=-1)
    else:
      rows = args[0].reshape(-1, kernel.shape[0])
    y = rows @ kernel + (0.0 if bias is None else bias)
    tagged = kfac_jax.register_dense(y, rows, kernel, bias, variant='repeated_dense')
    return tagged.reshape(out.shape)

  def value_func(p, xs):
    with nn.intercept_methods(tag):
      log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))(p, xs)
    kfac_jax.register_normal_predictive_distribution(log_psi[:, None])
    return jnp.mean(log_psi)

  damping = 1e-3
  reference = kfac_jax.OptaxPreconditioner(
      value_func, damping=damping, norm_constraint=None, curvature_ema=0.95,
      inverse_update_period=1, estimation_mode='fisher_exact', distributed_inverses=False,
      distributed_precon_apply=False)
  grads = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(p.size), p.shape), params)
  ref_state = reference.init((params, x), jax.random.PRNGKey(2))
  ref_state = jax.jit(reference.maybe_update)(ref_state, (params, x), jax.random.PRNGKey(2))
  expected = traverse_util.flatten_dict(jax.jit(reference.apply)(grads, ref_state)['params'])

  samples = optim.Samples(x, jax.random.PRNGKey(3), jnp.zeros((b,)))
  ours = kfac.kfac(network, network.n_coords, damping, 0.95, 1)
  direction, state = jax.jit(ours.update)(grads, ours.init(params), params, samples=samples,
                                          count=jnp.zeros((), jnp.int32))
  got = traverse_util.flatten_dict(direction['params'])

  statistics, layers = kfac.make_statistics(network, params, network.n_coords)
  assert len(layers) == 5
  compared = 0
  for key, value in expected.items():
    if key[0].startswith(('one_', 'two_', 'orbital_')) or key[-1].endswith('_pi'):
      # float64: both solve systems of condition ~ 1 / damping, so entries agree to
      # round-off times that condition, relative to each array's largest.
      np.testing.assert_allclose(got[key], value, rtol=0, atol=1e-9 * np.abs(value).max(),
                                 err_msg=str(key))
      compared += 1
  assert compared == 10  # one_0, one_1, two_0 (kernel, bias each), 2 orbitals, 2 pi.

  # The Kronecker factors themselves: kfac-jax's blocks, matched by their parameter shapes.
  ours_by_shape = {}
  for name, (a, g, repeats) in state.factors.items():
    ours_by_shape.setdefault((a.shape, g.shape), []).append((a / state.weight, g / state.weight))
  matched = 0
  for block, block_state in zip(reference.estimator.blocks,
                                ref_state.estimator_state.blocks_states):
    if isinstance(block, kfac_jax.curvature_blocks.RepeatedDenseKroneckerFactored):
      a_ref, g_ref = (f.value for f in block_state.factors)
      candidates = ours_by_shape[(a_ref.shape, g_ref.shape)]
      close = lambda m, ref: np.abs(m - ref).max() <= 1e-9 * np.abs(ref).max()
      assert any(close(a, a_ref) and close(g, g_ref) for a, g in candidates), block
      matched += 1
  assert matched == 5


class _BilinearLogPsi(nn.Module):
  """log|psi|(x) = sum_r z_r . (p W + b), x = (p, z_1, ..., z_R): one dense layer applied
  to R rows that all hold the first coordinates p, its outputs weighted by the others."""
  n_p: int
  n_out: int
  n_rows: int

  @nn.compact
  def __call__(self, x):
    p = jnp.broadcast_to(x[:self.n_p], (self.n_rows, self.n_p))
    y = networks.Dense(self.n_out, param_dtype=jnp.float64)(p)
    return jnp.ones((), x.dtype), jnp.sum(y * x[self.n_p:].reshape(self.n_rows, self.n_out))


def _bilinear_network(n_p, n_out, n_rows=1):
  module = _BilinearLogPsi(n_p, n_out, n_rows)

  def instrumented(variables, x, mutable, interceptor, atoms=None):
    with nn.intercept_methods(interceptor):
      return module.apply(variables, x, mutable=mutable)

  return networks.Network(
      init=lambda key: module.init(key, jnp.zeros((n_p + n_rows * n_out,), jnp.float64)),
      apply=lambda p, x, atoms=None: module.apply(p, x),
      log_psi=lambda p, x, atoms=None: module.apply(p, x)[1], orbitals=None,
      instrumented=instrumented, n_coords=n_p + n_rows * n_out, dtype=jnp.float64)


@pytest.mark.parametrize('fused,rows', [(False, 'expand'), (True, 'expand'),
                                        (False, 'reduce'), (True, 'reduce'), (False, 'split'),
                                        (True, 'split')])
@pytest.mark.jax_range
def test_direction_is_the_natural_gradient_where_the_factorisation_is_exact(fused, rows):
  """KFAC's direction against a natural-gradient solve in numpy, on a model whose Fisher
  matrix is exactly one Kronecker product: log|psi| = sum_r z_r . (p W + b) on a batch of
  every pairing of J inputs p with K sets of R weight vectors z_r. The parameters'
  derivative for one walker is [p; 1] zbar^T, zbar = sum_r z_r, so F = (2/B) sum_jk ([p_j; 1]
  [p_j; 1]^T) kron (zbar_k zbar_k^T) = (sum_j ...) kron (sum_k ...) (2/B). With one row
  (R = 1) that is KFAC-expand's A kron G; with R = 3 rows sharing their input (the last
  with z_r = 0: its output does not reach log|psi| and the factors leave it out) it is
  KFAC-reduce's, and not expand's, which leaves out the products of two rows' z; the split
  (reduce plus expand over each row's deviation from the mean input, here none) is F plus
  its damping exactly. F is formed here
  from per-walker autodiff Jacobians and checked to be a Kronecker product (rank one after
  Van Loan's rearrangement); the split into factors is not unique, but the pi-adjusted
  damped product (A + pi sqrt(l) I) kron (G + sqrt(l) / pi I), pi^2 = (tr A / n_A) /
  (tr G / n_G), is the same for every split. With negligible damping the direction is
  (F + l I)^-1 g; with damping l it is that damped product's inverse times g. Through
  optim.kfac, with the curvature computed by the update or (fused) by the gradient's pass."""
  from ferminet_fast import config
  n_p, n_out, n_j, n_k = 3, 2, 6, 5
  n_rows = 1 if rows == 'expand' else 3
  n_a = n_p + 1
  with jax.enable_x64(True):
    network = _bilinear_network(n_p, n_out, n_rows)
    params = network.init(jax.random.PRNGKey(0))
    kp, kz, kg = jax.random.split(jax.random.PRNGKey(1), 3)
    p = jax.random.normal(kp, (n_j, n_p), jnp.float64)
    z = jax.random.normal(kz, (n_k, n_rows * n_out), jnp.float64)
    if n_rows > 1:  # The last row's output does not reach log|psi|: it is not counted.
      z = z.at[:, -n_out:].set(0.0)
    x = jnp.concatenate([jnp.repeat(p, n_k, axis=0), jnp.tile(z, (n_j, 1))], axis=1)
    b = x.shape[0]

    # The exact Fisher matrix, parameters ordered as the rows of [W; b] (n_a, n_out).
    def as_matrix(tree):
      w = tree['params']['Dense_0']
      return np.concatenate([np.asarray(w['kernel']), np.asarray(w['bias'])[None]])

    def as_tree(matrix):
      return {'params': {'Dense_0': {'kernel': jnp.asarray(matrix[:-1]),
                                     'bias': jnp.asarray(matrix[-1])}}}

    jacobian = jax.vmap(jax.grad(network.log_psi), in_axes=(None, 0))(params, x)
    j = np.stack([as_matrix(jax.tree.map(lambda v, i=i: v[i], jacobian))
                  for i in range(b)]).reshape(b, -1)
    fisher = 2.0 * j.T @ j / b
    rearranged = fisher.reshape(n_a, n_out, n_a, n_out).transpose(0, 2, 1, 3).reshape(
        n_a * n_a, n_out * n_out)
    u, s, vt = np.linalg.svd(rearranged)
    assert s[1] < 1e-12 * s[0]  # F is one Kronecker product.
    a = (u[:, 0] * np.sqrt(s[0])).reshape(n_a, n_a)
    g = (vt[0] * np.sqrt(s[0])).reshape(n_out, n_out)
    if np.trace(a) < 0:
      a, g = -a, -g
    np.testing.assert_allclose(np.kron(a, g), fisher, atol=1e-12 * np.abs(fisher).max())
    assert np.linalg.eigvalsh(fisher).min() > 1e-3 * np.linalg.eigvalsh(fisher).max()

    grads_matrix = np.asarray(jax.random.normal(kg, (n_a, n_out), jnp.float64))
    grads = as_tree(grads_matrix)
    cfg = config.default().optim

    def direction(damping, rows):
      cfg.kfac.damping, cfg.kfac.rows = damping, rows
      transform = optim.kfac(cfg, network)
      curvature = (optim.kfac_gradient(cfg, network)(params, x, jnp.ones((b,)))[1]
                   if fused else None)
      samples = optim.Samples(x, jax.random.PRNGKey(2), jnp.zeros((b,)), curvature)
      out, _ = jax.jit(transform.update)(grads, transform.init(params), params,
                                         samples=samples, count=jnp.zeros((), jnp.int32))
      return as_matrix(out).ravel()

    for damping in [1e-14, 0.3]:
      got = direction(damping, rows)
      pi = np.sqrt((np.trace(a) / n_a) / (np.trace(g) / n_out))
      root = np.sqrt(damping)
      damped = np.kron(a + pi * root * np.eye(n_a), g + root / pi * np.eye(n_out))
      if rows == 'split':
        damped = fisher + damping * np.eye(fisher.shape[0])
      np.testing.assert_allclose(got, np.linalg.solve(damped, grads_matrix.ravel()),
                                 rtol=1e-9, atol=1e-12, err_msg=f'damping {damping}')
      if damping < 1e-6:  # The damped product and F + l I differ by O(sqrt(l)).
        natural = np.linalg.solve(fisher + damping * np.eye(fisher.shape[0]),
                                  grads_matrix.ravel())
        np.testing.assert_allclose(got, natural, rtol=1e-4, atol=1e-4 * np.abs(natural).max())
        if n_rows > 1:  # Expand's factors are not this F's.
          expand = direction(damping, 'expand')
          assert np.abs(expand - natural).max() > 0.1 * np.abs(natural).max()


def test_a_steps_length_is_set_by_the_walkers_not_by_one_near_a_node():
  """squared_length: twice the variance of the walkers' changes of log|psi| (to the bias of
  leaving out the largest 1% of terms, about 8% for normal changes), unchanged by a change
  that is the same at every walker (|psi|^2 stays where it was) and by one walker near a
  node that changes far more than the rest, where the plain mean of squares follows that
  walker; and quadratic in the step."""
  change = np.random.default_rng(0).normal(scale=0.02, size=256)
  length = float(kfac.squared_length(jnp.asarray(change)))
  assert 0.85 * 2 * np.var(change) < length < 2 * np.var(change)
  np.testing.assert_allclose(kfac.squared_length(jnp.asarray(change + 3.0)), length, rtol=1e-5)
  at_node = change.copy()
  at_node[17] = 5.0  # log|psi| there changed by 250 standard deviations.
  np.testing.assert_allclose(kfac.squared_length(jnp.asarray(at_node)), length, rtol=0.03)
  assert 2 * np.mean(at_node**2) > 100 * length
  np.testing.assert_allclose(kfac.squared_length(jnp.asarray(3 * change)), 9 * length, rtol=1e-5)
  at_node[40] = np.nan  # A walker without a finite log|psi| is left out.
  np.testing.assert_allclose(kfac.squared_length(jnp.asarray(at_node)), length, rtol=0.03)


@pytest.mark.parametrize('name', list(NETWORKS))
def test_the_dense_rest_block_is_the_damped_fisher_of_the_other_parameters(name):
  """optim.kfac.dense_rest: on every parameter outside the dense layers (envelopes, Jastrow,
  a Psiformer's layer norms)
  the first update's direction is (F_rest + damping I)^-1 g_rest, F_rest = (2/B) sum_i
  J_i^T J_i over those parameters with J_i from jax.jacrev of log|psi| per walker, solved
  in numpy; the dense layers' directions are those of the default update, which treats
  the same parameters by the diagonal of F_rest. float64."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64, **NETWORKS[name])
    b, damping = 8, 1e-3
    x = jax.random.normal(jax.random.PRNGKey(3), (b, network.n_coords), jnp.float64)
    grads = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(p.size), p.shape),
                         params)
    samples = optim.Samples(x, jax.random.PRNGKey(3), jnp.zeros((b,)))
    directions = {}
    for dense_rest in (False, True):
      ours = kfac.kfac(network, network.n_coords, damping, 0.95, 1, dense_rest)
      direction, _ = jax.jit(ours.update)(grads, ours.init(params), params, samples=samples,
                                          count=jnp.zeros((), jnp.int32))
      directions[dense_rest] = traverse_util.flatten_dict(direction['params'])
    _, layers = kfac.make_statistics(network, params, network.n_coords)
    rest = sorted(k for k in directions[True] if k[:-1] not in layers)
    assert any('envelope' in k[0] for k in rest)
    for key in directions[True]:
      if key[:-1] in layers:
        want = directions[False][key]  # The same arithmetic, another program: roundoff.
        np.testing.assert_allclose(directions[True][key], want, rtol=1e-9,
                                   atol=1e-12 * np.abs(want).max())
    flat = traverse_util.flatten_dict(params['params'])

    def log_psi_of_rest(values, xi):
      merged = {**flat, **dict(zip(rest, values))}
      return network.log_psi({'params': traverse_util.unflatten_dict(merged)}, xi)

    jac = jax.vmap(jax.jacrev(log_psi_of_rest), in_axes=(None, 0))([flat[k] for k in rest], x)
    j = np.concatenate([np.asarray(g).reshape(b, -1) for g in jac], axis=1)  # (B, P_rest)
    fisher = 2.0 * j.T @ j / b
    g = np.concatenate([np.asarray(traverse_util.flatten_dict(grads['params'])[k]).ravel()
                        for k in rest])
    want = np.linalg.solve(fisher + damping * np.eye(len(g)), g)
    got = np.concatenate([np.asarray(directions[True][k]).ravel() for k in rest])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())
    diagonal = np.concatenate([np.asarray(directions[False][k]).ravel() for k in rest])
    np.testing.assert_allclose(diagonal, g / (np.diag(fisher) + damping), rtol=1e-8)
    assert not np.allclose(got, diagonal, rtol=1e-2)  # The block's coupling mattered.


@pytest.mark.parametrize('dense_rest', (False, True))
def test_a_steps_length_in_kfacs_curvature_is_that_of_its_dense_blocks(dense_rest):
  """kfac.model_length: u^T F~ u with F~ built densely, (A kron G) / R per layer on the
  layer's [kernel; bias] rows and the diagonal (or the dense rest block) elsewhere, from
  make_statistics of 8 walkers; a decayed sum over two steps with its weight gives their
  weighted mean. float64."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(5), (8, network.n_coords), jnp.float64)
    statistics, layers = kfac.make_statistics(network, params, network.n_coords, dense_rest)
    factors, diagonal = statistics(params, x)
    u = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(p.size + 1), p.shape),
                     params)
    flat = traverse_util.flatten_dict(u['params'])
    want = 0.0
    for path in layers:
      a, g, r = (np.asarray(f) for f in factors['/'.join(path)])
      v = np.asarray(flat[path + ('kernel',)]).reshape(-1, g.shape[0])
      if path + ('bias',) in flat:
        v = np.concatenate([v, np.asarray(flat[path + ('bias',)]).reshape(1, -1)])
      want += v.ravel() @ np.kron(a, g) @ v.ravel() / r
    rest = sorted(k for k in flat if k[:-1] not in layers)
    r = np.concatenate([np.asarray(flat[k]).ravel() for k in rest])
    if dense_rest:
      want += r @ np.asarray(diagonal[kfac.REST]) @ r
    else:
      d = np.concatenate([np.asarray(diagonal['/'.join(k)]).ravel() for k in rest])
      want += np.sum(d * r**2)
    got = kfac.model_length(u, factors, diagonal, layers)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # Two steps of the same statistics, decayed by 0.5 and normalised: the same length.
    twice = jax.tree.map(lambda s: 0.5 * s + s, (factors, diagonal))
    np.testing.assert_allclose(kfac.model_length(u, *twice, layers, weight=1.5), want,
                               rtol=1e-10)


def test_reduce_is_the_exact_fisher_on_the_columns_every_row_shares():
  """KFAC-reduce (optim.kfac.rows = 'reduce') on one walker: a step u that changes only a
  SymmetricDense layer's shared columns (the spin-wise means, the same in every electron's
  row) and its bias changes log|psi| by J u = s^T V sum_r d_r + b^T sum_r d_r, so its
  squared length 2 (J u)^2 is exactly what reduce's factors abar abar^T kron 2 dbar dbar^T
  give it; expand's (the rows as independent examples) leave out the products of two
  rows' terms and miss it. J u from jax.jvp of log|psi|. float64."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(6), (1, network.n_coords), jnp.float64)
    _, inputs = kfac.tapped_log_psi(network, params, kfac.zero_taps(network, params, x[0]),
                                    x[0])
    inputs = traverse_util.flatten_dict(inputs)
    models = {}
    for rows in ('expand', 'reduce'):
      statistics, layers = kfac.make_statistics(network, params, network.n_coords,
                                                factoring=kfac.ROWS[rows])
      models[rows] = jax.jit(statistics)(params, x)
    flat = traverse_util.flatten_dict(params['params'])
    checked = 0
    for path in layers:
      blocks = inputs[path + ('inputs',)][0]
      if len(blocks) != 3:  # SymmetricDense's (h1, shared means, pair means).
        continue
      start = blocks[0].shape[-1]
      stop = start + blocks[1].shape[-1]
      key = jax.random.PRNGKey(checked)
      u = {k: jnp.zeros_like(v) for k, v in flat.items()}
      kernel = jnp.zeros_like(flat[path + ('kernel',)])
      u[path + ('kernel',)] = kernel.at[start:stop].set(
          jax.random.normal(key, kernel[start:stop].shape, jnp.float64))
      u[path + ('bias',)] = jax.random.normal(key, flat[path + ('bias',)].shape, jnp.float64)
      u = {'params': traverse_util.unflatten_dict(u)}
      change = jax.jvp(lambda p: network.log_psi(p, x[0]), (params,), (u,))[1]
      exact = kfac.FISHER_SCALE * change**2
      np.testing.assert_allclose(kfac.model_length(u, *models['reduce'], layers), exact,
                                 rtol=1e-9, err_msg=str(path))
      expand = kfac.model_length(u, *models['expand'], layers)
      assert abs(expand - exact) > 0.1 * exact, path
      checked += 1
    assert checked >= 2


def test_the_split_factors_add_up_to_expands():
  """Each row's input is its configuration's mean plus its deviation, and the deviations
  of a configuration's rows sum to zero, so expand's A = (1/B) sum_{i,r} a a^T is split's
  deviation factor A1 plus R times reduce's A2 = (1/B) sum_i abar abar^T (every row of this
  Li FermiNet reaches log|psi|, R rows per walker); split's G1 and repeats are expand's.
  float64."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(8), (8, network.n_coords), jnp.float64)
    got = {}
    for rows in ('expand', 'split'):
      statistics, layers = kfac.make_statistics(network, params, network.n_coords,
                                                factoring=kfac.ROWS[rows])
      got[rows] = jax.jit(statistics)(params, x)[0]
    several = 0
    for path in layers:
      name = '/'.join(path)
      a, g, r = (np.asarray(f) for f in got['expand'][name])
      a1, g1, r1, a2, g2, k = (np.asarray(f) for f in got['split'][name])
      assert float(k) == 1.0 and float(r1) == float(r) and float(r) >= 1
      np.testing.assert_allclose(g1, g, rtol=0, atol=1e-12 * np.abs(g).max(), err_msg=name)
      np.testing.assert_allclose(a1 + r * a2, a, rtol=0, atol=1e-10 * np.abs(a).max(),
                                 err_msg=name)
      if r > 1:  # The rows' inputs differ; a layer of one row per walker has none.
        assert np.abs(a1).max() > 1e-6 * np.abs(a).max(), name
        several += 1
    assert several >= 2


@pytest.mark.jax_range
def test_the_split_direction_solves_its_sum_of_two_kronecker_blocks():
  """optim.kfac.rows = 'split': each dense layer's direction is (A1_d kron G1_d / R1 + A2
  kron G2 / K)^-1 g, expand's factors of the rows' deviations damped (kfac.damped_factors)
  plus reduce's, solved densely in numpy, for the first update of a Li FermiNet from 8
  walkers; the model length u^T F~ u is the sum of both terms. float64."""
  from ferminet_fast import config
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(7), (8, network.n_coords), jnp.float64)
    statistics, layers = kfac.make_statistics(network, params, network.n_coords,
                                              factoring=kfac.SPLIT)
    factors, diagonal = jax.jit(statistics)(params, x)
    grads = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(p.size), p.shape),
                         params)
    cfg = config.default().optim
    cfg.kfac.rows, cfg.kfac.damping = 'split', 1e-2
    transform = optim.kfac(cfg, network)
    samples = optim.Samples(x, jax.random.PRNGKey(2), jnp.zeros((8,)), None)
    direction, _ = jax.jit(transform.update)(grads, transform.init(params), params,
                                             samples=samples, count=jnp.zeros((), jnp.int32))
    flat_g = traverse_util.flatten_dict(grads['params'])
    flat_u = traverse_util.flatten_dict(direction['params'])
    stack = lambda flat, path, n: np.concatenate(
        [np.asarray(flat[path + ('kernel',)]).reshape(-1, n)]
        + ([np.asarray(flat[path + ('bias',)]).reshape(1, n)] if path + ('bias',) in flat
           else []))
    model = 0.0
    for path in layers:
      a1, g1, r1, a2, g2, k = (np.asarray(f) for f in factors['/'.join(path)])
      a1d, g1d = (np.asarray(m) for m in kfac.damped_factors(a1, g1, 1e-2 * r1))
      block = np.kron(a1d, g1d) / r1 + np.kron(a2, g2) / k
      n = g1.shape[0]
      want = np.linalg.solve(block, stack(flat_g, path, n).ravel())
      np.testing.assert_allclose(stack(flat_u, path, n).ravel(), want, rtol=1e-7,
                                 atol=1e-9 * np.abs(want).max(), err_msg=str(path))
      v = stack(flat_u, path, n).ravel()
      model += v @ (np.kron(a1, g1) / r1 + np.kron(a2, g2) / k) @ v
    only_layers = {'params': traverse_util.unflatten_dict(
        {k: v if k[:-1] in layers else jnp.zeros_like(v) for k, v in flat_u.items()})}
    np.testing.assert_allclose(kfac.model_length(only_layers, factors, diagonal, layers), model,
                               rtol=1e-9)
