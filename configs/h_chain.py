"""A chain of hydrogen atoms 1.8 bohr apart along x, 10 atoms (5 up and 5 down electrons) to
the repeat, at the Gamma point: the system of Motta et al., Phys. Rev. X 7, 031059 (2017).

The chain is periodic along x only (config.system.periodic_dims = 1) and open across it: its
Coulomb energy is the one-dimensional Ewald sum of a neutral chain (physics/ewald.py), so
there are no images along y and z to converge away. The other two lattice vectors only set
the cell's extent across the chain (for fractional coordinates and for pyscf.pbc, which takes
the open directions as infinite vacuum). Energies are per simulation cell (10 H), in Ha.

The primitive cell is an H2 unit (3.6 bohr, two electrons), the simulation cell its 5-fold
supercell (5, 1, 1); Hartree-Fock pretraining is pyscf.pbc's ROHF of that cell in one
periodic dimension (periodic_hartree_fock.py), STO-3G.
"""

from ferminet_fast import config

SPACING = 1.8  # bohr, between neighbouring atoms.
EXTENT = 16.0  # bohr, the cell's extent along y and z (not a period).


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.units = 'bohr'
  cfg.system.molecule = f'H 0 0 0; H {SPACING} 0 0'
  cfg.system.lattice = ((2 * SPACING, 0.0, 0.0), (0.0, EXTENT, 0.0), (0.0, 0.0, EXTENT))
  cfg.system.periodic_dims = 1
  cfg.system.supercell = (5, 1, 1)
  cfg.system.name = 'H10_chain'
  cfg.network.envelope = 'isotropic'
  cfg.network.ferminet.hidden_dims = ((32, 8), (32, 8))
  cfg.network.determinants = 2
  cfg.batch_size = 128
  cfg.optim.optimizer = 'kfac'
  cfg.optim.iterations = 1000
  cfg.pretrain.iterations = 500
  cfg.pretrain.basis = 'sto-3g'
  cfg.evaluation.steps = 500
  return cfg
