"""DeePAW (ChargE3Net's F_nonlocal) in JAX with e3nn-jax: the same layers, irreps, paths
and normalisations as the e3nn (PyTorch) reference in
reference.py, whose weights it
can load, so the two give the same density.

Layouts follow e3nn's: Linear weights per (input, output) irrep pair with the 'element'
path weight 1/sqrt(fan-in); "uvu" tensor products by e3nn-jax's FunctionalTensorProduct
(the same instructions and flat per-edge weights); the Gate reads its input in e3nn's
sorted irreps order (by l, odd before even) and scales activations to unit second moment
(normalize2mom; computed here by Gauss-Hermite quadrature, or taken from loaded weights).
"""

import math
from typing import NamedTuple

import e3nn_jax as e3nn
from e3nn_jax.legacy import FunctionalTensorProduct
import jax
import jax.numpy as jnp
import numpy as np




NUM_NEIGHBORS = 20.0  # Only a normaliser: sums are divided by sqrt of it.


NUM_BASIS, RADIAL_HIDDEN, CUTOFF = 10, 100, 4.0


N_SPECIES = 119


def hidden_irreps(mul: int, lmax: int) -> str:
  """mul(l) = round(mul / 5 / (2l + 1)) for each l <= lmax and both parities."""
  parts = []
  for l in range(lmax + 1):
    m = max(1, round(mul / 5 / (2 * l + 1)))
    natural = 'e' if l % 2 == 0 else 'o'
    other = 'o' if natural == 'e' else 'e'
    parts += [f'{m}x{l}{natural}', f'{m}x{l}{other}']
  return '+'.join(parts)


def radial_constants():
  """Mean and std of each Gaussian basis function over 4000 radii in (0, 4] A."""
  r = np.linspace(0, CUTOFF, 4001)[1:]
  b = gaussian_basis_np(r)
  return b.mean(0), b.std(0)


def gaussian_basis_np(r):
  """e3nn's soft_one_hot_linspace(r, 0, 4, 10, 'gaussian', cutoff=False)."""
  values = np.linspace(0.0, CUTOFF, NUM_BASIS)
  step = values[1] - values[0]
  return np.exp(-((r[..., None] - values) / step) ** 2) / 1.12


ACTS = {'silu': jax.nn.silu, 'tanh': jnp.tanh, 'sigmoid': jax.nn.sigmoid}


def moment_constant(name: str) -> float:
  """1 / sqrt(E[f(z)^2]), z ~ N(0, 1), by Gauss-Hermite quadrature."""
  z, w = np.polynomial.hermite_e.hermegauss(200)
  f = {'silu': lambda x: x / (1 + np.exp(-x)), 'tanh': np.tanh,
       'sigmoid': lambda x: 1 / (1 + np.exp(-x))}[name]
  return float(1 / np.sqrt(np.sum(w * f(z) ** 2) / np.sqrt(2 * np.pi)))


def _irreps(s) -> list:
  """[(mul, l, p)] of an irreps string or e3nn_jax.Irreps."""
  return [(mul, ir.l, ir.p) for mul, ir in e3nn.Irreps(s)]


def _str(irreps) -> str:
  return '+'.join(f'{m}x{l}{"e" if p == 1 else "o"}' for m, l, p in irreps) or '0x0e'


def _dim(irreps) -> int:
  return sum(m * (2 * l + 1) for m, l, _ in irreps)


def _offsets(irreps) -> list:
  out, o = [], 0
  for m, l, _ in irreps:
    out.append(o)
    o += m * (2 * l + 1)
  return out


class LinearSpec(NamedTuple):
  irreps_in: tuple
  irreps_out: tuple
  instructions: tuple  # (i_in, i_out, path_weight)

  @property
  def weight_numel(self) -> int:
    return sum(self.irreps_in[i][0] * self.irreps_out[o][0] for i, o, _ in self.instructions)

  @property
  def output_mask(self) -> np.ndarray:
    mask = np.zeros(_dim(self.irreps_out), bool)
    offs = _offsets(self.irreps_out)
    for _, o, _ in self.instructions:
      m, l, _ = self.irreps_out[o]
      mask[offs[o]:offs[o] + m * (2 * l + 1)] = True
    return mask


def linear_spec(irreps_in, irreps_out) -> LinearSpec:
  irreps_in, irreps_out = tuple(_irreps(irreps_in)), tuple(_irreps(irreps_out))
  pairs = [(i, o) for i, (_, li, pi) in enumerate(irreps_in)
           for o, (_, lo, po) in enumerate(irreps_out) if (li, pi) == (lo, po)]
  fan = {o: sum(irreps_in[i][0] for i, oo in pairs if oo == o) for _, o in pairs}
  return LinearSpec(irreps_in, irreps_out, tuple((i, o, 1 / math.sqrt(fan[o])) for i, o in pairs))


def linear(spec: LinearSpec, weight, x):
  """e3nn's o3.Linear on x (n, dim_in) with its flat weight vector."""
  offs_in = _offsets(spec.irreps_in)
  outs = [None] * len(spec.irreps_out)
  w_off = 0
  for i, o, alpha in spec.instructions:
    mi, l, _ = spec.irreps_in[i]
    mo = spec.irreps_out[o][0]
    w = weight[w_off:w_off + mi * mo].reshape(mi, mo)
    w_off += mi * mo
    xi = x[:, offs_in[i]:offs_in[i] + mi * (2 * l + 1)].reshape(-1, mi, 2 * l + 1)
    y = alpha * jnp.einsum('nui,uw->nwi', xi, w).reshape(x.shape[0], -1)
    outs[o] = y if outs[o] is None else outs[o] + y
  cols = [outs[o] if outs[o] is not None else jnp.zeros((x.shape[0], m * (2 * l + 1)), x.dtype)
          for o, (m, l, _) in enumerate(spec.irreps_out)]
  return jnp.concatenate(cols, axis=1)


class GateSpec(NamedTuple):
  irreps_in: tuple  # e3nn's sorted, merged layout of scalars + gates + gated.
  scalar_idx: np.ndarray  # Columns of the input holding the scalars, in `scalars` order.
  scalar_acts: tuple  # Per column: 'silu' (even) or 'tanh' (odd).
  gate_idx: np.ndarray
  gated_idx: np.ndarray  # Columns of the gated irreps, in `gated` order.
  gated_gate: np.ndarray  # For each gated column, which gate multiplies it.
  irreps_out: tuple


def gate_spec(scalars, gates, gated) -> GateSpec:
  """The Gate's input layout as e3nn builds it: concatenation sorted (stable) by (l, p)."""
  groups = [(0, irr) for irr in scalars] + [(1, irr) for irr in gates] + [(2, irr) for irr in gated]
  order = sorted(range(len(groups)), key=lambda k: groups[k][1][1:])  # Stable, by (l, p).
  layout, start = {}, 0  # Entry -> its first column in the sorted input.
  for k in order:
    m, l, _ = groups[k][1]
    layout[k] = start
    start += m * (2 * l + 1)
  idx = {0: [], 1: [], 2: []}
  acts, gated_gate = [], []
  gate_counter = 0
  for k, (g, (m, l, p)) in enumerate(groups):
    cols = list(range(layout[k], layout[k] + m * (2 * l + 1)))
    idx[g] += cols
    if g == 0:
      acts += ['silu' if p == 1 else 'tanh'] * m
    if g == 2:
      for u in range(m):
        gated_gate += [gate_counter + u] * (2 * l + 1)
      gate_counter += m
  merged = []
  for k in order:
    m, l, p = groups[k][1]
    if merged and merged[-1][1:] == (l, p):
      merged[-1] = (merged[-1][0] + m, l, p)
    else:
      merged.append((m, l, p))
  return GateSpec(tuple(merged), np.asarray(idx[0], int), tuple(acts), np.asarray(idx[1], int),
                  np.asarray(idx[2], int), np.asarray(gated_gate, int),
                  tuple(scalars) + tuple(gated))


def gate(spec: GateSpec, consts, x):
  s = x[:, spec.scalar_idx]
  acts = np.asarray(spec.scalar_acts)
  even = jnp.asarray(acts == 'silu')
  s = jnp.where(even, jax.nn.silu(s) * consts['silu'], jnp.tanh(s) * consts['tanh'])
  if len(spec.gate_idx) == 0:
    return s
  g = jax.nn.sigmoid(x[:, spec.gate_idx]) * consts['sigmoid']
  return jnp.concatenate([s, x[:, spec.gated_idx] * g[:, spec.gated_gate]], axis=1)


class ConvSpec(NamedTuple):
  sc: LinearSpec
  lin1: LinearSpec
  lin2: LinearSpec
  lin3: LinearSpec
  tp: FunctionalTensorProduct
  tp_shapes: tuple
  gate: GateSpec
  irreps_out: tuple


def conv_spec(irreps_sender, irreps_receiver, irreps_sh, target) -> ConvSpec:
  sender, sh, target = _irreps(irreps_sender), _irreps(irreps_sh), _irreps(target)
  target_irs = {(l, p) for _, l, p in target}
  mid, instr = [], []
  for i, (mul, l1, p1) in enumerate(sender):
    for j, (_, l2, p2) in enumerate(sh):
      for l in range(abs(l1 - l2), l1 + l2 + 1):
        if (l, p1 * p2) in target_irs or (l, p1 * p2) == (0, 1):
          instr.append((i, j, len(mid), 'uvu', True))
          mid.append((mul, l, p1 * p2))
  reachable = {(l, p) for _, l, p in mid}
  out = [(m, l, p) for m, l, p in target if (l, p) in reachable]
  scalars = [x for x in out if x[1] == 0]
  gated = [x for x in out if x[1] > 0]
  n_gated = sum(m for m, _, _ in gated)
  gates = [(n_gated, 0, 1)] if n_gated else []
  g = gate_spec(scalars, gates, gated)
  tp = FunctionalTensorProduct(_str(sender), _str(sh), _str(mid), instr)
  return ConvSpec(linear_spec(irreps_receiver, _str(g.irreps_in)),
                  linear_spec(_str(sender), _str(sender)), linear_spec(_str(mid), _str(g.irreps_in)),
                  linear_spec(_str(mid), '0e'), tp,
                  tuple(tuple(ins.path_shape) for ins in tp.instructions), g, g.irreps_out)


class ModelSpec(NamedTuple):
  atom: tuple
  probe: tuple
  readout: LinearSpec
  lmax: int


def model_spec(mul: int = 500, lmax: int = 4, layers: int = 3) -> ModelSpec:
  sh = _str([(1, l, (-1) ** l) for l in range(lmax + 1)])
  hidden = hidden_irreps(mul, lmax)
  atom, probe = [], []
  x_atom, x_probe = f'{N_SPECIES}x0e', '1x0e'
  for _ in range(layers):
    atom.append(conv_spec(x_atom, x_atom, sh, hidden))
    probe.append(conv_spec(_str(atom[-1].irreps_out), x_probe, sh, hidden))
    x_atom, x_probe = _str(atom[-1].irreps_out), _str(probe[-1].irreps_out)
  return ModelSpec(tuple(atom), tuple(probe), linear_spec(x_probe, '0e'), lmax)


def init_params(spec: ModelSpec, seed: int = 0) -> dict:
  """e3nn's initialisation: every weight N(0, 1) (normalisation is in the layers)."""
  rng = np.random.default_rng(seed)
  n = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)  # noqa: E731

  def conv(c):
    numel = sum(int(np.prod(s)) for s in c.tp_shapes)
    return {'sc': n(c.sc.weight_numel), 'lin1': n(c.lin1.weight_numel),
            'lin2': n(c.lin2.weight_numel), 'lin3': n(c.lin3.weight_numel),
            'fc0': n(NUM_BASIS, RADIAL_HIDDEN), 'fc1': n(RADIAL_HIDDEN, numel)}

  mean, std = radial_constants()
  return {'atom': [conv(c) for c in spec.atom], 'probe': [conv(c) for c in spec.probe],
          'readout': n(spec.readout.weight_numel),
          'consts': {k: jnp.float32(moment_constant(k)) for k in ('silu', 'tanh', 'sigmoid')},
          'basis_mean': jnp.asarray(mean, jnp.float32), 'basis_std': jnp.asarray(std, jnp.float32)}


def embed(params, lmax: int, vec):
  """(spherical harmonics (E, (lmax+1)^2), standardised radial basis (E, 10)) of edges."""
  sh = e3nn.spherical_harmonics(e3nn.Irreps.spherical_harmonics(lmax), vec, normalize=True,
                                normalization='component').array
  r = jnp.linalg.norm(vec, axis=1)
  values = jnp.linspace(0.0, CUTOFF, NUM_BASIS)
  basis = jnp.exp(-((r[:, None] - values) / (values[1] - values[0])) ** 2) / 1.12
  return sh, (basis - params['basis_mean']) / params['basis_std']


def convolution(spec: ConvSpec, p, consts, x_send, x_recv, src, dst, sh, emb):
  s = linear(spec.sc, p['sc'], x_recv)
  x1 = linear(spec.lin1, p['lin1'], x_send)
  w = jax.nn.silu(emb @ p['fc0'] / math.sqrt(NUM_BASIS)) * consts['silu']
  w = w @ p['fc1'] / math.sqrt(RADIAL_HIDDEN)

  def one_edge(xe, she, we):
    ws, off = [], 0
    for shape in spec.tp_shapes:
      size = int(np.prod(shape))
      ws.append(we[off:off + size].reshape(shape))
      off += size
    return spec.tp.left_right(ws, e3nn.IrrepsArray(spec.tp.irreps_in1, xe),
                              e3nn.IrrepsArray(spec.tp.irreps_in2, she)).array

  msg = jax.vmap(one_edge)(x1[src], sh, w)
  agg = jax.ops.segment_sum(msg, dst, num_segments=x_recv.shape[0]) / math.sqrt(NUM_NEIGHBORS)
  angle = 0.1 * linear(spec.lin3, p['lin3'], agg)
  mask = jnp.asarray(spec.sc.output_mask)
  out = jnp.cos(angle) * s + jnp.where(mask, jnp.sin(angle), 1.0) * linear(spec.lin2, p['lin2'], agg)
  return gate(spec.gate, consts, out)


def atom_features(spec: ModelSpec, params, numbers, src, dst, vec) -> list:
  x = jax.nn.one_hot(numbers, N_SPECIES, dtype=jnp.float32)
  sh, emb = embed(params, spec.lmax, vec)
  out = []
  for c, p in zip(spec.atom, params['atom']):
    x = convolution(c, p, params['consts'], x, x, src, dst, sh, emb)
    out.append(x)
  return out


def density(spec: ModelSpec, params, atoms: list, src, dst, vec, n_probes: int):
  """(n_probes,) density from atom features and atom -> probe edges."""
  sh, emb = embed(params, spec.lmax, vec)
  x = jnp.zeros((n_probes, 1), jnp.float32)
  for c, p, a in zip(spec.probe, params['probe'], atoms):
    x = convolution(c, p, params['consts'], a, x, src, dst, sh, emb)
  return linear(spec.readout, params['readout'], x)[:, 0]


def params_from_torch(model) -> dict:
  """The reference's weights (and its normalisation constants) as JAX parameters."""
  t = lambda a: jnp.asarray(a.detach().numpy(), jnp.float32)  # noqa: E731

  def conv(layer):
    return {'sc': t(layer.sc.weight), 'lin1': t(layer.lin1.weight), 'lin2': t(layer.lin2.weight),
            'lin3': t(layer.lin3.weight), 'fc0': t(layer.fc.layer0.weight),
            'fc1': t(layer.fc.layer1.weight)}

  import torch
  layer = model.atom[0]
  csts = {'silu': layer.fc.layer0.act.cst, 'sigmoid': layer.gate.act_gates.acts[0].cst,
          'tanh': moment_constant('tanh')}
  for conv_layer in [*model.atom, *model.probe]:
    for a in conv_layer.gate.act_scalars.acts:
      if getattr(a, 'f', None) is torch.tanh:
        csts['tanh'] = a.cst
  consts = {k: jnp.float32(v) for k, v in csts.items()}
  return {'atom': [conv(c) for c in model.atom], 'probe': [conv(c) for c in model.probe],
          'readout': t(model.readout.weight), 'consts': consts,
          'basis_mean': t(model.basis_mean), 'basis_std': t(model.basis_std)}
