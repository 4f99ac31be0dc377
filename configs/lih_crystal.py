"""LiH rock salt, all electrons: the conventional cubic cell (4 LiH, 8 up and 8 down
electrons) as a supercell of the primitive fcc cell, at the Gamma point.

Lattice constant a = 4.084 angstrom = 7.7176 bohr (experiment, near 0 K); Li on the fcc sites,
H shifted by a/2 along x. The primitive cell holds one LiH; the supercell matrix
((-1, 1, 1), (1, -1, 1), (1, 1, -1)) turns its vectors a/2 (0, 1, 1), ... into the cube's
a (1, 0, 0), ... . Energies are per simulation cell (4 LiH), in Ha.

Hartree-Fock pretraining from pyscf.pbc: k-point RHF of the primitive cell on the 4 k-points
that fold onto the cube's Gamma point, unfolded to the cube (periodic_hartree_fock.py),
STO-3G. The network and batch are small so that 1000 steps fit about 10 minutes of a 2-core
machine (docs/guides/crystals.md says how that was estimated). FermiNet with the isotropic
envelope in the periodic distance to each nucleus, which holds the Li 1s electrons in their
cores (a plane-wave envelope does not). Measured: after 2000 pretraining and 300 KFAC steps
the evaluated energy is below the HF one; not converged (docs/guides/crystals.md, Limits).
"""

from ferminet_fast import config

A = 7.7176  # bohr.


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.units = 'bohr'
  cfg.system.molecule = f'Li 0 0 0; H {A / 2} 0 0'
  cfg.system.lattice = ((0.0, A / 2, A / 2), (A / 2, 0.0, A / 2), (A / 2, A / 2, 0.0))
  cfg.system.supercell = ((-1, 1, 1), (1, -1, 1), (1, 1, -1))
  cfg.system.name = 'LiH_rocksalt_conventional'
  cfg.network.envelope = 'isotropic'
  cfg.network.ferminet.hidden_dims = ((32, 8), (32, 8))
  cfg.network.determinants = 2
  cfg.batch_size = 128
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 1000
  cfg.pretrain.iterations = 2000
  cfg.pretrain.basis = 'sto-3g'
  cfg.evaluation.steps = 500
  return cfg
