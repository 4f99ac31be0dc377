"""What the wavefunction modules share: the Network interface (pure functions of params and
one configuration) and a determinant that stays finite and differentiable."""

from typing import Any, Callable, NamedTuple, Optional, Protocol

import jax
import jax.numpy as jnp

Params = Any  # flax variables {'params': ...}, as `Init` returns them.


class Init(Protocol):
  """PRNG key -> freshly initialised parameters."""

  def __call__(self, key: jax.Array) -> Params:
    ...


class Apply(Protocol):
  """(params, x (3N,) bohr, atoms (M, 3) bohr or None) -> (sign (), log|psi| ()) at one
  configuration; for a complex wavefunction the sign is its phase exp(i theta), a complex
  number of modulus one. `atoms`: the nuclei's positions, the same parameters (what moves
  the nuclei for forces and evaluates one network at many geometries); None: the system's
  own, constants of the program. `scale` (): a periodic system's cell scaled by it (a scan
  of the cell); None: the cell as it is. Every function of a Network takes `atoms` and
  `scale` so (systems.network_arguments gives them for a geometry)."""

  def __call__(self, params: Params, x: jax.Array, atoms: Optional[jax.Array] = None,
               scale: Optional[jax.Array] = None) -> tuple[jax.Array, jax.Array]:
    ...


class LogPsi(Protocol):
  """(params, x (3N,) bohr, atoms (M, 3) or None) -> log|psi| (): what samplers and
  energies differentiate."""

  def __call__(self, params: Params, x: jax.Array, atoms: Optional[jax.Array] = None,
               scale: Optional[jax.Array] = None) -> jax.Array:
    ...


class Orbitals(Protocol):
  """(params, x (3N,) bohr, atoms (M, 3) or None) -> [(k, n_s, n_orb) per spin]: orbitals
  times envelopes, before the determinants; n_orb = N with full_det, else n_s. What
  Hartree-Fock pretraining fits."""

  def __call__(self, params: Params, x: jax.Array, atoms: Optional[jax.Array] = None,
               scale: Optional[jax.Array] = None) -> list[jax.Array]:
    ...


class Instrumented(Protocol):
  """(variables, x (3N,), mutable, interceptor, atoms (M, 3) or None) -> (output, state):
  the flax module applied with `variables` ('params' and any other collections), the
  collections named in `mutable` returned in `state`, under the flax method interceptor
  `interceptor`: how an optimizer instruments the layers without the network knowing
  (kfac.py). `output` is what `Apply` gives; with several states, the variables other than
  'params' hold a leading axis of the K configurations, as the returned state does."""

  def __call__(self, variables: Params, x: jax.Array, mutable: list,
               interceptor: Callable, atoms: Optional[jax.Array] = None,
               scale: Optional[jax.Array] = None) -> tuple[Any, Any]:
    ...


class LogPsiPhase(Protocol):
  """(params, x (3N,) bohr, atoms (M, 3) or None) -> (log|psi|, theta) (2,): a complex
  wavefunction's log psi = log|psi| + i theta as two real functions, what its local energy
  differentiates."""

  def __call__(self, params: Params, x: jax.Array, atoms: Optional[jax.Array] = None,
               scale: Optional[jax.Array] = None) -> jax.Array:
    ...


class ApplyStates(Protocol):
  """(params, x (3N,), atoms (M, 3) or None) -> (signs (K,), log|psi_i| (K,)): the K states
  at one configuration."""

  def __call__(self, params: Params, x: jax.Array,
               atoms: Optional[jax.Array] = None) -> tuple[jax.Array, jax.Array]:
    ...


class Network(NamedTuple):
  """A wavefunction ansatz as pure functions of (params, x[, atoms]) (`Apply`)."""
  init: Init
  apply: Apply
  log_psi: LogPsi
  orbitals: Orbitals
  instrumented: Instrumented
  n_coords: int  # 3N, the length of x.
  dtype: Any = jnp.float32  # dtype of the parameters and of x.
  full_det: bool = True  # The layout of `orbitals` (see there).
  # Several states (states.py): x holds K configurations, (K 3N,), and the functions above
  # are those of the total wavefunction det[psi_i(x_j)]; `apply_states` gives the K states
  # at one configuration.
  states: int = 1
  apply_states: Optional[ApplyStates] = None
  # A complex wavefunction (a periodic system at a twist): log|psi| and its phase; None for
  # a real one.
  log_psi_phase: Optional[LogPsiPhase] = None

  @property
  def complex(self) -> bool:
    return self.log_psi_phase is not None


def modulus(z: jax.Array) -> jax.Array:
  """|z|; for complex z written out as sqrt(Re^2 + Im^2), real arithmetic that forward-mode
  Laplacian libraries (folx) differentiate as JAX does (their rule for the complex abs
  casts complex tangents to real)."""
  return jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2) if jnp.iscomplexobj(z) else jnp.abs(z)


def phase(z: jax.Array) -> jax.Array:
  """The sign of a real z, the phase z / |z| of a complex one: written out for complex z,
  whose jnp.sign folx takes to be constant."""
  return z / modulus(z) if jnp.iscomplexobj(z) else jnp.sign(z)


def slogdet(a: jax.Array) -> tuple:
  """(sign, log|det|) over the last two axes (the sign a phase for complex a).

  Matrices of size <= 3 use closed forms, which are several times faster than a
  batched LU under vmap and differentiate cleanly to any order. Rows are scaled by
  their largest magnitude (held constant for differentiation, which leaves the
  result and all its derivatives exact) so that products of small envelopes do
  not underflow.
  """
  n = a.shape[-1]
  if n > 3:
    return jnp.linalg.slogdet(a)
  scale = jax.lax.stop_gradient(jnp.max(modulus(a), axis=-1, keepdims=True))
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
  return phase(det), jnp.log(modulus(det)) + jnp.sum(jnp.log(scale[..., 0]), axis=-1)
