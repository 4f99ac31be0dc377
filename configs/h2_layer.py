"""A slab: a square layer of H2 molecules (bond 1.4 bohr, along the layer's normal z), 4.5
bohr apart in the plane, periodic along x and y only (config.system.periodic_dims = 2),
open along z. The simulation cell is a 2 x 2 supercell of the one-molecule cell (4 H2, 8
electrons), at the Gamma point. Coulomb energy by the two-dimensional Ewald sum of a neutral
slab; the third lattice vector (along z) only sets the cell's extent for pyscf's
Hartree-Fock (pretraining, ROHF of the supercell with pyscf.pbc's dimension = 2, STO-3G,
whose basis functions are also summed over images along z: 30 bohr keeps those negligible)
and for the fractional coordinates: nothing else depends on it. Energies are per simulation
cell (4 H2), in Ha.
"""

from ferminet_fast import config

SPACING = 4.5  # bohr, between neighbouring molecules in the plane.
HEIGHT = 30.0  # bohr, the cell's extent along z (not a period).


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.units = 'bohr'
  cfg.system.molecule = 'H 0 0 -0.7; H 0 0 0.7'
  cfg.system.lattice = ((SPACING, 0.0, 0.0), (0.0, SPACING, 0.0), (0.0, 0.0, HEIGHT))
  cfg.system.periodic_dims = 2
  cfg.system.supercell = (2, 2, 1)
  cfg.system.name = 'H2_layer'
  cfg.network.envelope = 'isotropic'
  cfg.network.ferminet.hidden_dims = ((32, 8), (32, 8))
  cfg.network.determinants = 2
  cfg.batch_size = 128
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 1000
  cfg.pretrain.iterations = 300
  cfg.pretrain.basis = 'sto-3g'
  cfg.evaluation.steps = 500
  return cfg
