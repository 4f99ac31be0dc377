"""FermiNet, Psiformer and LapNet wavefunctions for ONE electron configuration (no batch
axis).

`x` is the flat (3N,) vector of electron positions in bohr, spin-up electrons first.
The network returns (sign, log|psi|); vmap, jit and sharding are applied by callers.
Its inputs (features.py), envelopes (envelopes.py) and Jastrow factors (jastrows.py) are
chosen from their own modules.
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import choices
from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import systems
from ferminet_fast.wavefunction import envelopes, jastrows, states
from ferminet_fast.wavefunction.base import Network, modulus, phase, slogdet
from ferminet_fast.wavefunction.features import (Geometry, electrons, ferminet_inputs,
                                                 of_boundary, psiformer_inputs)


def signed_logsumexp(signs: jax.Array, logs: jax.Array) -> tuple:
  """(sign, log|sum_k signs_k exp(logs_k)|) over the last axis, stable for widely different
  magnitudes. Complex signs (phases) give the phase of the sum."""
  top = jax.lax.stop_gradient(jnp.max(logs, axis=-1, keepdims=True))
  total = jnp.sum(signs * jnp.exp(logs - top), axis=-1)
  return phase(total), jnp.log(modulus(total)) + top[..., 0]


def _lecun_normal_flat(key, shape, dtype, n_in):
  """lecun_normal of the kernel as an (n_in, n_out) matrix, reshaped (flax DenseGeneral's)."""
  n_out = int(np.prod(shape)) // n_in
  return nn.initializers.lecun_normal()(key, (n_in, n_out), dtype).reshape(shape)


class Dense(nn.Module):
  """y = x . kernel + bias, contracting the last `in_dims` axes of x with the first of the
  kernel (*in_shape, *features): nn.Dense's (in_dims = 1) and nn.DenseGeneral's parameters
  and initialisation. `dense_rows` says what it is to a curvature estimate (kfac.py)."""
  features: Any  # int or tuple of output axes.
  in_dims: int = 1
  use_bias: bool = True
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    features = (self.features,) if isinstance(self.features, int) else tuple(self.features)
    in_shape = x.shape[x.ndim - self.in_dims:]
    n_in = int(np.prod(in_shape))
    kernel = self.param('kernel', lambda k, s, d: _lecun_normal_flat(k, s, d, n_in),
                        in_shape + features, self.param_dtype)
    y = jnp.tensordot(x, kernel, self.in_dims)
    if self.use_bias:
      y = y + self.param('bias', nn.initializers.zeros, features, self.param_dtype)
    return y

  @nn.nowrap
  def dense_rows(self, x):
    """The inputs as column blocks in the kernel's input order (kfac.py): here one block of
    rows (R, n_in), one per application of the kernel (R = the leading axes' size):
    y = rows . kernel (n_in, n_out) + bias, row by row."""
    return (x.reshape(-1, int(np.prod(x.shape[x.ndim - self.in_dims:]))),)


class SymmetricDense(nn.Module):
  """Dense layer on FermiNet's symmetric features of each electron i,
  [h1_i, mean_up(h1), mean_down(h1), mean_{j up}(h2_ij), mean_{j down}(h2_ij)].

  Same parameters and values as nn.Dense on the concatenation, but the product with the
  spin-wise means of the one-electron stream, which every electron shares, is computed
  once rather than once per electron. To a curvature estimate (kfac.py) it is the dense
  layer on the concatenation, one row per electron, whose shared columns are given once
  (`dense_rows`).
  """
  width: int
  n_up: int
  n_down: int
  param_dtype: Any = jnp.float32

  @nn.nowrap
  def _means(self, h1, h2) -> tuple:
    """The spin-wise means of h1 over electrons (s d1,) and of h2 over partners (n, s d2)."""
    spins = systems.spin_blocks(self.n_up, self.n_down)
    shared = jnp.concatenate([jnp.mean(h1[lo:hi], axis=0) for _, lo, hi in spins])
    pair = jnp.concatenate([jnp.mean(h2[:, lo:hi], axis=1) for _, lo, hi in spins], axis=-1)
    return shared, pair

  @nn.nowrap
  def dense_rows(self, h1, h2):
    """The features the kernel multiplies as column blocks in its input order: h1 (n, d1)
    and the pair means (n, s d2), one row per electron, and between them the spin-wise
    means of h1 (s d1,), the same in every row."""
    shared, pair = self._means(h1, h2)
    return h1, shared, pair

  @nn.compact
  def __call__(self, h1, h2):
    shared, pair = self._means(h1, h2)
    d1 = h1.shape[-1]
    n_in = d1 + shared.shape[0] + pair.shape[-1]
    kernel = self.param('kernel', nn.initializers.lecun_normal(), (n_in, self.width),
                        self.param_dtype)
    bias = self.param('bias', nn.initializers.zeros, (self.width,), self.param_dtype)
    k_one, k_shared, k_pair = jnp.split(kernel, [d1, d1 + shared.shape[0]])
    return h1 @ k_one + pair @ k_pair + (shared @ k_shared + bias)[None]


class Attention(nn.Module):
  """Multi-head self-attention over the electrons, h (n, d) -> (n, d): softmax(q k^T /
  sqrt(head_dim)) v, then an output projection. Parameter names and shapes are those of
  flax's MultiHeadDotProductAttention without biases (query/key/value kernels (d, heads,
  head_dim), out kernel (heads, head_dim, d)); each projection is a Dense."""
  heads: int
  head_dim: int
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, h):
    proj = lambda name: Dense((self.heads, self.head_dim), use_bias=False,
                              param_dtype=self.param_dtype, name=name)(h)
    q, k, v = proj('query'), proj('key'), proj('value')  # (n, heads, head_dim)
    logits = jnp.einsum('qhd,khd->hqk', q / jnp.sqrt(self.head_dim).astype(q.dtype), k)
    out = jnp.einsum('hqk,khd->qhd', jax.nn.softmax(logits, axis=-1), v)
    return Dense(h.shape[-1], in_dims=2, use_bias=False, param_dtype=self.param_dtype,
                 name='out')(out)


class SparseDerivativeAttention(nn.Module):
  """LapNet's sparse derivative attention (Li et al. 2024): multi-head attention over the
  electrons whose queries and keys come from the per-electron stream s (n, d), in which
  electron i's features depend on r_i alone, and whose values come from the main stream h
  (n, d). The weight of electron j in electron i's output then depends on r_i and r_j only
  (through its numerator; the softmax's normaliser is a sum over j), so the Jacobian of the
  logits has 6 non-zero columns per pair, not 3N, and a forward Laplacian that keeps
  per-electron sparsity (folx with a threshold) carries them as such. Parameters as
  `Attention`'s (query, key, value, out)."""
  heads: int
  head_dim: int
  param_dtype: Any = jnp.float32

  def scores(self, q, k):
    """exp(q_i . k_j / sqrt(head_dim) - c_i) (heads, n, n), the softmax's numerators, from
    queries and keys (n, heads, head_dim); c_i, each row's largest logit, held constant. A
    method of its own, so that an interceptor can read it."""
    logits = jnp.einsum('qhd,khd->hqk', q / jnp.sqrt(self.head_dim).astype(q.dtype), k)
    return jnp.exp(logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True)))

  @nn.compact
  def __call__(self, s, h):
    proj = lambda name, x: Dense((self.heads, self.head_dim), use_bias=False,
                                 param_dtype=self.param_dtype, name=name)(x)
    q, k, v = proj('query', s), proj('key', s), proj('value', h)  # (n, heads, head_dim)
    scores = self.scores(q, k)
    # The values weighted by the sparse numerators, then divided by each row's normaliser.
    out = jnp.einsum('hqk,khd->qhd', scores, v) / jnp.sum(scores, axis=-1).T[..., None]
    return Dense(h.shape[-1], in_dims=2, use_bias=False, param_dtype=self.param_dtype,
                 name='out')(out)


class _Slater(nn.Module):
  """What FermiNet, Psiformer and LapNet share: per-electron features h (n, d) -> orbitals
  times envelopes -> a sum of determinants, times an optional e-e Jastrow factor.

  Subclasses compute h in `features`; `__call__(x)` gives (sign, log|psi|), and
  `__call__(x, return_orbitals=True)` the orbital blocks (k, n_s, n_orb) per spin (what
  Hartree-Fock pretraining fits). `atoms` (M, 3) bohr, if given, replaces the nuclear
  positions `self.atoms` (every feature and envelope moves with its nucleus); `scale` (),
  if given, scales a periodic system's cell (features.periodic). With
  `states` = K > 1, K wavefunctions share the features and the Jastrow factor, each with
  its own `determinants` determinants (orbital blocks (K k, n_s, n_orb)), and the signs and
  logs are (K,).
  """
  n_up: int = 1
  n_down: int = 0
  atoms: tuple = ()  # ((x, y, z), ...) nuclear positions, bohr.
  determinants: int = 1
  full_det: bool = True
  envelope: envelopes.Kind = envelopes.ISOTROPIC
  jastrow: choices.Choice = jastrows.SIMPLE_EE
  param_dtype: Any = jnp.float32
  states: int = 1
  # Open boundaries or the periodic cell (physics/boundary.py), which give the features.
  boundary: boundary_lib.Boundary = boundary_lib.OPEN
  kpoints: tuple = ()  # Periodic systems: the filled k-shells (K rows, 1/bohr), envelopes.
  # A periodic system at a twist: complex orbitals (the network's outputs taken in pairs as
  # real and imaginary parts, times complex envelopes); the sign is then a phase exp(i theta).
  complex_output: bool = False
  # A crystal at a twist (envelopes that are lattice-periodic): the twist k_s (3,) 1/bohr;
  # each orbital is multiplied by the Bloch factor exp(i k_s . r) of its electron, so that
  # psi(r_i + L) = exp(i k_s . L) psi(r_i) for the cell's lattice vectors L. () otherwise.
  bloch: tuple = ()

  def geometry(self, r: jax.Array, atoms: jax.Array, scale=None) -> Geometry:
    """The features' geometry: periodic in the boundary's cell (scaled by `scale`), or
    open."""
    return of_boundary(self.boundary)(r, atoms, scale)

  def features(self, g: Geometry) -> jax.Array:
    """(n, d) permutation-equivariant features of the electrons from their geometry."""
    raise NotImplementedError

  @nn.compact
  def __call__(self, x: jax.Array, return_orbitals: bool = False, atoms=None, scale=None):
    n = self.n_up + self.n_down
    k = self.determinants * self.states  # Determinants of all states, state-major.
    atoms = jnp.asarray(self.atoms if atoms is None else atoms, dtype=x.dtype)
    r = x.reshape(n, 3)
    g = self.geometry(r, atoms, None if scale is None else jnp.asarray(scale, x.dtype))
    h = self.features(g)

    blocks = []
    for name, lo, hi in systems.spin_blocks(self.n_up, self.n_down):
      n_orb = n if self.full_det else hi - lo
      width = n_orb * k
      orb = Dense(width * (2 if self.complex_output else 1), use_bias=False,
                  param_dtype=self.param_dtype, name=f'orbital_{name}')(h[lo:hi])
      if self.complex_output:
        orb = jax.lax.complex(orb[:, :width], orb[:, width:])
      orb = orb * self.envelope(self, electrons(g, lo, hi), n_orb * k, f'envelope_{name}')
      if self.bloch:
        phase = g.r[lo:hi] @ jnp.asarray(self.bloch, g.r.dtype)  # (n_s,) k_s . r_i
        orb = orb * jax.lax.complex(jnp.cos(phase), jnp.sin(phase))[:, None]
      blocks.append(jnp.transpose(orb.reshape(hi - lo, k, n_orb), (1, 0, 2)))  # (k, n_s, n_orb)
    if return_orbitals:
      return blocks

    if self.full_det:
      sign, logdet = slogdet(jnp.concatenate(blocks, axis=1))
    else:
      signs, logdets = zip(*[slogdet(b) for b in blocks])
      sign, logdet = jnp.prod(jnp.stack(signs), axis=0), jnp.sum(jnp.stack(logdets), axis=0)
    if self.states > 1:  # (K k,) -> (K, k): each state sums its own determinants.
      sign, logdet = (v.reshape(self.states, self.determinants) for v in (sign, logdet))
    sign, log_abs = signed_logsumexp(sign, logdet)

    return sign, log_abs + self.jastrow(self, g.r_ee[..., 0])


class FermiNet(_Slater):
  """FermiNet (Pfau et al. 2020): permutation-equivariant one- and two-electron streams."""
  hidden_dims: tuple = ((32, 8),)  # ((one_electron_width, two_electron_width), ...) per layer.

  def features(self, g: Geometry) -> jax.Array:
    h1, h2 = ferminet_inputs(g)
    for layer, (d1, d2) in enumerate(self.hidden_dims):
      new1 = jnp.tanh(SymmetricDense(d1, self.n_up, self.n_down, self.param_dtype,
                                     name=f'one_{layer}')(h1, h2))
      h1 = new1 + h1 if new1.shape == h1.shape else new1
      if layer + 1 < len(self.hidden_dims):  # The last layer's pair stream would be unused.
        new2 = jnp.tanh(Dense(d2, param_dtype=self.param_dtype, name=f'two_{layer}')(h2))
        h2 = new2 + h2 if new2.shape == h2.shape else new2
    return h1


class Psiformer(_Slater):
  """Psiformer (von Glehn et al. 2023): self-attention over the electrons.

  Each electron's input is its log-scaled offsets to the nuclei, r log(1 + |r|) / |r| and
  log(1 + |r|), and its spin (+-1); a linear map embeds it in `heads * head_dim` features.
  Each layer adds multi-head self-attention over electrons and then a tanh dense layer,
  both as residuals (optionally layer-normed first). Electron-electron distances enter only
  through the Jastrow factor, which supplies the cusps; the attention is smooth in them.
  """
  layers: int = 2
  heads: int = 4
  head_dim: int = 16
  layer_norm: bool = False

  def features(self, geometry: Geometry) -> jax.Array:
    h = psiformer_inputs(geometry, self.n_up, self.n_down)
    width = self.heads * self.head_dim
    h = Dense(width, use_bias=False, param_dtype=self.param_dtype, name='embed')(h)
    norm = (lambda name: nn.LayerNorm(param_dtype=self.param_dtype, name=name)
            if self.layer_norm else (lambda v: v))
    for layer in range(self.layers):
      attention = Attention(self.heads, self.head_dim, self.param_dtype,
                            name=f'attention_{layer}')
      g = norm(f'norm_attention_{layer}')(h)
      h = h + attention(g)
      g = norm(f'norm_mlp_{layer}')(h)
      h = h + jnp.tanh(Dense(width, param_dtype=self.param_dtype, name=f'mlp_{layer}')(g))
    return h


class LapNet(_Slater):
  """LapNet (Li, Wang, Zhang, Ren and Chen, Nat. Mach. Intell. 6, 209 (2024)): Psiformer's
  inputs and layers with sparse derivative attention (`SparseDerivativeAttention`).

  Two streams start from the same embedding of each electron's input (Psiformer's): a
  per-electron stream s, which only tanh dense layers applied electron by electron update
  (`sparse_layers` residual ones between attention layers), so that s_i depends on r_i
  alone, and the main stream h, to which each layer adds attention whose queries and keys
  come from s and values from h, then a tanh dense layer, both as residuals (optionally
  layer-normed first). The orbitals are read from h. Since the attention scores (the
  softmax's numerators) depend on pairs of electrons only, a forward Laplacian that keeps
  per-electron sparsity (folx_sparse) costs less than on a Psiformer of the same width and
  depth.
  """
  layers: int = 2
  heads: int = 4
  head_dim: int = 16
  layer_norm: bool = False
  sparse_layers: int = 2

  def features(self, geometry: Geometry) -> jax.Array:
    x = psiformer_inputs(geometry, self.n_up, self.n_down)
    width = self.heads * self.head_dim
    h = s = Dense(width, use_bias=False, param_dtype=self.param_dtype, name='embed')(x)
    norm = (lambda name: nn.LayerNorm(param_dtype=self.param_dtype, name=name)
            if self.layer_norm else (lambda v: v))
    for layer in range(self.layers):
      attention = SparseDerivativeAttention(self.heads, self.head_dim, self.param_dtype,
                                            name=f'attention_{layer}')
      f = h + attention(norm(f'norm_sparse_{layer}')(s), norm(f'norm_attention_{layer}')(h))
      g = norm(f'norm_mlp_{layer}')(f)
      h = f + jnp.tanh(Dense(width, param_dtype=self.param_dtype, name=f'mlp_{layer}')(g))
      if layer + 1 < self.layers:  # The last layer's per-electron stream would be unused.
        for i in range(self.sparse_layers):
          s = s + jnp.tanh(Dense(width, param_dtype=self.param_dtype,
                                 name=f'sparse_{layer}_{i}')(s))
    return h


def _rows(a) -> tuple:
  return tuple(tuple(float(c) for c in row) for row in np.asarray(a))


def _ferminet(net_cfg, **common) -> FermiNet:
  return FermiNet(hidden_dims=tuple(tuple(d) for d in net_cfg.ferminet.hidden_dims), **common)


def _psiformer(net_cfg, **common) -> Psiformer:
  p = net_cfg.psiformer
  return Psiformer(layers=p.layers, heads=p.heads, head_dim=p.head_dim,
                   layer_norm=p.layer_norm, **common)


def _lapnet(net_cfg, **common) -> LapNet:
  p = net_cfg.lapnet
  return LapNet(layers=p.layers, heads=p.heads, head_dim=p.head_dim,
                layer_norm=p.layer_norm, sparse_layers=p.sparse_layers, **common)


# The ansatzes: each factory makes its flax module from the network settings (its own block,
# network.ferminet, network.psiformer or network.lapnet) and the keyword arguments every
# ansatz shares.
FERMINET = choices.Choice('ferminet', _ferminet, 'FermiNet (Pfau et al. 2020)')
PSIFORMER = choices.Choice('psiformer', _psiformer,
                           'Psiformer, self-attention over electrons (von Glehn et al. 2023)')
LAPNET = choices.Choice('lapnet', _lapnet, 'LapNet, Psiformer with sparse derivative '
                        'attention (Li et al. 2024): a cheaper forward Laplacian')
ANSATZES = choices.table(FERMINET, PSIFORMER, LAPNET)


def make_network(net_cfg, system: systems.System, dtype, ansatz: choices.Choice,
                 envelope: envelopes.Kind, jastrow: choices.Choice) -> Network:
  """Builds the ansatz `ansatz` (a record of ANSATZES) with the envelope and Jastrow factor
  given (their records) for `system`, its sizes from the network settings `net_cfg`;
  parameters are created in `dtype`. A periodic system's network has periodic features
  (and, for 'planewave' envelopes, the filled k-shells of its larger spin; a crystal at a
  twist, the Bloch factor of the twist on each orbital); the electron gas, which has no
  nuclei, gets the cell's origin as the one centre of its one-electron features (a
  reference point of no charge)."""
  boundary = system.boundary
  centres = system.positions if len(system.positions) else np.zeros((1, 3))
  # Plane-wave envelopes carry the twist in their wavevectors; the others are periodic.
  bloch = (tuple(float(c) for c in boundary.twist_vector())
           if boundary.complex and not envelope.carries_twist else ())
  module = ansatz(
      net_cfg, n_up=system.n_up, n_down=system.n_down, atoms=_rows(centres),
      determinants=net_cfg.determinants, full_det=net_cfg.full_det,
      envelope=envelope, jastrow=jastrow, param_dtype=dtype,
      states=system.states, boundary=boundary,
      kpoints=_rows(boundary.kpoints(max(system.n_up, system.n_down))),
      complex_output=boundary.complex, bloch=bloch)
  n_dim = 3 * system.n_electrons

  @jax.jit
  def init(key):
    return {'params': module.init(key, jnp.zeros((n_dim,), dtype))['params']}

  def apply(params, x, atoms=None, scale=None):
    return module.apply(params, x, atoms=atoms, scale=scale)

  def log_psi(params, x, atoms=None, scale=None):
    return module.apply(params, x, atoms=atoms, scale=scale)[1]

  def orbitals(params, x, atoms=None, scale=None):
    return module.apply(params, x, return_orbitals=True, atoms=atoms, scale=scale)

  def log_psi_phase(params, x, atoms=None, scale=None):
    sign, log_abs = module.apply(params, x, atoms=atoms, scale=scale)
    return jnp.stack([log_abs, jnp.angle(sign)])

  def instrumented(variables, x, mutable, interceptor, atoms=None, scale=None):
    with nn.intercept_methods(interceptor):
      return module.apply(variables, x, mutable=mutable, atoms=atoms, scale=scale)

  network = Network(init=init, apply=apply, log_psi=log_psi, orbitals=orbitals,
                    instrumented=instrumented, n_coords=n_dim, dtype=dtype,
                    full_det=net_cfg.full_det,
                    log_psi_phase=log_psi_phase if boundary.complex else None)
  if system.states == 1:
    return network

  return states.total_network(network, apply, system.states)
