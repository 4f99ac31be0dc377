"""The PyTorch reference for DeePAW (ChargE3Net's F_nonlocal) with e3nn: 3 atom layers and
3 probe layers of an equivariant convolution and a Gate, then a linear readout to one
scalar (the density) per probe.

Convolution (atoms -> atoms, or one way atoms -> probes): sc = Linear(receiver -> out)
(the self-connection; with the constant node attribute 1x0e, e3nn's
FullyConnectedTensorProduct(x, 1x0e) is a linear map, so Linear is used), lin1 =
Linear(sender -> sender), tp = TensorProduct(lin1(sender)[src] (x) SH(edge)) with "uvu"
paths to every reachable irrep that is in the output or is 0e and per-edge weights from
FullyConnectedNet([10, 100, n_weights], silu) of the radial basis, messages summed onto
receivers / sqrt(20), lin2 = Linear(mid -> out), lin3 = Linear(mid -> 0e); output
cos(0.1 lin3) sc + sin'(0.1 lin3) lin2 (sin' = sin where sc has output, else 1), then
the Gate (SiLU / tanh on even / odd scalars, sigmoid gates on the l > 0 irreps).
"""

import math

from comparisons.deepaw import port
from comparisons.measure import torch_fp32


def conv_irreps(irreps_sender, irreps_sh, target):
  """(mid irreps, uvu instructions, pre-gate irreps (scalars, gates, gated)) for a layer
  whose output is `target` restricted to the irreps reachable from sender x SH."""
  from e3nn import o3
  irreps_sender, irreps_sh, target = o3.Irreps(irreps_sender), o3.Irreps(irreps_sh), o3.Irreps(target)
  mid, instructions = [], []
  for i, (mul, ir_in) in enumerate(irreps_sender):
    for j, (_, ir_edge) in enumerate(irreps_sh):
      for ir_out in ir_in * ir_edge:
        if ir_out in target or ir_out == o3.Irrep('0e'):
          instructions.append((i, j, len(mid), 'uvu', True))
          mid.append((mul, ir_out))
  mid = o3.Irreps(mid)
  reachable = {ir for _, ir in mid}
  out = o3.Irreps([(m, ir) for m, ir in target if ir in reachable])
  scalars = o3.Irreps([(m, ir) for m, ir in out if ir.l == 0])
  gated = o3.Irreps([(m, ir) for m, ir in out if ir.l > 0])
  gates = o3.Irreps(f'{gated.num_irreps}x0e') if gated.num_irreps else o3.Irreps('')
  return mid, instructions, scalars, gates, gated


def make_model(mul: int = 500, lmax: int = 4, layers: int = 3, seed: int = 0):
  torch = torch_fp32()
  from e3nn import nn as enn
  from e3nn import o3

  class Conv(torch.nn.Module):

    def __init__(self, irreps_sender, irreps_receiver, irreps_sh, target):
      super().__init__()
      mid, instr, scalars, gates, gated = conv_irreps(irreps_sender, irreps_sh, target)
      self.irreps_mid = mid
      acts = {1: torch.nn.functional.silu, -1: torch.tanh}
      self.gate = enn.Gate(scalars, [acts[ir.p] for _, ir in scalars], gates,
                           [torch.sigmoid] * len(gates), gated)
      pre_gate = self.gate.irreps_in  # Sorted and merged, the layout the Gate reads.
      self.sc = o3.Linear(irreps_receiver, pre_gate)
      self.lin1 = o3.Linear(irreps_sender, irreps_sender)
      self.tp = o3.TensorProduct(irreps_sender, irreps_sh, mid, instr, shared_weights=False,
                                 internal_weights=False)
      self.fc = enn.FullyConnectedNet([port.NUM_BASIS, port.RADIAL_HIDDEN, self.tp.weight_numel],
                                      torch.nn.functional.silu)
      self.lin2 = o3.Linear(mid, pre_gate)
      self.lin3 = o3.Linear(mid, '0e')
      self.irreps_out = self.gate.irreps_out

    def forward(self, x_send, x_recv, src, dst, sh, emb):
      s = self.sc(x_recv)
      msg = self.tp(self.lin1(x_send)[src], sh, self.fc(emb))
      agg = torch.zeros(x_recv.shape[0], msg.shape[1], dtype=msg.dtype).index_add_(0, dst, msg)
      agg = agg / math.sqrt(port.NUM_NEIGHBORS)
      angle = 0.1 * self.lin3(agg)
      mask = self.sc.output_mask
      out = torch.cos(angle) * s + torch.where(mask.bool(), torch.sin(angle), 1.0) * self.lin2(agg)
      return self.gate(out)

  class Model(torch.nn.Module):

    def __init__(self):
      super().__init__()
      self.irreps_sh = o3.Irreps.spherical_harmonics(lmax)
      hidden = port.hidden_irreps(mul, lmax)
      atom, probe = [], []
      x_atom, x_probe = o3.Irreps(f'{port.N_SPECIES}x0e'), o3.Irreps('1x0e')
      for _ in range(layers):
        atom.append(Conv(x_atom, x_atom, self.irreps_sh, hidden))
        probe.append(Conv(atom[-1].irreps_out, x_probe, self.irreps_sh, hidden))
        x_atom, x_probe = atom[-1].irreps_out, probe[-1].irreps_out
      self.atom, self.probe = torch.nn.ModuleList(atom), torch.nn.ModuleList(probe)
      self.readout = o3.Linear(x_probe, '0e')
      mean, std = port.radial_constants()
      self.register_buffer('basis_mean', torch.tensor(mean, dtype=torch.float32))
      self.register_buffer('basis_std', torch.tensor(std, dtype=torch.float32))

    def embed(self, vec):
      r = vec.norm(dim=1)
      values = torch.linspace(0.0, port.CUTOFF, port.NUM_BASIS)
      step = values[1] - values[0]
      basis = torch.exp(-((r[:, None] - values) / step) ** 2) / 1.12
      sh = o3.spherical_harmonics(self.irreps_sh, vec, normalize=True, normalization='component')
      return sh, (basis - self.basis_mean) / self.basis_std

    def atom_features(self, numbers, atom_graph):
      """The atom model: features after each layer."""
      x = torch.nn.functional.one_hot(numbers, port.N_SPECIES).float()
      src, dst, vec = atom_graph
      sh, emb = self.embed(vec)
      out = []
      for layer in self.atom:
        x = layer(x, x, src, dst, sh, emb)
        out.append(x)
      return out

    def forward(self, atoms, probe_graph, n_probes):
      """Density (n_probes,) from the atom features and atom -> probe edges."""
      src, dst, vec = probe_graph
      sh, emb = self.embed(vec)
      p = torch.zeros(n_probes, 1)
      for layer, a in zip(self.probe, atoms):
        p = layer(a, p, src, dst, sh, emb)
      return self.readout(p)[:, 0]

  torch.manual_seed(seed)
  return Model()
