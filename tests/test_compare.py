"""Comparison workloads: each JAX port gives its reference's numbers at quick sizes, and
the runner records an artifact and renders its table from it. (Speed is measured by scripts/compare.py, not here.)"""

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('torch')
pytest.importorskip('sklearn')

from comparisons.gaussgan import bench as gaussgan_bench, data as gaussgan_data  # noqa: E402
from comparisons.gaussgan import port as gaussgan_port, reference as gaussgan_reference  # noqa: E402
from comparisons.genesis_ops import bench as genesis_ops_bench, data as genesis_ops_data  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_genesis_ops_agree_with_float64_and_pytorch():
  results, peaks = genesis_ops_bench.run(quick=True)
  assert {r.op for r in results} == {'add', 'matmul', 'sum'}
  assert len([r for r in results if r.op == 'sum']) == 2 * len(genesis_ops_data.SUM_AXES)
  for r in results:
    assert r.max_error <= r.tolerance and r.torch_error <= r.tolerance, r
    assert r.jax_ms > 0 and r.torch_ms > 0 and r.numpy_ms > 0
  assert peaks['bandwidth_gbs'] > 0 and peaks['matmul_gflops'] > 0


@pytest.mark.parametrize('killer', [False, True])
def test_gaussgan_step_equals_the_pytorch_step(killer):
  agreement = gaussgan_bench.step_agreement(killer)
  assert agreement['loss_rel_diff'] < 1e-4
  assert agreement['param_rel_diff'] < 2e-3


def test_gaussgan_data_is_the_two_gaussian_mixture():
  points, train = gaussgan_data.make_dataset()
  assert points.shape == (20000, 2) and train.shape == (16000, 2)
  left = points[points[:, 0] < 0]
  np.testing.assert_allclose(left.mean(0), [-5, 5], atol=0.05)
  np.testing.assert_allclose(np.cov(left.T), np.eye(2), atol=0.05)


@functools.lru_cache()
def reference_set():
  return gaussgan_data.make_dataset()[0][:2000]


def test_metrics_equal_scipy_sklearn_pytorch():
  y = reference_set()
  rng = np.random.default_rng(0)
  p = np.concatenate([rng.standard_normal((300, 2)) + [-5, 5],
                      1.5 * rng.standard_normal((200, 2)) + [4, 6]]).astype(np.float32)
  ours = gaussgan_port.metrics(jnp.asarray(p), jnp.asarray(y), gaussgan_port.reference_terms(y))
  ref = gaussgan_reference.reference_metrics(p, y)
  for name in gaussgan_port.NAMES:
    assert abs(float(ours[name]) - ref[name]) < 1e-4, name
  # Samples of the true mixture have the ideal log-likelihood, -(1 + ln 2 pi + ln 2).
  assert abs(float(ours['LogLikelihood']) - ref['LogLikelihood']) < 1e-4
  q = gaussgan_port.metrics(jnp.asarray(y[:500]), jnp.asarray(y), gaussgan_port.reference_terms(y))
  assert abs(float(q['LogLikelihood']) + 1 + np.log(2 * np.pi) + np.log(2)) < 0.15


def test_short_training_improves_the_generator():
  y = reference_set()
  terms = gaussgan_port.reference_terms(y)
  params, bn = gaussgan_port.init_params(0)
  state = gaussgan_port.init_state(params, bn)
  before = gaussgan_port.metrics(gaussgan_port.sample(state, jax.random.PRNGKey(1)), jnp.asarray(y), terms)
  _, train = gaussgan_data.make_dataset()
  epoch = gaussgan_port.make_epoch()
  for e in range(2):
    state, d_loss, g_loss = epoch(state, jnp.asarray(train[:2048]), jax.random.PRNGKey(e))
  after = gaussgan_port.metrics(gaussgan_port.sample(state, jax.random.PRNGKey(1)), jnp.asarray(y), terms)
  assert np.isfinite(float(d_loss)) and np.isfinite(float(g_loss))
  assert float(after['LogLikelihood']) > float(before['LogLikelihood']) + 1.0


def dense_circuit(z1, z2, weights):
  """Independent reference: the whole circuit as 64 x 64 matrices (Kronecker products;
  qubit 0 is the most significant bit, as in the state tensor's first axis)."""
  n = gaussgan_port.N_QUBITS
  eye = np.eye(2)

  def on(q, g):
    out = np.array([[1.0]])
    for i in range(n):
      out = np.kron(out, g if i == q else eye)
    return out

  def ry(t):
    return np.array([[np.cos(t / 2), -np.sin(t / 2)], [np.sin(t / 2), np.cos(t / 2)]])

  def rz(t):
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])

  def cnot(c, t):
    m = np.zeros((2**n, 2**n))
    for b in range(2**n):
      bits = [(b >> (n - 1 - i)) & 1 for i in range(n)]
      if bits[c]:
        bits[t] ^= 1
      m[sum(bit << (n - 1 - i) for i, bit in enumerate(bits)), b] = 1
    return m

  psi = np.zeros(2**n, complex)
  psi[0] = 1
  for q in range(n):
    psi = on(q, rz(np.arcsin(z2))) @ on(q, ry(np.arcsin(z1))) @ psi
  for layer in range(gaussgan_port.N_LAYERS):
    for q in range(n):
      psi = on(q, ry(weights[layer, q])) @ psi
    for q in range(n - 1):
      psi = cnot(q, q + 1) @ on(q + 1, rz(weights[layer, n + q])) @ cnot(q, q + 1) @ psi
  prob = np.abs(psi) ** 2
  return np.array([sum(p * (1 - 2 * ((b >> (n - 1 - q)) & 1)) for b, p in enumerate(prob))
                   for q in range(n)])


def test_quantum_circuit_batched_equals_loop_and_dense_matrices():
  w = gaussgan_port.init_weights(0)
  z = np.random.default_rng(0).uniform(-1, 1, (16, 2))
  batched = np.asarray(gaussgan_port.expectations(jnp.asarray(z, jnp.float32), jnp.asarray(w, jnp.float32)))
  loop = gaussgan_reference.expectations_loop(z, w)
  np.testing.assert_allclose(batched, loop, atol=1e-5)
  for i in range(3):
    np.testing.assert_allclose(loop[i], dense_circuit(z[i, 0], z[i, 1], w), atol=1e-12)
  # Without rotations in the layers the state stays a product state: <Z> = cos(arcsin z1).
  zero = gaussgan_reference.expectations_loop(z, np.zeros_like(w))
  np.testing.assert_allclose(zero, np.sqrt(1 - z[:, :1] ** 2) * np.ones((1, 6)), atol=1e-12)


def test_runner_writes_the_comparison_table(tmp_path):
  js = tmp_path / 'comparison.json'
  r = subprocess.run([sys.executable, '-m', 'scripts.compare', '--quick',
                      '--only', 'genesis_ops', '--json', str(js)],
                     capture_output=True, text=True, cwd=REPO, timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  from scripts import artifacts
  from scripts import compare
  (run,) = artifacts.read(str(js))
  assert run.meta['recorded'] and run.meta['machine']['cpu_count'] and 'genesis_ops' in run.data
  text = compare.render(str(js))
  assert '| genesis_ops | matmul (latency) | 512x512 | PyTorch |' in text
  assert 'Measured peaks on this machine' in text and '**DIFFERS**' not in text
