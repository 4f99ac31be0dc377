"""GaussGAN's quantum noise generator: 6 qubits, 2 layers, <Z_i> of every qubit.

Circuit (per sample, z1, z2 ~ U(-1, 1)): every qubit RY(arcsin z1) then RZ(arcsin z2);
then per layer l, RY(w[l, i]) on each qubit i, and for each neighbouring pair (i, i+1):
CNOT(i, i+1), RZ(w[l, 6 + i]) on qubit i+1, CNOT(i, i+1). Weights (2, 11) drawn from
U(-pi, pi) and frozen, as in the original. The 6 expectation values feed Linear(6 -> 4)
and then the classical generator.

`expectations` simulates the 64-amplitude state vector gate by gate for one sample and
is vmapped and jitted over the batch; `expectations_loop` is the reference: the same
gates applied with NumPy, one sample at a time in a Python loop, as the original ran its
circuit per sample.
"""

import jax
import jax.numpy as jnp
import numpy as np

N_QUBITS, N_LAYERS = 6, 2


def init_weights(seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).uniform(-np.pi, np.pi, (N_LAYERS, 2 * N_QUBITS - 1))


def _gates(xp, t, dtype):
  """RY and RZ matrices of angle t in the array module xp."""
  c, s = xp.cos(t / 2), xp.sin(t / 2)
  ry = xp.stack([xp.stack([c, -s]), xp.stack([s, c])]).astype(dtype)
  e = xp.exp(-0.5j * t)
  rz = xp.stack([xp.stack([e, 0 * e]), xp.stack([0 * e, xp.conj(e)])]).astype(dtype)
  return ry, rz


def _apply_1q(xp, state, gate, q):
  """Applies a 2x2 gate to qubit q of a (2,)*N state tensor."""
  state = xp.tensordot(gate, state, axes=([1], [q]))
  return xp.moveaxis(state, 0, q)


def _cnot(xp, state, control, target):
  """CNOT: flips `target` on the control = 1 half of the state."""
  s0 = xp.take(state, 0, axis=control)
  s1 = xp.take(state, 1, axis=control)
  t = target - (target > control)  # Axis of the target once the control axis is taken.
  s1 = xp.flip(s1, axis=t)
  return xp.stack([s0, s1], axis=control)


def _circuit(xp, z1, z2, weights, dtype):
  state = xp.zeros((2,) * N_QUBITS, dtype)
  state = state.at[(0,) * N_QUBITS].set(1.0) if xp is jnp else _set_zero(state)
  ry, rz = _gates(xp, xp.arcsin(z1), dtype)[0], _gates(xp, xp.arcsin(z2), dtype)[1]
  for q in range(N_QUBITS):
    state = _apply_1q(xp, state, ry, q)
    state = _apply_1q(xp, state, rz, q)
  for layer in range(N_LAYERS):
    for q in range(N_QUBITS):
      state = _apply_1q(xp, state, _gates(xp, weights[layer, q], dtype)[0], q)
    for q in range(N_QUBITS - 1):
      state = _cnot(xp, state, q, q + 1)
      state = _apply_1q(xp, state, _gates(xp, weights[layer, N_QUBITS + q], dtype)[1], q + 1)
      state = _cnot(xp, state, q, q + 1)
  prob = xp.abs(state) ** 2
  return xp.stack([xp.sum(xp.take(prob, 0, axis=q)) - xp.sum(xp.take(prob, 1, axis=q))
                   for q in range(N_QUBITS)])


def _set_zero(state):
  state[(0,) * N_QUBITS] = 1.0
  return state


@jax.jit
def expectations(z, weights):
  """(B, 6) <Z_i> for latent pairs z (B, 2) in [-1, 1], batched state vectors."""
  return jax.vmap(lambda zi: _circuit(jnp, zi[0], zi[1], weights, jnp.complex64))(z).astype(jnp.float32)


def expectations_loop(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
  """The reference: one sample at a time, NumPy, complex128."""
  return np.stack([_circuit(np, zi[0], zi[1], weights, np.complex128) for zi in z])
