"""A chain of hydrogen atoms 1.8 bohr apart along x, 10 atoms (5 up and 5 down electrons) to
the repeat, at the Gamma point: the system of Motta et al., Phys. Rev. X 7, 031059 (2017),
as far as 3-D periodicity allows.

The cell is periodic in all three directions (the trainer has 3-D periodicity only), so this
is an array of parallel chains 16 bohr apart along y and z, not one isolated chain. The
chains are neutral, but each electron and its exchange-correlation hole still interact with
their images in the other chains: the energy per cell differs from the isolated chain's by
terms that fall off as the inverse cell volume (as for a molecule in a box, Makov and Payne,
Phys. Rev. B 51, 4014 (1995)). Raise VACUUM to converge them. Energies are per simulation
cell (10 H), in Ha.

The primitive cell is an H2 unit (3.6 bohr, two electrons), the simulation cell its 5-fold
supercell: Hartree-Fock pretraining is then pyscf.pbc's k-point RHF of the unit on the 5
k-points that fold onto the cell's Gamma point (periodic_hartree_fock.py), STO-3G.
"""

from ferminet_fast import config

SPACING = 1.8  # bohr, between neighbouring atoms.
VACUUM = 16.0  # bohr, between a chain and its periodic images along y and z.


def get_config():
  cfg = config.default()
  cfg.system.atom = ''
  cfg.system.units = 'bohr'
  cfg.system.molecule = f'H 0 0 0; H {SPACING} 0 0'
  cfg.system.lattice = ((2 * SPACING, 0.0, 0.0), (0.0, VACUUM, 0.0), (0.0, 0.0, VACUUM))
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
