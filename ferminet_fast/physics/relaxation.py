"""Geometry optimisation with noisy forces: the settings' checks, the optimiser's move and
the stopping criterion, pure numpy; the training stage (stages/relax.py) estimates the
forces, moves the nuclei of the run and averages the final geometry.

The forces are the zero-variance zero-bias estimates of physics/observables.py (Assaraf &
Caffarel 2003), averaged over the `every` training steps since the last move; their standard
error comes from the spread of those per-step estimates (reblocked). The nuclei move by
damped steepest descent with momentum (heavy ball), the scheme of structural optimisation by
quantum Monte Carlo with the wavefunction optimised along (Sorella & Capriotti, J. Chem.
Phys. 133, 234111 (2010): a fixed step in bohr^2/Ha on noisy forces): v <- momentum v +
step_size F, R <- R + v, with the momentum reset to zero whenever the new step opposes the
last move (as FIRE does when F . v < 0: Bitzek et al., Phys. Rev. Lett. 97, 170201 (2006)),
and the displacement of each move scaled down so that no nucleus moves more than
`max_displacement` bohr. A quasi-Newton update (BFGS) was not chosen: its curvature from
differences of noisy forces is dominated by their noise at the small steps a converging run
takes. Instead the force is preconditioned by a fixed Hessian, the Hartree-Fock one at the
starting geometry (`hessian = 'hf'`): each move takes `rate` of the Newton step H^-1 F on
the internal motions (the Hessian's eigenvalues floored at FLOOR), so that every vibration
relaxes in about 1 / rate moves. Without it (`hessian = 'identity'`) the move is `step_size`
F, and a soft mode (water's bend, five times softer than its stretches by its Hartree-Fock
Hessian) relaxes, and decorrelates, that many times more slowly than the stiff ones, which
leaves its average over an hour's path with too few independent positions for an honest
error bar. Before each move the net force and torque are projected out (they vanish in
expectation: the energy does not change under a rigid translation or rotation), which keeps
the centroid of the nuclei and the orientation fixed and removes their noise; the projection
weighs each nucleus by the variance of its forces over the steps averaged (generalised least
squares), so a heavy nucleus's noisy force gives way to its light neighbours' better ones.

The nuclei first move after `start` training steps (a barely trained wavefunction's forces
point anywhere). On noisy forces the nuclei never come to rest: they fluctuate about the
minimum, by about the noise times the square root of the step over twice the force constant,
a few degrees for a soft bend. The final geometry is therefore the mean of the positions the
path took over its trailing `average` fraction (Polyak and Juditsky, SIAM J. Control Optim.
30, 838 (1992): averaging the iterates of a stochastic approximation), the earlier ones
being the descent; its standard error is reblocked over the positions, so the correlation
between successive moves is counted. For a harmonic surface this error is the force noise
per move over the force constant times 1/sqrt(moves averaged), whatever the step: a longer
path, not a smaller step, is what narrows it. With the Hessian, each position is first
carried a full Newton step along the forces measured there, x + H^-1 F (`newton_estimates`):
on a harmonic surface of that Hessian each such estimate is the minimum plus one move's
force noise over the curvature, so they are nearly independent from move to move and
unbiased by a path still descending, while the positions themselves stay correlated over
many moves. Their reblocked error is then read from many short blocks, while the
positions' is read from few, is itself uncertain by tens of per cent, and, checked after
every move, stops the path where it happens to be small: the final geometries of a noisy
harmonic mode stopped by the criterion fall within their claimed errors of the minimum far
less often than they should with the positions' mean, and about as often as they should
with the Newton estimates (tests/test_relax.py). An error in the Hessian leaves that
fraction of the positions' own fluctuation in the estimates.

Stopping criterion, fixed by the settings before the run, checked after every move once
`min_averaged` positions are averaged: every internuclear distance of the final geometry has
a standard error of at most `tolerance` bohr, and the path has settled: for every distance
the mean distances of the two halves of the averaged positions agree, their difference below
the two-sided 5% point of a normal over its standard error, the level divided among the
distances (Bonferroni). This is a diagnostic, not an exact test: the errors are reblocked
from few blocks, and the check is repeated after every move; a path still drifting by many
of its errors fails it. Then, or after `max_moves` moves, the nuclei stop at the final
geometry and the wavefunction trains on there.
"""

import math
import statistics
from typing import NamedTuple, Optional

import numpy as np

from ferminet_fast import choices
from ferminet_fast.errors import InputError


def hartree_fock_hessian(system, basis: str) -> dict:
  """{'method', 'ha_per_bohr2' (3 M, 3 M)}: the UHF Hessian of `system` (a
  physics/systems.System at the starting geometry) in `basis` (pyscf)."""
  from ferminet_fast.physics import hartree_fock
  return {'method': f'UHF/{basis}',
          'ha_per_bohr2': hartree_fock.hessian(system, basis).tolist()}


def no_hessian(system, basis: str) -> None:
  """No preconditioner: the moves are `step_size` F."""
  del system, basis


HARTREE_FOCK = choices.Choice('hf', hartree_fock_hessian, 'moves preconditioned by the UHF '
                              'Hessian of the starting geometry in pretrain.basis', 'pyscf')
NO_HESSIAN = choices.Choice('identity', no_hessian, 'no preconditioning: steps of step_size F')
HESSIANS = choices.table(HARTREE_FOCK, NO_HESSIAN)


class Settings(NamedTuple):
  """The `relax` settings (config.py)."""
  start: int  # Training steps before the first move.
  every: int  # Training steps between moves (whose forces are averaged).
  hessian: choices.Choice  # A HESSIANS record: what preconditions the moves.
  rate: float  # With a Hessian: the fraction of the Newton step per move.
  step_size: float  # Without one: bohr^2/Ha, displacement per unit force.
  momentum: float  # In [0, 1): weight of the previous move.
  max_displacement: float  # bohr: the most any nucleus moves in one move.
  average: float  # In (0, 1]: the trailing fraction of the path averaged for the final geometry.
  tolerance: float  # bohr: the standard error of each distance below which the nuclei stop.
  min_averaged: int  # Positions averaged before the criterion is checked.
  max_moves: int  # Moves after which the nuclei stop anyway (0: no limit).


def settings_of(relax_cfg) -> Settings:
  """The `relax` block with its `hessian` resolved into its record."""
  s = Settings(*(relax_cfg[k] for k in Settings._fields))
  return s._replace(hessian=choices.pick(HESSIANS, s.hessian, 'config.relax.hessian'))


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
  estimates (water's oxygen, whose zero-variance force is far noisier than its hydrogens',
  is then mostly minus their sum)."""
  basis = rigid_basis(positions)
  flat = forces.reshape(*forces.shape[:-2], -1)
  if variances is None:
    return (flat - (flat @ basis) @ basis.T).reshape(forces.shape)
  s = np.repeat(np.maximum(np.asarray(variances, np.float64), 1e-300), 3)  # (3 M,)
  sb = s[:, None] * basis
  correction = np.linalg.solve(basis.T @ sb, (flat @ basis).T).T @ sb.T
  return (flat - correction).reshape(forces.shape)


FLOOR = 0.05  # Ha/bohr^2: the least curvature a preconditioned move assumes.


def inverse_hessian(hessian: np.ndarray, positions: np.ndarray) -> np.ndarray:
  """(3 M, 3 M) bohr^2/Ha: the inverse of `hessian` (3 M, 3 M) Ha/bohr^2 on the internal
  motions of nuclei at `positions` (M, 3) bohr, zero on their rigid ones; each eigenvalue
  taken by its magnitude and floored at FLOOR (a mode the Hessian finds flat or unstable at
  the start still moves downhill, by at most F / FLOOR)."""
  rigid = rigid_basis(positions)
  u, _, _ = np.linalg.svd(np.eye(len(rigid)) - rigid @ rigid.T)
  internal = u[:, :len(rigid) - rigid.shape[1]]  # (3 M, 3 M - k): orthonormal, not rigid.
  values, vectors = np.linalg.eigh(internal.T @ (0.5 * (hessian + hessian.T)) @ internal)
  modes = internal @ vectors
  return (modes / np.maximum(np.abs(values), FLOOR)) @ modes.T


def newton_estimates(positions: np.ndarray, forces: np.ndarray,
                     hessian: np.ndarray) -> np.ndarray:
  """(n, M, 3) bohr: each of the path's positions (n, M, 3) carried a full Newton step along
  the forces (n, M, 3) Ha/bohr measured there, x + H^-1 F (inverse_hessian of `hessian`
  (3 M, 3 M) at the mean positions). On a harmonic surface of that Hessian each is the
  minimum plus that move's force noise over the curvature, whatever the path did before:
  independent from move to move where the positions are correlated over many."""
  inverse = inverse_hessian(hessian, positions.mean(axis=0))
  return positions + (forces.reshape(len(forces), -1) @ inverse.T).reshape(positions.shape)


def move(positions: np.ndarray, velocity: np.ndarray, forces: np.ndarray, s: Settings,
         inverse: Optional[np.ndarray] = None) -> tuple:
  """(new positions, new velocity), bohr, (M, 3) each: one damped heavy-ball move under the
  mean `forces` (M, 3) Ha/bohr (already projected) from `positions`, `velocity` being the
  last move's displacement; `inverse` (3 M, 3 M), inverse_hessian's, preconditions it
  (`s.rate` of the Newton step), None: `s.step_size` F."""
  if inverse is not None:
    forces = s.rate * (inverse @ forces.ravel()).reshape(forces.shape)
  else:
    forces = s.step_size * forces
  if np.sum(forces * velocity) < 0:  # The last move went uphill: start again (FIRE).
    velocity = np.zeros_like(velocity)
  v = s.momentum * velocity + forces
  largest = float(np.max(np.linalg.norm(v, axis=-1)))
  if largest > s.max_displacement:
    v = v * (s.max_displacement / largest)
  return positions + v, v


def averaged(n: int, average: float) -> int:
  """How many of the path's `n` positions, the trailing ones, the final geometry averages."""
  return max(1, min(n, math.ceil(average * n - 1e-9)))


def distances(positions: np.ndarray) -> tuple:
  """(pairs, d): the atom pairs (i, j), i < j, and their distances (..., P) of `positions`
  (..., M, 3)."""
  m = positions.shape[-2]
  pairs = [(i, j) for j in range(m) for i in range(j)]
  d = np.stack([np.linalg.norm(positions[..., j, :] - positions[..., i, :], axis=-1)
                for i, j in pairs], axis=-1)
  return pairs, d


def drift_limit(pairs: int) -> float:
  """The largest |difference of the halves' means| / its error that the criterion lets pass
  for `pairs` distances: the normal's two-sided 5% point, Bonferroni over the distances."""
  return statistics.NormalDist().inv_cdf(1 - 0.025 / max(pairs, 1))


def meets(errors: np.ndarray, drift: np.ndarray, positions_averaged: int,
          s: Settings) -> bool:
  """Whether the final geometry meets the stopping criterion: `errors` (P,) bohr, the
  standard errors of its distances, `drift` (P,), the difference of the two halves' mean
  distances over its standard error, from `positions_averaged` positions."""
  errors, drift = np.asarray(errors), np.asarray(drift)
  return bool(positions_averaged >= s.min_averaged and np.all(errors <= s.tolerance)
              and np.all(np.abs(drift) <= drift_limit(drift.size)))
