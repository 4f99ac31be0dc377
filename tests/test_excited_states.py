"""Several states (physics/excited_states.py): the energy matrix is exact for exact states
and, for one state, the finite-difference local energy; hydrogen's 1s -> 2p_z oscillator
strength from sampled matrices against its closed form; training and evaluation through the
entry points with each network and optimizer; bad input."""

import json
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config, evaluate, plan, train
from ferminet_fast.physics import excited_states, hamiltonian, laplacians, systems
from ferminet_fast.vmc import mcmc
from ferminet_fast.wavefunction import states

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# |<1s|z|2p_0>|^2 = 2^15 / 3^10 bohr^2 for normalised hydrogen states, so the 1s -> 2p_0
# oscillator strength is 2/3 (3/8 Ha) 2^15 / 3^10 = 0.13873 (a third of Lyman alpha's 0.4162).
HYDROGEN_DIPOLE_SQ = 2**15 / 3**10
HYDROGEN_F = 2.0 / 3.0 * 0.375 * HYDROGEN_DIPOLE_SQ
# Hydrogen's 1s and 2p_z (unnormalised): energies -1/2 and -1/8 Ha.
HYDROGEN_ENERGIES = np.array([-0.5, -0.125])
MIXING = np.array([[1.0, 0.7], [-0.4, 1.3]])


def hydrogen_states(mixing=MIXING):
  """apply_states of psi_i = sum_k C_ik phi_k over hydrogen's 1s and 2p_z."""
  c = jnp.asarray(mixing)

  def apply_states(params, x):
    del params
    r = jnp.linalg.norm(x)
    phi = jnp.stack([jnp.exp(-r), x[2] * jnp.exp(-0.5 * r)])
    psi = c @ phi
    return jnp.sign(psi), jnp.log(jnp.abs(psi))

  return apply_states


def system_of(atom, states_):
  cfg = config.default().system
  cfg.atom, cfg.states = atom, states_
  return systems.make_system(cfg)


@pytest.fixture
def float64():
  with jax.enable_x64(True):
    yield


@pytest.mark.parametrize('name', ['jacfwd', 'jvp_loop', 'folx'])
def test_energy_matrix_is_exact_for_hydrogen_states(name, float64):
  """psi_i mixtures of two eigenstates: E_L = C diag(E) C^-1 at every pair of configurations
  (zero variance), whatever the mixing."""
  laplacian = laplacians.METHODS[name]
  if not laplacian.installed():
    pytest.skip(f'{name} not installed')
  matrix = jax.jit(jax.vmap(excited_states.make_energy_matrix(
      hydrogen_states(), hamiltonian.of(system_of('H', 2), laplacian), 2), in_axes=(None, 0)))
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 6), jnp.float64) * 1.5
  expected = MIXING @ np.diag(HYDROGEN_ENERGIES) @ np.linalg.inv(MIXING)
  np.testing.assert_allclose(matrix(None, x), np.broadcast_to(expected, (8, 2, 2)),
                             atol=1e-9)


def finite_difference_local_energy(log_psi, x, positions, charges, h=1e-4):
  """E_L = -1/2 (lap log|psi| + |grad log|psi||^2) + V at each row of x (B, 3N), from
  central differences of log|psi| (B,) -> (B,) and the Coulomb sums in numpy. In float64
  with h = 1e-4 the error is ~2e-6 Ha, truncation and rounding together."""
  x = np.asarray(x, np.float64)
  b, n = x.shape
  steps = np.concatenate([np.eye(n), -np.eye(n)]) * h  # (2 3N, 3N)
  shifted = (x[:, None, :] + steps[None]).reshape(-1, n)
  f0 = np.asarray(log_psi(x))
  f = np.asarray(log_psi(shifted)).reshape(b, 2, n)
  grad = (f[:, 0] - f[:, 1]) / (2 * h)
  lap = np.sum(f[:, 0] + f[:, 1] - 2 * f0[:, None], axis=1) / h**2
  r = x.reshape(b, -1, 3)
  r_en = np.linalg.norm(r[:, :, None] - positions[None, None], axis=-1)
  i, j = np.triu_indices(r.shape[1], k=1)
  v = -np.sum(charges / r_en, axis=(1, 2)) + np.sum(
      1 / np.linalg.norm(r[:, i] - r[:, j], axis=-1), axis=1)
  return -0.5 * (lap + np.sum(grad**2, axis=1)) + v


def test_one_state_path_gives_the_finite_difference_local_energy(float64):
  """K = 1 through the states' code: the total wavefunction det[psi(x)] (states.py) and its
  1 x 1 energy matrix (excited_states.py) give log|psi| and the local energy that central
  differences of the ordinary network's log|psi| give, with the potential summed in numpy.
  Configurations of both signs of psi, so that a sign lost in A or A^-1 shows."""
  cfg = tiny_config('Li', **{'network.ferminet.hidden_dims': ((8, 4),)})
  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system, jnp.float64)
  params = network.init(jax.random.PRNGKey(0))
  one = lambda p, x: tuple(v[None] for v in network.apply(p, x))  # noqa: E731
  total = states.total_network(network, one, 1)
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 9), jnp.float64) * 1.5
  signs = jax.vmap(network.apply, in_axes=(None, 0))(params, x)[0]
  assert set(np.asarray(signs).tolist()) == {-1.0, 1.0}

  base_log_psi = jax.jit(jax.vmap(network.log_psi, in_axes=(None, 0)))
  expected = finite_difference_local_energy(lambda y: base_log_psi(params, y), x,
                                            system.positions, system.charges)
  np.testing.assert_allclose(jax.vmap(total.log_psi, in_axes=(None, 0))(params, x),
                             base_log_psi(params, x), rtol=1e-12)
  for laplacian in [laplacians.JACFWD, laplacians.JVP_LOOP]:
    ham = hamiltonian.of(system, laplacian)
    matrix = jax.jit(jax.vmap(excited_states.make_energy_matrix(one, ham, 1),
                              in_axes=(None, 0)))(params, x)
    e_total = jax.jit(jax.vmap(ham.local_energy(total.log_psi), in_axes=(None, 0)))(params, x)
    np.testing.assert_allclose(matrix[:, 0, 0], expected, rtol=0, atol=2e-5)
    np.testing.assert_allclose(e_total, expected, rtol=0, atol=2e-5)


def test_hydrogen_oscillator_strength_from_sampled_matrices():
  """Mixed, unnormalised 1s and 2p_z, two configurations per walker sampled from |det|^2 by
  our MCMC: exact energies (zero variance), <S^2> = 3/4, and |d_01|^2 and f_01 within their
  jackknife errors of the closed forms."""
  system = system_of('H', 2)
  with jax.enable_x64(True):
    apply_states = hydrogen_states()
    log_psi = lambda p, x: states.total_value(  # noqa: E731
        *excited_states.state_values(apply_states, p, x, 2))[1]
    batch_log_psi = jax.vmap(log_psi, in_axes=(None, 0))
    sweep = jax.jit(mcmc.make_sweep(batch_log_psi, 10))
    local = excited_states.make_local_matrices(
        types.SimpleNamespace(apply_states=apply_states), system,
        hamiltonian.of(system, laplacians.JACFWD))
    sweep_estimate = jax.jit(lambda x: excited_states.reduce(
        jax.vmap(local, in_axes=(None, 0))(None, x)))
    x = 2.0 * jax.random.normal(jax.random.PRNGKey(0), (2048, 6), jnp.float64)
    walkers = mcmc.Walkers(x, batch_log_psi(None, x), jnp.asarray(1.0))
    key = jax.random.PRNGKey(1)
    series = []
    for i in range(260):
      key, k = jax.random.split(key)
      walkers, _ = sweep(None, walkers, k)
      if i >= 60:
        series.append(np.asarray(sweep_estimate(walkers.x)))
  values, errors = excited_states.jackknife(np.stack(series), 2)
  np.testing.assert_allclose(values['energy'], HYDROGEN_ENERGIES, atol=1e-9)
  np.testing.assert_allclose(values['s2'], [0.75, 0.75], atol=1e-9)
  d2, d2_err = values['transition_dipole_sq'][0], errors['transition_dipole_sq'][0]
  f, f_err = values['oscillator_strength'][0], errors['oscillator_strength'][0]
  assert 0 < d2_err < 0.03 and abs(d2 - HYDROGEN_DIPOLE_SQ) < 4 * d2_err, (d2, d2_err)
  assert 0 < f_err < 0.008 and abs(f - HYDROGEN_F) < 4 * f_err, (f, f_err)


def test_analysis_of_known_matrices():
  """Matrices built from known eigenstates: energies, spins and dipoles come back."""
  c = np.array([[1.0, 0.4, 0.0], [0.2, 1.0, -0.3], [0.5, 0.1, 1.0]])
  c_inv = np.linalg.inv(c)
  energies, spins = np.array([-2.9, -2.1, -2.2]), np.array([0.0, 2.0, 0.0])
  d = np.zeros((3, 3, 3))
  d[2, 0, 2] = d[2, 2, 0] = 0.8  # Only state 0 <-> the state at -2.2 Ha, along z.
  mean = np.concatenate([(c @ np.diag(energies) @ c_inv).ravel(),
                         (c @ np.diag(spins) @ c_inv).ravel(),
                         np.einsum('ij,ajk,kl->ail', c, d, c_inv).ravel()])
  out = excited_states.analyse(mean, 3)
  np.testing.assert_allclose(out['energy'], [-2.9, -2.2, -2.1])
  np.testing.assert_allclose(out['s2'], [0.0, 0.0, 2.0], atol=1e-12)
  np.testing.assert_allclose(out['transition_dipole_sq'], [0.64, 0.0], atol=1e-12)
  np.testing.assert_allclose(out['oscillator_strength'], [2 / 3 * 0.7 * 0.64, 0.0],
                             atol=1e-12)
  np.testing.assert_allclose(out['oscillator_strength_sum'], [2 / 3 * 0.7 * 0.64])


def test_multiplet_sum_when_noise_makes_a_complex_pair():
  """Li-like: a ground state and a threefold P multiplet, each component dipole-coupled to
  the ground state along one axis. Noise in the estimate makes the multiplet's block
  non-symmetric, and two of its eigenvalues a complex-conjugate pair; the oscillator
  strength summed over the multiplet must still be the exact one."""
  rng = np.random.default_rng(0)
  c = np.eye(4) + 0.3 * rng.standard_normal((4, 4))
  c_inv = np.linalg.inv(c)
  energies = np.array([-7.478, -7.410, -7.410, -7.410])
  block = np.diag(energies)
  block[2, 3], block[3, 2] = 1e-4, -1e-4  # Eigenvalues -7.410 +- 1e-4 i.
  d = np.zeros((3, 4, 4))
  for axis in range(3):
    d[axis, 0, axis + 1] = d[axis, axis + 1, 0] = 2.0
  mean = np.concatenate([(c @ block @ c_inv).ravel(), (c @ np.diag([0.75] * 4) @ c_inv).ravel(),
                         np.einsum('ij,ajk,kl->ail', c, d, c_inv).ravel()])
  assert np.abs(np.linalg.eigvals(c @ block @ c_inv).imag).max() > 5e-5  # A complex pair.
  out = excited_states.analyse(mean, 4)
  np.testing.assert_allclose(out['energy'], energies, atol=1e-9)
  np.testing.assert_allclose(out['s2'], 0.75, atol=1e-9)
  np.testing.assert_allclose(out['oscillator_strength_sum'], [2 / 3 * 0.068 * 3 * 4.0],
                             rtol=1e-9)


def states_config(path, **overrides):
  return tiny_config('He', **{'system.states': 2, 'batch_size': 32, 'optim.iterations': 4,
                              'mcmc.burn_in': 4, 'network.ferminet.hidden_dims': ((8, 4),),
                              'network.psiformer.layers': 1, 'network.psiformer.heads': 2,
                              'network.psiformer.head_dim': 4, 'evaluation.steps': 6,
                              'evaluation.burn_in': 2, 'log.save_path': str(path),
                              **overrides})


@pytest.mark.parametrize('network,optimizer', [
    ('ferminet', 'adam'), ('ferminet', 'spring'), ('psiformer', 'kfac'), ('psiformer', 'adam')])
def test_states_train_with_each_network_and_optimizer(tmp_path, network, optimizer):
  result = train.train(states_config(tmp_path / 'run', **{
      'network.network_type': network, 'optim.optimizer': optimizer}), quiet=True)
  assert result.state.walkers.x.shape == (32, 2 * 6)
  assert np.all(np.isfinite(result.history['energy'])) and result.exact_energy is None


@pytest.mark.slow
def test_states_train_resume_and_evaluate(tmp_path):
  cfg = states_config(tmp_path / 'run', **{'optim.optimizer': 'kfac',
                                           'precision': 'float64'})
  result = train.train(cfg, quiet=True)
  assert np.all(np.isfinite(result.history['energy']))
  cfg.optim.iterations = 6  # Resumed from the checkpoint.
  assert len(train.train(cfg, quiet=True).history['energy']) == 6
  estimate = evaluate.evaluate(str(tmp_path / 'run'), quiet=True)
  report = json.loads((tmp_path / 'run' / 'eval.json').read_text())['states']
  # The total energy reported is the trace of the mean energy matrix: the states' sum.
  assert estimate.mean == pytest.approx(sum(report['energy']['value']), rel=1e-9)
  assert len(report['energy']['value']) == 2 and len(report['oscillator_strength']['value']) == 1
  assert report['exact_ground_energy'] == pytest.approx(-2.903724)
  assert all(np.isfinite(v['value']).all() for v in report.values() if isinstance(v, dict))
  energies = report['energy']['value']
  assert energies[0] <= energies[1]


@pytest.mark.parametrize('overrides,message', [
    ({'system.states': 0}, 'system.states must lie in [1, 16]'),
    ({'pretrain.iterations': 5}, 'pretrain.iterations is not available with several states'),
    ({'optim.spin_penalty': 0.5}, 'spin_penalty is not available with several states'),
    ({'optim.node_cutoff': 0.01}, 'node_cutoff is not available with several states'),
])
def test_bad_states_settings(tmp_path, overrides, message):
  with pytest.raises(InputError, match=message.replace('[', r'\[').replace(']', r'\]')):
    train.train(states_config(tmp_path / 'run', **overrides), quiet=True)
  assert not (tmp_path / 'run').exists()


def test_cli_refuses_resume_with_other_states_and_observables(tmp_path):
  run = tmp_path / 'run'
  train.train(states_config(run), quiet=True)
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.train', '--config',
                         'configs/he.py', '--config.system.states=3',
                         f'--config.log.save_path={run}'], cwd=REPO, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 2 and 'system.states: 2 -> 3' in proc.stderr, proc.stderr
  assert 'Traceback' not in proc.stderr
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.evaluate', f'--run={run}',
                         '--observables=s2,forces,density'], cwd=REPO, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 2, proc.stderr
  assert ('--observables forces,density: with 2 states evaluation estimates s2 and dipole'
          in proc.stderr), proc.stderr
  assert 'Traceback' not in proc.stderr
