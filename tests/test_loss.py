"""The custom VMC gradient against an independent per-walker computation; clipping."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_network
from ferminet_fast.physics import hamiltonian, laplacians
from ferminet_fast.vmc import loss

CLIP = loss.CLIPPING['median_absdev']


@pytest.mark.parametrize('clip_k', [0.0, 1.0])
@pytest.mark.jax_range
def test_gradient_is_covariance_of_energy_and_log_psi_gradient(clip_k):
  with jax.enable_x64(True):
    _check_gradient(clip_k)


def _check_gradient(clip_k):
  system, network, params = tiny_network('He', jnp.float64)
  x = jax.random.normal(jax.random.PRNGKey(1), (32, 6), jnp.float64)
  local_energy = hamiltonian.of(system, laplacians.JVP_LOOP).local_energy(network.log_psi)
  energy = loss.make_energy(network.log_psi, local_energy, CLIP, clip_k)
  (e, aux), grad = jax.jit(jax.value_and_grad(energy, has_aux=True))(params, x)

  e_l = jax.jit(jax.vmap(local_energy, (None, 0)))(params, x)
  np.testing.assert_allclose(e, jnp.mean(e_l), rtol=1e-10)
  np.testing.assert_allclose(aux.variance, jnp.var(e_l), rtol=1e-10)
  weights = loss.clip_median_absdev(e_l, clip_k) if clip_k else e_l
  moved = np.sum(np.asarray(weights) != np.asarray(e_l))
  assert float(aux.clipped) == moved  # Walkers the window moved, counted independently.
  if clip_k:
    assert moved > 0  # Clipping was active.
  per_walker = jax.jit(jax.vmap(jax.grad(network.log_psi), (None, 0)))(params, x)
  centred = weights - jnp.mean(weights)
  expected = jax.tree.map(
      lambda g: 2 * jnp.tensordot(centred, g, axes=1) / x.shape[0], per_walker)
  for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)


def test_complex_gradient_is_the_derivative_of_the_sampled_energy():
  """A complex wavefunction (the electron gas at a twist), walkers from |psi|^2: the
  gradient along a random direction v of the parameters is, walker by walker, 2 (Re E_L -
  E) dlog|psi| + 2 (Im E_L - <Im E_L>) dtheta (the loss), whose mean is exactly what
  jax.grad of the energy gives; and the correlated-sampling derivative of the sampled
  energy, d Re E_L + 2 (Re E_L - E) dlog|psi| (the local energy differentiated, an
  independent route), has the same mean within 4 standard errors, while the phase term on
  its own is resolved from zero (so a wrong sign or a missing term would fail)."""
  from conftest import tiny_config
  from ferminet_fast import config
  from ferminet_fast.physics import systems
  from ferminet_fast.vmc import mcmc
  from ferminet_fast import plan
  cfg = tiny_config('', **{'system.rs': 1.0, 'system.electrons': (1, 1),
                           'system.twist': (0.1, 0.27, -0.31), 'network.envelope': 'auto',
                           'network.ferminet.hidden_dims': ((8, 4),)})
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  with jax.enable_x64(True):
    network = plan.network_of(cfg.network, system, jnp.float64)
    params = network.init(jax.random.PRNGKey(0))
    local_energy = hamiltonian.of(system, laplacians.JACFWD, jnp.float64).local_energy(
        network.log_psi, log_psi_phase=network.log_psi_phase)
    energy = loss.make_energy(network.log_psi, local_energy, CLIP, 0.0,
                              log_psi_phase=network.log_psi_phase)
    v = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(p.size), p.shape,
                                                 p.dtype), params)
    batch = jax.vmap(network.log_psi, in_axes=(None, 0))
    sweep = jax.jit(mcmc.make_sweep(batch, 10, system.boundary.wrap))
    x = mcmc.init_positions(jax.random.PRNGKey(1), system, 512, 1.0, jnp.float64)
    walkers = mcmc.Walkers(x, batch(params, x), jnp.asarray(0.3))

    def per_walker(x):
      e_l, de_l = jax.jvp(lambda p: local_energy(p, x), (params,), (v,))
      _, d = jax.jvp(lambda p: network.log_psi_phase(p, x), (params,), (v,))
      return e_l, de_l.real, d

    per_walker = jax.jit(jax.vmap(per_walker))
    directional = jax.jit(lambda x: sum(
        jnp.vdot(g, t) for g, t in zip(jax.tree.leaves(jax.grad(lambda p: energy(p, x)[0])(
            params)), jax.tree.leaves(v))))
    for i in range(5):  # Burn-in.
      walkers, _ = sweep(params, walkers, jax.random.PRNGKey(100 + i))
    differences, phase_terms = [], []
    for i in range(6):
      walkers, _ = sweep(params, walkers, jax.random.PRNGKey(10 + i))
      e_l, de_real, d = per_walker(walkers.x)
      real, imag = e_l.real, e_l.imag
      ours = 2 * (real - real.mean()) * d[:, 0] + 2 * (imag - imag.mean()) * d[:, 1]
      np.testing.assert_allclose(directional(walkers.x), ours.mean(), rtol=1e-8)
      correlated = de_real + 2 * (real - real.mean()) * d[:, 0]
      differences.append(np.asarray(correlated - ours))
      phase_terms.append(np.asarray(2 * imag * d[:, 1]))
    differences, phase_terms = np.concatenate(differences), np.concatenate(phase_terms)
    sem = lambda a: a.std() / np.sqrt(a.size)  # noqa: E731
    assert abs(differences.mean()) < 4 * sem(differences), (differences.mean(),
                                                             sem(differences))
    assert abs(phase_terms.mean()) > 5 * sem(phase_terms), (phase_terms.mean(),
                                                           sem(phase_terms))


def test_a_penalty_enters_the_gradient_but_not_the_energy():
  """With a penalty P_L (here <S^2>'s local estimator, weighted), the gradient is that of
  <E_L + P_L> and the reported energy and variance are still those of E_L."""
  from ferminet_fast.physics import observables
  with jax.enable_x64(True):
    system, network, params = tiny_network('He', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(2), (24, 6), jnp.float64)
    local_energy = hamiltonian.of(system, laplacians.JVP_LOOP).local_energy(network.log_psi)
    s2 = observables.spin_squared(network.apply, system)
    penalty = lambda p, xi: 0.7 * s2(p, xi)[0]  # noqa: E731
    energy = loss.make_energy(network.log_psi, local_energy, CLIP, 0.0,
                              penalty=penalty)
    (e, aux), grad = jax.jit(jax.value_and_grad(energy, has_aux=True))(params, x)
    e_l = jax.jit(jax.vmap(local_energy, (None, 0)))(params, x)
    p_l = jax.jit(jax.vmap(penalty, (None, 0)))(params, x)
    assert float(jnp.std(p_l)) > 1e-3  # An untrained (1, 1) network: S^2 varies by walker.
    np.testing.assert_allclose(e, jnp.mean(e_l), rtol=1e-10)
    np.testing.assert_allclose(aux.variance, jnp.var(e_l), rtol=1e-10)
    per_walker = jax.jit(jax.vmap(jax.grad(network.log_psi), (None, 0)))(params, x)
    g = e_l + p_l
    expected = jax.tree.map(
        lambda d: 2 * jnp.tensordot(g - jnp.mean(g), d, axes=1) / x.shape[0], per_walker)
    for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(expected)):
      np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize('method', sorted(loss.CLIPPING))
@pytest.mark.jax_range
def test_clipping_keeps_the_bulk_and_bounds_outliers(method):
  e = jnp.concatenate([jnp.linspace(-1.0, 1.0, 99), jnp.array([1000.0])])
  clipped = loss.CLIPPING[method](e, 5.0)
  assert float(clipped.max()) < 1000.0
  bulk = np.abs(np.asarray(e)) < 0.5
  np.testing.assert_array_equal(np.asarray(clipped)[bulk], np.asarray(e)[bulk])


def test_non_finite_local_energies_are_left_out():
  """A NaN or inf local energy changes neither the energy nor the gradient of the rest."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('He', jnp.float64)
    x = jax.random.normal(jax.random.PRNGKey(1), (16, 6), jnp.float64)
    good = hamiltonian.of(system, laplacians.JACFWD).local_energy(network.log_psi)
    bad_walkers = jnp.zeros(16, bool).at[jnp.array([3, 7])].set(True)

    def poisoned(p, xi):  # NaN for walker 3, inf for walker 7 (recognised by position).
      is_bad = jnp.any(jnp.all(xi == x[bad_walkers], axis=-1))
      value = jnp.where(jnp.all(xi == x[3]), jnp.nan, jnp.inf)
      return jnp.where(is_bad, value, good(p, xi))

    value_and_grad = lambda f, xs: jax.jit(jax.value_and_grad(
        loss.make_energy(network.log_psi, f, CLIP, 5.0), has_aux=True))(params, xs)
    (e_bad, aux), g_bad = value_and_grad(poisoned, x)
    (e_ref, _), g_ref = value_and_grad(good, x[~bad_walkers])
    assert int(aux.nonfinite) == 2
    np.testing.assert_allclose(e_bad, e_ref, rtol=1e-12)
    for a, b in zip(jax.tree.leaves(g_bad), jax.tree.leaves(g_ref)):
      assert np.all(np.isfinite(a))
      np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.jax_range
def test_largest_intermediate_counts_only_what_depends_on_the_walker():
  """A (5,) parameter vector broadcast against x (3,) makes a (3, 5) array; the (7, 7)
  array made from the parameters alone is not counted."""
  def f(p, x):
    junk = jnp.outer(p['b'], p['b'])  # (7, 7), independent of x.
    return jnp.sum(jnp.tanh(x[:, None] * p['w'])) + jnp.sum(junk)

  p = {'w': jnp.ones(5), 'b': jnp.ones(7)}
  assert loss.largest_intermediate(f, p, jax.ShapeDtypeStruct((3,), jnp.float32)) == 15


class _Device:
  def __init__(self, platform):
    self.platform = platform


@pytest.mark.jax_range
def test_auto_chunks_keep_a_chunks_tangents_near_the_cache_budget():
  """On CPU a chunk's largest tangent array (3N x largest intermediate x bytes per walker)
  is about CPU_CHUNK_BYTES, rounded to a power of two, per device; on GPU, no chunks."""
  _, network, params = tiny_network('Li')
  x = jax.ShapeDtypeStruct((network.n_coords,), jnp.float32)
  per_walker = network.n_coords * loss.largest_intermediate(network.log_psi, params, x) * 4
  cpu = loss.auto_chunk_size(network.log_psi, params, network.n_coords, jnp.float32,
                             [_Device('cpu')])
  assert cpu & (cpu - 1) == 0  # A power of two,
  assert loss.CPU_CHUNK_BYTES / 1.5 <= cpu * per_walker <= loss.CPU_CHUNK_BYTES * 1.5
  with jax.enable_x64(True):
    doubled = loss.auto_chunk_size(network.log_psi, params, network.n_coords, jnp.float64,
                                   [_Device('cpu')])
  assert doubled == cpu // 2  # Twice the bytes per walker in float64.
  assert loss.auto_chunk_size(network.log_psi, params, network.n_coords, jnp.float32,
                              [_Device('cpu')] * 4) == 4 * cpu  # Summed over devices.
  for platform in ('gpu', 'tpu'):
    assert loss.auto_chunk_size(network.log_psi, params, network.n_coords, jnp.float32,
                                [_Device(platform)]) == 0
  from ferminet_fast import plan
  cfg = types.SimpleNamespace(optim=types.SimpleNamespace(energy_chunk_size=12))
  assert plan.chunk_size_of(cfg, network) == 12
  cfg.optim.energy_chunk_size = 'auto'
  assert plan.chunk_size_of(cfg, network) == (cpu if jax.devices()[0].platform == 'cpu'
                                               else 0) * len(jax.devices())



def _near_node(network, params, x_other, deltas):
  """Configurations of a network at about each of `deltas` (bohr, in the 3N metric) from one
  point of a node: the sign change along the line between two configurations of opposite
  sign, bisected, then stepped along grad log|psi|."""
  sign = jax.jit(lambda x: network.apply(params, x)[0])
  b = x_other[0]
  a = next(xi for xi in x_other if sign(xi) != sign(b))
  lo, hi = 0.0, 1.0
  for _ in range(60):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if sign(a + mid * (b - a)) == sign(a) else (lo, mid)
  x0 = a + lo * (b - a)
  g = jax.grad(network.log_psi, argnums=1)(params, x0)
  return [x0 + delta * g / jnp.linalg.norm(g) for delta in deltas]


def test_a_walker_at_a_node_bounded_by_the_median_window_and_the_node_factor():
  """One walker at distance s of a node of an inexact psi (Li), beside 31 others: its
  local energy and its score d log|psi| / d params both grow as 1/s. A window whose scale is
  a mean deviation (the default, median_absdev) widens with the outlier itself (to about k
  |E_L| / B), so its weight still grows as 1/s and its term of the gradient as 1/s^2; the
  median window (median_mad) bounds the weight, leaving the term growing as 1/s. The node
  factor at a cutoff of 0.05 bohr bounds the walker's own term under either window; with
  the median window the gradient then stays within twice the other walkers' alone, while
  under the default one the others' weights, centred at a mean the outlier moves by about k
  |E_L| / B^2, still grow as 1/s. Walkers all farther than the cutoff give the same gradient
  to the last digits."""
  with jax.enable_x64(True):
    system, network, params = tiny_network('Li', jnp.float64)
    x = 1.5 * jax.random.normal(jax.random.PRNGKey(3), (31, 9), jnp.float64)
    ham = hamiltonian.of(system, laplacians.JACFWD)
    norm = lambda tree: np.sqrt(sum(float(jnp.sum(g**2)) for g in jax.tree.leaves(tree)))  # noqa

    def gradient(method, cutoff):
      local_energy = loss.make_local_energy(network, ham, with_gradient=bool(cutoff))
      energy = loss.make_energy(network.log_psi, local_energy, loss.CLIPPING[method], 5.0,
                                node_cutoff=cutoff)
      return jax.jit(jax.grad(lambda p, xs: energy(p, xs)[0]))

    deltas = (1e-3, 1e-6)
    near = _near_node(network, params, x, deltas)
    for xn, delta in zip(near, deltas):
      s = 1 / jnp.linalg.norm(jax.grad(network.log_psi, argnums=1)(params, xn))
      assert 0.5 * delta < float(s) < 2 * delta  # The walker is that close to the node.
    batches = [jnp.concatenate([x, xn[None]]) for xn in near]
    rest = norm(gradient('median_mad', 0.0)(params, x))
    growth = {}
    for method in ('median_absdev', 'median_mad'):
      for cutoff in (0.0, 0.05):
        f = gradient(method, cutoff)
        far, close = (norm(f(params, b)) for b in batches)
        growth[method, cutoff] = close / far
        if method == 'median_mad' and cutoff:
          assert close < 2 * rest, (close, rest)
    print(growth)
    assert growth['median_absdev', 0.0] > 1e5  # 1/s^2 over a factor 1000 in s.
    assert 1e2 < growth['median_mad', 0.0] < 1e4  # 1/s.
    assert growth['median_absdev', 0.05] < 1e3 and growth['median_mad', 0.05] < 2, growth
    s_all = 1 / jnp.linalg.norm(jax.vmap(jax.grad(network.log_psi, argnums=1), (None, 0))(
        params, x), axis=-1)
    cutoff = 0.5 * float(jnp.min(s_all))  # Below every walker's distance: f = 1 for all.
    for a, b in zip(jax.tree.leaves(gradient('median_absdev', 0.0)(params, x)),
                    jax.tree.leaves(gradient('median_absdev', cutoff)(params, x))):
      np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
