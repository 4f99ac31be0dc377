"""FermiNet, Psiformer and LapNet: antisymmetry, determinant helpers, parameter precision,
periodicity, LapNet's sparse attention."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config, tiny_network
from ferminet_fast import config, plan
from ferminet_fast.wavefunction import envelopes, networks


@pytest.mark.parametrize('n', [1, 2, 3, 4])
@pytest.mark.jax_range
def test_slogdet_matches_lapack(n):
  a = jax.random.normal(jax.random.PRNGKey(n), (5, n, n)) * 1e-12  # Tiny: tests the scaling.
  sign, logdet = networks.slogdet(a)
  ref_sign, ref_logdet = jnp.linalg.slogdet(a)
  np.testing.assert_array_equal(sign, ref_sign)
  np.testing.assert_allclose(logdet, ref_logdet, rtol=1e-5)


@pytest.mark.jax_range
def test_slogdet_derivatives_match_lapack():
  a = jax.random.normal(jax.random.PRNGKey(0), (3, 3), jnp.float32)
  g = jax.grad(lambda m: networks.slogdet(m)[1])(a)
  np.testing.assert_allclose(g, jnp.linalg.inv(a).T, rtol=1e-4, atol=1e-5)


@pytest.mark.jax_range
def test_signed_logsumexp():
  signs = jnp.array([1.0, -1.0, 1.0])
  logs = jnp.array([100.0, 99.0, 50.0])
  sign, log = networks.signed_logsumexp(signs, logs)
  expected = 100.0 + np.log(1 - np.exp(-1.0) + np.exp(-50.0))
  assert sign == 1.0
  np.testing.assert_allclose(log, expected, rtol=1e-6)


CASES = [
    ('Li', {}),
    ('Be', {'network.full_det': False}),
    ('N', {'network.envelope': 'full', 'network.jastrow': 'none'}),
    ('Be', {'network.network_type': 'psiformer', 'network.psiformer.layers': 1,
            'network.psiformer.heads': 2, 'network.psiformer.head_dim': 4}),
    ('Be', {'network.network_type': 'lapnet', 'network.lapnet.heads': 2,
            'network.lapnet.head_dim': 4, 'network.lapnet.layer_norm': True}),
]


@pytest.mark.parametrize('atom,overrides', CASES)
@pytest.mark.jax_range
def test_antisymmetric_under_same_spin_exchange(atom, overrides):
  system, network, params = tiny_network(atom, **overrides)
  n = system.n_electrons
  x = jax.random.normal(jax.random.PRNGKey(1), (n, 3))
  apply = jax.jit(network.apply)
  sign, log_abs = apply(params, x.reshape(-1))
  spins = [range(system.n_up), range(system.n_up, n)]
  pairs = [p for s in spins for p in itertools.combinations(s, 2)]
  assert pairs, 'system has no same-spin pair'
  for i, j in pairs:
    perm = np.arange(n)
    perm[[i, j]] = perm[[j, i]]
    sign_p, log_p = apply(params, x[perm].reshape(-1))
    assert sign_p == -sign, (i, j)
    np.testing.assert_allclose(log_p, log_abs, rtol=1e-5, atol=1e-5)


def test_opposite_spin_exchange_is_not_a_symmetry():
  """Up and down electrons are distinguishable: swapping one of each changes psi."""
  _, network, params = tiny_network('Li')
  x = jax.random.normal(jax.random.PRNGKey(1), (3, 3))
  _, log_abs = network.apply(params, x.reshape(-1))
  _, log_swapped = network.apply(params, x[np.array([2, 1, 0])].reshape(-1))
  assert abs(float(log_abs - log_swapped)) > 1e-4


@pytest.mark.jax_range
def test_psi_decays_far_from_the_nucleus():
  _, network, params = tiny_network('He')
  near = network.log_psi(params, jnp.array([0.5, 0, 0, 0, -0.5, 0]))
  far = network.log_psi(params, jnp.array([20.0, 0, 0, 0, -20.0, 0]))
  assert far < near - 10


@pytest.mark.jax_range
def test_float64_parameters():
  with jax.enable_x64(True):
    _, _, params = tiny_network('He', jnp.float64)
    assert all(p.dtype == jnp.float64 for p in jax.tree.leaves(params))


@pytest.mark.parametrize('pair,cusp', [((0, 1), 0.25), ((0, 2), 0.5)])
@pytest.mark.jax_range
def test_jastrow_gives_the_electron_electron_cusp(pair, cusp):
  """Kato's cusp: d log|psi| / d r_ij -> 1/2 for opposite spins and 1/4 for same spins as
  r_ij -> 0. The Jastrow factor supplies it: the slope of log|psi| with it minus log|psi|
  without it (same parameters otherwise), along r_ij at coalescence, in Li (up, up, down)."""
  with jax.enable_x64(True):
    system, with_j, params = tiny_network('Li', jnp.float64, seed=1)
    _, without_j, _ = tiny_network('Li', jnp.float64, **{'network.jastrow': 'none'})
    params_without = {'params': {k: v for k, v in params['params'].items()
                                 if not k.startswith('jastrow')}}
    x0 = jax.random.normal(jax.random.PRNGKey(2), (system.n_electrons, 3), jnp.float64)
    u = jnp.array([0.6, -0.48, 0.64])  # Unit vector.
    i, j = pair

    def jastrow(r):
      x = x0.at[j].set(x0[i] + r).reshape(-1)
      return with_j.log_psi(params, x) - without_j.log_psi(params_without, x)

    # Averaged over +-u (Kato's cusp is of the spherical average): the smooth dependence on
    # the other electrons' distances cancels to first order.
    h = 1e-6
    slope = sum(jastrow(2 * h * v) - jastrow(h * v) for v in (u, -u)) / (2 * h)
  assert float(slope) == pytest.approx(cusp, rel=1e-4)


@pytest.mark.parametrize('network_type,envelope', [
    (n, e) for n in ('ferminet', 'psiformer') for e in ('auto', 'planewave')] + [
    ('lapnet', 'auto')])
def test_periodic_network_is_lattice_periodic(network_type, envelope):
  """In a (skewed) crystal cell, moving one electron by a lattice vector leaves log|psi| and
  its sign unchanged (to float32 rounding of the shifted coordinates), with the envelope that
  decays with the periodic distance to each nucleus ('auto' for a crystal) and with the
  plane-wave one."""
  from ferminet_fast.physics import systems as systems_lib
  cfg = tiny_config('', **{'system.molecule': 'H 0 0 0; H 1.5 1.4 1.6',
                           'system.lattice': ((3.2, 0.2, 0), (0.3, 3.0, 0.1), (0, 0.4, 3.4)),
                           'network.envelope': envelope, 'network.network_type': network_type})
  system = systems_lib.make_system(cfg.system)
  assert envelopes.resolve(envelope, True, True).name == (
      'isotropic' if envelope == 'auto' else envelope)
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = jax.random.uniform(jax.random.PRNGKey(1), (6,), minval=0.0, maxval=3.0)
  sign, log = network.apply(params, x)
  shifted = x.at[3:6].add(jnp.asarray(2 * system.lattice.vectors[0] - system.lattice.vectors[2],
                                      jnp.float32))
  s2, l2 = network.apply(params, shifted)
  assert s2 == sign and l2 == pytest.approx(float(log), abs=2e-4)
  assert np.isfinite(float(log))


TWISTED = {  # A system at a twist: the electron gas (plane waves of k = G + k_s) and a
    # crystal (the isotropic envelope in the periodic distance to each nucleus, times the
    # Bloch factor exp(i k_s . r) of each electron).
    'electron gas': {'system.rs': 1.5, 'system.electrons': (3, 2), 'system.cell': 'fcc'},
    'crystal': {'system.molecule': 'Li 0 0 0; H 1.9 0.1 0', 'system.units': 'bohr',
                'system.lattice': ((0, 2.0, 2.1), (2.0, 0, 2.0), (1.9, 2.0, 0))},
}


@pytest.mark.parametrize('system_name', list(TWISTED))
@pytest.mark.parametrize('network_type', ['ferminet', 'psiformer'])
@pytest.mark.jax_range
def test_twisted_network_obeys_the_twisted_boundary_conditions(network_type, system_name):
  """At twist k_s: moving one electron by a lattice vector L multiplies psi by
  exp(i k_s . L), so |psi| is unchanged and the phase moves by k_s . L (mod 2 pi), for each
  lattice vector and electron of either spin; for the electron gas and for a crystal."""
  from ferminet_fast.physics import systems as systems_lib
  twist = (0.1, 0.27, -0.31)
  cfg = tiny_config('', **{**TWISTED[system_name], 'system.twist': twist,
                           'network.envelope': 'auto', 'network.network_type': network_type})
  config.validate(cfg)
  system = systems_lib.make_system(cfg.system)
  n = system.n_electrons
  with jax.enable_x64(True):
    network = plan.network_of(cfg.network, system, jnp.float64)
    params = network.init(jax.random.PRNGKey(0))
    x = jax.random.uniform(jax.random.PRNGKey(1), (3 * n,), jnp.float64, 0.0, 3.0)
    phase, log = network.apply(params, x)
    assert jnp.iscomplexobj(phase) and abs(abs(complex(phase)) - 1) < 1e-12
    for electron, vector in itertools.product((0, n - 1), range(3)):
      shift = system.lattice.vectors[vector]
      moved_phase, moved_log = network.apply(params, x.at[3 * electron:3 * electron + 3].add(
          shift))
      expected = complex(phase) * np.exp(2j * np.pi * twist[vector])  # k_s . a_j = 2 pi t_j
      assert complex(moved_phase) == pytest.approx(expected, abs=1e-9)
      assert float(moved_log) == pytest.approx(float(log), abs=1e-9)
    np.testing.assert_allclose(network.log_psi_phase(params, x),
                               [float(log), np.angle(complex(phase))], rtol=1e-12)


def test_periodic_features_match_the_open_ones_at_short_range():
  """The periodic offsets and distances equal the plain ones to first and second order in
  the separation: at 1e-3 of the cell their relative differences are ~1e-6."""
  from ferminet_fast.physics import lattice
  from ferminet_fast.wavefunction import features
  cell = lattice.make_lattice([[4.0, 0.3, -0.2], [0.8, 3.6, 0.4], [-0.5, 0.7, 4.4]])
  with jax.enable_x64(True):
    r = jnp.array([[1.0, 1.0, 1.0], [1.003, 0.998, 1.001]], jnp.float64)
    atoms = jnp.array([[1.002, 1.001, 0.999]], jnp.float64)
    g = features.periodic(cell)(r, atoms)
    m = features.molecular(r, atoms)
    np.testing.assert_allclose(g.ae[..., :3], m.ae, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(g.r_ae, m.r_ae, rtol=1e-5)
    np.testing.assert_allclose(g.r_ee, m.r_ee, rtol=1e-5, atol=1e-12)
    far = features.periodic(cell)(r + jnp.asarray(cell.vectors[1]), atoms)
    np.testing.assert_allclose(far.r_ae, g.r_ae, rtol=1e-10)


@pytest.mark.parametrize('dtype,tolerance', [(jnp.float32, 2e-6), (jnp.float64, 1e-13)])
def test_periodic_features_are_their_definition_at_any_separation(dtype, tolerance):
  """Every offset is [sin(2 pi s), 1 - cos(2 pi s)] . vectors / (2 pi) of the fractional
  separation s, evaluated here directly in float64 for particles anywhere (several cells
  apart too), and the diagonal of the electron pairs is exactly zero."""
  from ferminet_fast.physics import lattice
  from ferminet_fast.wavefunction import features
  vectors = np.array([[4.0, 0.3, -0.2], [0.8, 3.6, 0.4], [-0.5, 0.7, 4.4]])
  cell = lattice.make_lattice(vectors)
  rng = np.random.default_rng(3)
  r, atoms = rng.uniform(-6, 10, (7, 3)), rng.uniform(0, 4, (2, 3))

  def definition(d):
    s = 2 * np.pi * d @ np.linalg.inv(vectors)
    return np.concatenate([np.sin(s) @ vectors, (1 - np.cos(s)) @ vectors], -1) / (2 * np.pi)

  with jax.enable_x64(dtype == jnp.float64):
    g = features.periodic(cell)(jnp.asarray(r, dtype), jnp.asarray(atoms, dtype))
    np.testing.assert_allclose(g.ae, definition(r[:, None] - atoms[None]), atol=tolerance)
    np.testing.assert_allclose(g.ee, definition(r[:, None] - r[None]), atol=tolerance)
    assert np.all(np.diagonal(np.asarray(g.ee), axis1=0, axis2=1) == 0)
    assert np.all(np.diagonal(np.asarray(g.r_ee)[..., 0]) == 0)


# A slab (periodic along a1 and a2, open along a3) and a chain (periodic along a1, open
# across it), each with a move by a lattice vector and one along an open direction.
PERIODIC_CELLS = {
    'slab': ({'system.molecule': 'H 0 0 0; H 1.4 0.3 0.2', 'system.units': 'bohr',
              'system.lattice': ((3.6, 0.0, 0.0), (0.4, 3.3, 0.0), (0.0, 0.0, 9.0)),
              'system.periodic_dims': 2}, (2, -1, 0), 2),
    'chain': ({'system.molecule': 'H 0 0 0; H 1.4 0.3 0.2', 'system.units': 'bohr',
               'system.lattice': ((3.6, 0.0, 0.0), (0.0, 9.0, 0.0), (0.0, 0.4, 9.0)),
               'system.periodic_dims': 1}, (-2, 0, 0), 1),
}


@pytest.mark.parametrize('cell', ['slab', 'chain'])
@pytest.mark.parametrize('network_type', ['ferminet', 'psiformer'])
def test_slab_and_chain_networks_are_periodic_only_along_their_periods(network_type, cell):
  """Moving an electron by a lattice vector (in a slab's plane, along a chain) leaves
  log|psi|, its sign and the Ewald energy unchanged; moving it along an open direction
  (a slab's a3, a chain's a2) does not: the electron is then far from the nuclei."""
  from ferminet_fast.physics import ewald, systems as systems_lib
  settings, period, open_axis = PERIODIC_CELLS[cell]
  cfg = tiny_config('', **{**settings, 'network.envelope': 'auto',
                           'network.network_type': network_type})
  config.validate(cfg)
  system = systems_lib.make_system(cfg.system)
  assert system.lattice.dims == settings['system.periodic_dims']
  network = plan.network_of(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = jax.random.uniform(jax.random.PRNGKey(1), (6,), minval=0.0, maxval=3.0)
  sign, log = network.apply(params, x)
  a = jnp.asarray(system.lattice.vectors, jnp.float32)
  shift = jnp.asarray(period, jnp.float32) @ a
  s2, l2 = network.apply(params, x.at[3:6].add(shift))
  assert s2 == sign and l2 == pytest.approx(float(log), abs=2e-4)
  _, l3 = network.apply(params, x.at[3:6].add(a[open_axis]))
  assert abs(float(l3) - float(log)) > 1.0
  coulomb = ewald.make_ewald(system.lattice, 2, 2, 'float32')
  atoms, charges = jnp.asarray(system.positions, jnp.float32), jnp.asarray(system.charges)
  energy = float(coulomb(x, atoms, charges))
  assert float(coulomb(x.at[3:6].add(shift), atoms, charges)) == pytest.approx(energy,
                                                                               abs=1e-4)
  assert abs(float(coulomb(x.at[3:6].add(a[open_axis]), atoms, charges)) - energy) > 0.1


@pytest.mark.parametrize('dims', [2, 1])
def test_slab_and_chain_features_are_periodic_only_along_their_periods(dims):
  """A slab's (dims = 2) or a chain's (dims = 1) offsets: [sin(2 pi s), 1 - cos(2 pi s)] .
  vectors / (2 pi) for the periodic fractional components, the plain separation along the
  open directions (a slab's z; a chain's y and z) with no cosine part."""
  from ferminet_fast.physics import lattice
  from ferminet_fast.wavefunction import features
  vectors = (np.array([[4.0, 0.3, 0.0], [0.8, 3.6, 0.0], [0.0, 0.0, 10.0]]) if dims == 2 else
             np.array([[4.0, 0.0, 0.0], [0.0, 9.0, 0.5], [0.0, -0.4, 10.0]]))
  cell = lattice.make_lattice(vectors, dims=dims)
  rng = np.random.default_rng(4)
  r, atoms = rng.uniform(-6, 10, (5, 3)), rng.uniform(0, 4, (2, 3))

  def definition(d):
    s = 2 * np.pi * d @ np.linalg.inv(vectors)
    sin, one_minus_cos = np.sin(s), 1 - np.cos(s)
    sin[..., dims:], one_minus_cos[..., dims:] = s[..., dims:], 0.0
    return np.concatenate([sin @ vectors, one_minus_cos @ vectors], -1) / (2 * np.pi)

  with jax.enable_x64(True):
    g = features.periodic(cell)(jnp.asarray(r), jnp.asarray(atoms))
    np.testing.assert_allclose(g.ae, definition(r[:, None] - atoms[None]), atol=1e-12)
    np.testing.assert_allclose(g.ee, definition(r[:, None] - r[None]), atol=1e-12)
    np.testing.assert_allclose(g.ae[..., 2], (r[:, None] - atoms[None])[..., 2], atol=1e-12)
    if dims == 1:
      np.testing.assert_allclose(g.ae[..., 1], (r[:, None] - atoms[None])[..., 1], atol=1e-12)




def _lapnet_scores(atom, **overrides):
  """(system, x -> the sparse derivative attention's numerators of every layer (layers,
  heads, n, n), a configuration x) of a small LapNet in float64 (call under
  jax.enable_x64): the scores are sown from the network through a method interceptor."""
  system, network, params = tiny_network(atom, jnp.float64, seed=2, **{
      'network.network_type': 'lapnet', 'network.lapnet.heads': 2,
      'network.lapnet.head_dim': 4, **overrides})

  def sow_scores(next_fun, args, kwargs, context):
    out = next_fun(*args, **kwargs)
    if context.method_name == 'scores':
      context.module.sow('intermediates', 'scores', out)
    return out

  def scores(x):
    _, state = network.instrumented(params, x, ['intermediates'], sow_scores)
    layers = sorted(state['intermediates'])
    return jnp.stack([state['intermediates'][k]['scores'][0] for k in layers])

  x = jax.random.normal(jax.random.PRNGKey(5), (3 * system.n_electrons,), jnp.float64)
  return system, scores, x


@pytest.mark.jax_range
def test_lapnet_attention_scores_depend_on_their_pair_of_electrons_only():
  """LapNet's attention numerators exp(q_i . k_j) of every layer, past the first too, depend
  on electrons i and j alone (queries and keys come from the per-electron stream): their
  Jacobian has non-zero columns only at those two electrons' coordinates, the sparsity a
  forward Laplacian keeps; the main stream they weight depends on every electron."""
  with jax.enable_x64(True):
    system, scores, x = _lapnet_scores('Be')
    n = system.n_electrons
    jac = jax.jit(jax.jacfwd(scores))(x).reshape(2, 2, n, n, n, 3)  # layer head i j l xyz
    assert np.all(np.isfinite(jac))
    moved = np.any(jac != 0, axis=(0, 1, 5))  # (i, j, l): whether r_l moves score ij.
    for i, j in itertools.product(range(n), repeat=2):
      np.testing.assert_array_equal(np.flatnonzero(moved[i, j]), sorted({i, j}),
                                    err_msg=f'pair {(i, j)}')
