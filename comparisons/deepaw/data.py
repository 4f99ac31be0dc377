"""Data and graphs for the DeePAW charge-density workload, generated offline.

- Monoclinic HfO2 (P2_1/c, 12 atoms; a 5.12, b 5.17, c 5.29 A, beta 99.2 deg; Hf, O1, O2
  on 4e sites) and strained/rattled copies.
- A target density: per species a sum of Gaussians normalised to its valence charge
  (Hf 10 e, O 6 e), summed over periodic images; it integrates to 88 e per cell.
- Probes at fractional coordinates (i/nx, j/ny, k/nz), C order over (nx, ny, nz).
- Graphs with periodic images, cutoff 4 A, every neighbour: atom -> atom edges once per
  structure, atom -> probe edges per batch of probes, padded to a fixed edge count so
  one compiled function serves every batch.
- A CHGCAR writer (rho * V, x fastest) that ASE reads back.
"""

from typing import NamedTuple

import numpy as np




CUTOFF = 4.0  # A


SPECIES = {'Hf': 72, 'O': 8}


VALENCE = {72: 10.0, 8: 6.0}


# Per species: (weights summing to 1, Gaussian exponents in 1/A^2).
GAUSSIANS = {72: ((0.5, 0.3, 0.2), (6.0, 1.6, 0.5)), 8: ((0.6, 0.4), (4.0, 1.2))}


class Structure(NamedTuple):
  cell: np.ndarray  # (3, 3) lattice vectors as rows, A.
  positions: np.ndarray  # (n, 3) Cartesian, A.
  numbers: np.ndarray  # (n,) atomic numbers.


def hfo2(strain=None, rattle: float = 0.0, seed: int = 0) -> Structure:
  """Monoclinic HfO2, optionally strained ((3, 3) strain tensor) and rattled (std, A)."""
  a, b, c, beta = 5.12, 5.17, 5.29, np.deg2rad(99.2)
  cell = np.array([[a, 0, 0], [0, b, 0], [c * np.cos(beta), 0, c * np.sin(beta)]])
  sites = {'Hf': (0.276, 0.040, 0.209), 'O': (0.070, 0.336, 0.341), 'O2': (0.442, 0.755, 0.479)}
  frac, numbers = [], []
  for name, (x, y, z) in sites.items():
    for f in ((x, y, z), (-x, y + 0.5, 0.5 - z), (-x, -y, -z), (x, 0.5 - y, z + 0.5)):
      frac.append(np.mod(f, 1.0))
      numbers.append(SPECIES[name.rstrip('2')])
  if strain is not None:
    cell = cell @ (np.eye(3) + np.asarray(strain))
  pos = np.asarray(frac) @ cell
  if rattle:
    pos = pos + np.random.default_rng(seed).normal(0, rattle, pos.shape)
  return Structure(cell, pos, np.asarray(numbers))


def dataset(count: int = 6, seed: int = 0) -> list:
  """The equilibrium structure and `count - 1` strained (+-2%) and rattled (0.05 A) copies."""
  rng = np.random.default_rng(seed)
  out = [hfo2()]
  for i in range(count - 1):
    strain = rng.uniform(-0.02, 0.02, (3, 3))
    out.append(hfo2(0.5 * (strain + strain.T), rattle=0.05, seed=seed + i + 1))
  return out


def probe_grid(structure: Structure, shape) -> np.ndarray:
  """(nx*ny*nz, 3) Cartesian probe positions at (i/nx, j/ny, k/nz), C order."""
  idx = np.stack(np.meshgrid(*[np.arange(n) / n for n in shape], indexing='ij'), -1)
  return idx.reshape(-1, 3) @ structure.cell


def _images(structure: Structure, cutoff: float):
  """Periodic images of the atoms reaching within `cutoff` of the cell: positions,
  atom index and integer displacement of each."""
  cell = structure.cell
  heights = np.abs(np.linalg.det(cell)) / np.linalg.norm(
      np.cross(cell[[1, 2, 0]], cell[[2, 0, 1]]), axis=1)
  reps = np.ceil(cutoff / heights).astype(int)
  disp = np.stack(np.meshgrid(*[np.arange(-r, r + 1) for r in reps], indexing='ij'), -1).reshape(-1, 3)
  pos = (structure.positions[None] + (disp @ cell)[:, None]).reshape(-1, 3)
  atom = np.tile(np.arange(len(structure.numbers)), len(disp))
  return pos, atom, np.repeat(disp, len(structure.numbers), axis=0)


def density(structure: Structure, points: np.ndarray) -> np.ndarray:
  """Target density (e/A^3) at `points`: normalised atomic Gaussians over all images
  within the cutoff (their tails beyond it are below 1e-5 of the peak)."""
  from scipy.spatial import cKDTree
  img, atom, _ = _images(structure, CUTOFF + 2.0)
  out = np.zeros(len(points))
  pairs = cKDTree(img).query_ball_point(points, CUTOFF + 2.0)
  src = np.concatenate([np.asarray(p, int) for p in pairs])
  dst = np.repeat(np.arange(len(points)), [len(p) for p in pairs])
  r2 = np.sum((points[dst] - img[src]) ** 2, axis=1)
  z = structure.numbers[atom[src]]
  for species, (weights, exps) in GAUSSIANS.items():
    sel = z == species
    val = sum(w * (a / np.pi) ** 1.5 * np.exp(-a * r2[sel]) for w, a in zip(weights, exps))
    np.add.at(out, dst[sel], VALENCE[species] * val)
  return out


class Graph(NamedTuple):
  """Edges sender -> receiver with the vector receiver - sender (A)."""
  src: np.ndarray
  dst: np.ndarray
  vec: np.ndarray


def atom_graph(structure: Structure, cutoff: float = CUTOFF) -> Graph:
  from scipy.spatial import cKDTree
  img, atom, _ = _images(structure, cutoff)
  pairs = cKDTree(img).query_ball_point(structure.positions, cutoff)
  src_img = np.concatenate([np.asarray(p, int) for p in pairs])
  dst = np.repeat(np.arange(len(structure.numbers)), [len(p) for p in pairs])
  vec = structure.positions[dst] - img[src_img]
  keep = np.linalg.norm(vec, axis=1) > 1e-8  # Not an atom with itself.
  return Graph(atom[src_img][keep], dst[keep], vec[keep])


class ProbeGraphBuilder:
  """Atom -> probe edges for batches of probes; the image atoms and their KD-tree are
  built once per structure and reused for every batch."""

  def __init__(self, structure: Structure, cutoff: float = CUTOFF):
    from scipy.spatial import cKDTree
    self.img, self.atom, _ = _images(structure, cutoff)
    self.tree, self.cutoff = cKDTree(self.img), cutoff

  def edges(self, probes: np.ndarray) -> Graph:
    pairs = self.tree.query_ball_point(probes, self.cutoff)
    counts = np.fromiter((len(p) for p in pairs), int, len(pairs))
    src_img = np.concatenate([np.asarray(p, int) for p in pairs]) if counts.sum() else np.zeros(0, int)
    dst = np.repeat(np.arange(len(probes)), counts)
    return Graph(self.atom[src_img], dst, probes[dst] - self.img[src_img])


def pad(graph: Graph, n_edges: int, dummy_receiver: int) -> Graph:
  """Pads to `n_edges` edges; padding edges go to `dummy_receiver` (a slot the caller
  drops) with a unit vector, so they change nothing real."""
  extra = n_edges - len(graph.src)
  if extra < 0:
    raise ValueError(f'{len(graph.src)} edges exceed the padded size {n_edges}')
  return Graph(np.concatenate([graph.src, np.zeros(extra, int)]),
               np.concatenate([graph.dst, np.full(extra, dummy_receiver)]),
               np.concatenate([graph.vec, np.tile([[1.0, 0.0, 0.0]], (extra, 1))]))


def write_chgcar(path: str, structure: Structure, rho: np.ndarray) -> None:
  """VASP CHGCAR: header, then rho * V (e) on the (nx, ny, nz) grid, x fastest, 5 per line."""
  nx, ny, nz = rho.shape
  symbols = {v: k for k, v in SPECIES.items()}
  order = np.argsort(structure.numbers, kind='stable')[::-1]
  kinds = list(dict.fromkeys(structure.numbers[order]))
  frac = structure.positions[order] @ np.linalg.inv(structure.cell)
  lines = ['HfO2 density (ferminet_fast compare)', '1.0']
  lines += [' '.join(f'{v:.10f}' for v in row) for row in structure.cell]
  lines += [' '.join(symbols[k] for k in kinds),
            ' '.join(str(int(np.sum(structure.numbers == k))) for k in kinds), 'Direct']
  lines += [' '.join(f'{v:.10f}' for v in np.mod(f, 1.0)) for f in frac]
  lines += ['', f'{nx} {ny} {nz}']
  values = (rho * abs(np.linalg.det(structure.cell))).transpose(2, 1, 0).ravel()  # x fastest
  for i in range(0, len(values), 5):
    lines.append(' '.join(f'{v:.11E}' for v in values[i:i + 5]))
  with open(path, 'w') as f:
    f.write('\n'.join(lines) + '\n')
