"""Geometry optimisation with noisy forces: the settings' checks, the optimiser's move and
the stopping criterion, pure numpy; the training stage (stages/relax.py) estimates the
forces, moves the nuclei of the run and averages the final geometry.

The forces are the zero-variance zero-bias estimates of physics/observables.py (Assaraf &
Caffarel 2003), averaged over the `every` training steps since the last move; their
standard error comes from the spread of those per-step estimates (reblocked). The nuclei
move by damped steepest descent with momentum (heavy ball), the scheme of structural
optimisation by quantum Monte Carlo with the wavefunction optimised along (Sorella &
Capriotti, J. Chem. Phys. 133, 234111 (2010): a fixed step in bohr^2/Ha on noisy forces):
  v <- momentum v + step_size F,   R <- R + v,
with the momentum reset to zero whenever the force opposes the last move (F . v < 0, as
FIRE does: Bitzek et al., Phys. Rev. Lett. 97, 170201 (2006)), and the displacement of
each move scaled down so that no nucleus moves more than `max_displacement` bohr. A
quasi-Newton update (BFGS) was not chosen: its curvature from differences of noisy forces
is dominated by their noise at the small steps a converging run takes, where steepest
descent's only cost is its rate. Before each move the net force and torque are projected
out (they vanish in expectation: the energy does not change under a rigid translation or
rotation), which keeps the centroid of the nuclei and the orientation fixed and removes
their noise; the projection weighs each nucleus by the variance of its forces over the
steps averaged (generalised least squares), so a heavy nucleus's noisy force gives way to
its light neighbours' better ones.

The nuclei first move after `start` training steps (a barely trained wavefunction's forces
point anywhere). Stopping criterion, fixed by the settings before the run: a move *meets*
it when every component of the mean force is below `threshold` (Ha/bohr) in magnitude and
so is every component's standard error (a force that noisy cannot tell; `every` or
batch_size must grow). After `patience` consecutive moves that meet it, or after
`max_moves` moves, the nuclei stop at the final geometry: the mean of the positions of the
trailing moves that met the criterion (at most `window`; the last `window` positions when fewer than two met),
with the standard error of that mean (reblocked), and the wavefunction trains on there.
"""

from typing import NamedTuple, Optional

import numpy as np

from ferminet_fast.errors import InputError


class Settings(NamedTuple):
  """The `relax` settings (config.py)."""
  start: int  # Training steps before the first move.
  every: int  # Training steps between moves (whose forces are averaged).
  step_size: float  # bohr^2/Ha: displacement per unit force.
  momentum: float  # In [0, 1): weight of the previous move.
  max_displacement: float  # bohr: the most any nucleus moves in one move.
  threshold: float  # Ha/bohr: the force (and its error) below which a move meets the criterion.
  patience: int  # Consecutive moves meeting the criterion that stop the nuclei.
  max_moves: int  # Moves after which the nuclei stop anyway (0: no limit).
  window: int  # Positions of the path averaged for the final geometry.


def settings_of(relax_cfg) -> Settings:
  return Settings(*(relax_cfg[k] for k in Settings._fields))


def check(sys_cfg, periodic: bool) -> None:
  """The `system` settings that relaxation refuses (one geometry of a molecule, one state),
  checked before anything is read; the ECPs, which need the system built, are refused by
  `check_system`."""
  if not sys_cfg.relax:
    return
  if sys_cfg.geometries or sys_cfg.scan.atoms:
    key = 'geometries' if sys_cfg.geometries else 'scan'
    raise InputError(f'config.system.relax = True relaxes one geometry, and config.system.{key} '
                     'gives a set of geometries (a potential energy surface): give one '
                     'geometry in config.system.molecule, or set relax = False')
  if periodic:
    raise InputError('config.system.relax = True is for molecules: the forces of a periodic '
                     'system (config.system.lattice or config.system.rs) are not implemented')
  if sys_cfg.states > 1:
    raise InputError(f'config.system.relax = True needs one state (config.system.states = '
                     f'{sys_cfg.states}): the forces are those of the ground state')
  if sys_cfg.atom:
    raise InputError(f"config.system.relax = True: config.system.atom = {sys_cfg.atom!r} is a "
                     "single atom, which has no geometry to relax (set atom = '' and give the "
                     'nuclei in config.system.molecule)')


def check_system(system) -> None:
  """What relaxation refuses of the built system (a physics/systems.System)."""
  if system.has_ecp:
    raise InputError('config.system.relax = True: the forces are not available with effective '
                     "core potentials (config.system.ecp; the derivative of the ECP's "
                     'non-local term is not implemented): relax with all electrons')
  if len(system.positions) < 2:
    raise InputError('config.system.relax = True: one nucleus has no geometry to relax')


def rigid_basis(positions: np.ndarray) -> np.ndarray:
  """An orthonormal basis (3 M, k) of the rigid translations and rotations of nuclei at
  `positions` (M, 3) bohr, about their centroid: k = 6, 5 for a linear molecule."""
  r = positions - positions.mean(axis=0)
  vectors = [np.tile(e, len(r)) for e in np.eye(3)]
  vectors += [np.cross(e, r).ravel() for e in np.eye(3)]  # omega x (R_I - C).
  u, s, _ = np.linalg.svd(np.stack(vectors, axis=1), full_matrices=False)
  return u[:, s > 1e-8 * max(1.0, s[0])]


def project(forces: np.ndarray, positions: np.ndarray,
            variances: Optional[np.ndarray] = None) -> np.ndarray:
  """Forces (..., M, 3) with their net force and torque about the centroid of
  `positions` (M, 3) removed. Without `variances`, their component along each rigid motion
  (the orthogonal projection). With `variances` (M,), each nucleus's noise variance per
  component, the generalised least-squares estimate under those constraints, F - S B (B^T S
  B)^-1 B^T F (S the variances on the diagonal, B the rigid motions): the net force and
  torque taken mostly from the noisiest nuclei, which then carry the others' better
  estimates (water's oxygen, whose zero-variance force is about ten times noisier than its
  hydrogens', is then mostly minus their sum)."""
  basis = rigid_basis(positions)
  flat = forces.reshape(*forces.shape[:-2], -1)
  if variances is None:
    return (flat - (flat @ basis) @ basis.T).reshape(forces.shape)
  s = np.repeat(np.maximum(np.asarray(variances, np.float64), 1e-300), 3)  # (3 M,)
  sb = s[:, None] * basis
  correction = np.linalg.solve(basis.T @ sb, (flat @ basis).T).T @ sb.T
  return (flat - correction).reshape(forces.shape)


def move(positions: np.ndarray, velocity: np.ndarray, forces: np.ndarray,
         s: Settings) -> tuple:
  """(new positions, new velocity), bohr, (M, 3) each: one damped heavy-ball move under the
  mean `forces` (M, 3) Ha/bohr (already projected) from `positions`, `velocity` being the
  last move's displacement."""
  if np.sum(forces * velocity) < 0:  # The last move went uphill: start again (FIRE).
    velocity = np.zeros_like(velocity)
  v = s.momentum * velocity + s.step_size * forces
  largest = float(np.max(np.linalg.norm(v, axis=-1)))
  if largest > s.max_displacement:
    v = v * (s.max_displacement / largest)
  return positions + v, v


def meets(forces: np.ndarray, errors: np.ndarray, threshold: float) -> bool:
  """Whether a move's mean forces and their standard errors (M, 3), Ha/bohr, are all below
  `threshold`."""
  return bool(np.all(np.abs(forces) < threshold) and np.all(errors < threshold))
