"""Observables besides the energy, estimated at walkers sampled from |psi|^2.

Each observable is a function of ONE configuration, (params, x (3N,)) -> values (k,);
evaluation reduces them over the walkers of each sweep to one estimate per sweep (the
walker mean, unless the observable says otherwise) and reblocks the series of sweeps
component by component. Chosen by name from `OBSERVABLES`.

- 's2': total spin <S^2>. For a wavefunction with n_up spin-up and n_down spin-down
  electrons (S_z = (n_up - n_down) / 2),
    <S^2> = S_z (S_z + 1) + n_down - sum_{i up, j down} <psi(x with r_i <-> r_j) / psi(x)>,
  the exchange of the positions of an up and a down electron (Lowdin's formula, written
  as a ratio of wavefunction values: n_up n_down extra network evaluations per walker).
  A spin eigenstate gives S(S + 1): 0 for a singlet, 0.75 for a doublet, 2 for a triplet.
- 'dipole': the electric dipole moment d = sum_I Z_I R_I - sum_i r_i (x, y, z), in e bohr
  (atomic units; 1 e bohr = 2.541746 D). Origin-independent for neutral systems.
- 'density': the spherically averaged electron density rho(r) of an atom (bohr^-3), as the
  mean number of electrons in each spherical shell around the nucleus divided by the
  shell's volume, on RADIAL_EDGES (finer near the nucleus, where the density is largest).
  Summed over shells, rho times volume is the electron count N (less what lies beyond the
  last edge). For molecules there is no radial profile: an error.
- 'forces': the force on each nucleus, F_I = -dE/dR_I (Ha/bohr), the derivative of the
  variational energy with the parameters held (which at the optimum is the derivative of
  the optimised energy surface). Zero-variance zero-bias estimator (Assaraf & Caffarel,
  J. Chem. Phys. 119, 10536 (2003)), chosen over space-warp correlated sampling because it
  needs one pass over the walkers and no finite-difference step:
    F_I = < F_nn,I + Z_I sum_i (1 - u u^T) grad_i log|psi| / |r_i - R_I| >
          - 2 Cov(E_L, d log|psi| / dR_I),          u = (r_i - R_I) / |r_i - R_I|.
  The first term is the Hellmann-Feynman force Z_I sum_i u / |r_i - R_I|^2 plus the
  zero-mean term (H - E_L)(Q psi) / psi with Q = -Z_I sum_i u, which cancels its
  1/|r - R|^2 singularity exactly (infinite variance becomes finite); the second is the
  Pulay term, nonzero because the wavefunction moves with its nuclei (its features and
  envelopes are built from r - R) and is not exact. The covariance is formed per sweep
  from the walker means, so evaluation reblocks one force estimate per sweep.
  Near a node of an inexact psi both E_L and d log|psi| / dR grow as 1/s, s the distance to
  the node, so the Pulay term's variance is infinite (its sweep means heavy-tailed). As in
  Pathak and Wagner, AIP Adv. 10, 085213 (2020), d log|psi| / dR is multiplied by
  f(s / eps) = 9 x^2 - 15 x^4 + 7 x^6 (x = s / eps < 1; 1 beyond), s estimated as
  1 / |grad log|psi||, the gradient over all electrons: the variance becomes finite, and
  since the integral of f - 1 over [0, 1] vanishes and the leading odd terms cancel across
  the node, the bias is O(eps^3). eps = `node_cutoff` (bohr; 0: not regularised).
- 'forces_warp': the same forces by central finite differences of correlated-sampling
  energies with a space warp (`warped_energy_terms`): an independent estimator of the same
  derivative, costing 6 M local energies per walker, for checking 'forces'.
"""

import functools
import os
from typing import Callable, NamedTuple, Optional

from ferminet_fast.errors import InputError
import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import coulomb, hamiltonian, systems


def finite_mean(values: jax.Array) -> jax.Array:
  """Walker mean of each component over the walkers whose value is finite, (B, k) -> (k,)."""
  ok = jnp.isfinite(values)
  return jnp.sum(jnp.where(ok, values, 0), axis=0) / jnp.maximum(jnp.sum(ok, axis=0), 1)


class Estimator(NamedTuple):
  """An observable made for one system and wavefunction."""
  per_config: Callable  # (params, x (3N,)) -> values (k,)
  labels: tuple  # Names of the components of a sweep's estimate.
  reduce: Callable = finite_mean  # A sweep's values (B, k) -> its estimate.
  # (run_dir, means, errors) -> a summary line, writing any files of its own; None: the
  # line lists every component.
  report: Optional[Callable] = None
  # True: evaluation keeps only the mean over sweeps, not their series (errors are None),
  # for estimates of very many components (a density grid).
  accumulate: bool = False


class Observable(NamedTuple):
  # (network, system, ham, node_cutoff) -> Estimator; `network` is a networks.Network, `ham`
  # the run's hamiltonian.Hamiltonian, node_cutoff (bohr) the forces' node regularisation.
  make: Callable
  unit: str


def spin_squared(apply: Callable, system: systems.System) -> Callable:
  """<S^2> estimator for `apply(params, x[, atoms, scale]) -> (sign, log|psi|)`, (params, x
  (3N,), *nuclei) -> (1,), the nuclei at `nuclei` (apply's trailing arguments: atoms (M, 3)
  bohr and a scaled cell's scale) or, with none, where `apply` has them; see the module
  docstring. For `apply` of K states (signs and logs (K,)), each
  state's local <S^2>, (K,)."""
  n_up, n_down = system.n_up, system.n_down
  s_z = 0.5 * (n_up - n_down)
  pairs = np.array([(i, j) for i in range(n_up) for j in range(n_up, n_up + n_down)],
                   dtype=np.int32).reshape(-1, 2)

  def estimate(params, x, *nuclei):
    r = x.reshape(-1, 3)
    psi = (lambda p, y: apply(p, y, *nuclei)) if nuclei else apply

    def exchanged(pair):  # x with the positions of electrons i (up) and j (down) exchanged.
      i, j = pair[0], pair[1]
      return r.at[i].set(r[j]).at[j].set(r[i]).reshape(-1)

    # x and all its exchanges in one batched evaluation: one factorisation of the
    # determinants, not two independent ones that XLA may run side by side (which
    # deadlocks jaxlib 0.10.0-0.11.0 on CPU: vmc/ordering.py).
    configs = jnp.concatenate([x[None], jax.vmap(exchanged)(pairs)]) if len(pairs) else x[None]
    signs, logs = jax.vmap(psi, in_axes=(None, 0))(params, configs)
    sign, log_abs = signs[0], logs[0]
    # psi(x')/psi(x): the sign of a real psi is its own inverse; a complex one's phase is
    # divided by its conjugate, and the estimator is the real part.
    exchange = jnp.real(jnp.sum(signs[1:] * jnp.conj(sign) * jnp.exp(logs[1:] - log_abs),
                                axis=0))
    value = s_z * (s_z + 1) + n_down - exchange + jnp.zeros_like(log_abs)
    return jnp.reshape(value, (-1,)).astype(x.dtype)

  return estimate


def dipole(apply: Callable, system: systems.System) -> Callable:
  """Dipole moment sum_I Z_I R_I - sum_i r_i (3,), e bohr."""
  del apply
  nuclear = np.sum(np.asarray(system.charges)[:, None] * np.asarray(system.positions), axis=0)

  def estimate(params, x):
    del params
    return jnp.asarray(nuclear, x.dtype) - jnp.sum(x.reshape(-1, 3), axis=0)

  return estimate


# Shell edges of the radial density, bohr: r_k = 12 (k / 120)^2, quadratic so that the
# shells near the nucleus are thin (the first is 0.83 mbohr) and the outer ones wide.
RADIAL_EDGES = 12.0 * (np.arange(121) / 120.0) ** 2


def radial_density(apply: Callable, system: systems.System) -> Callable:
  """Electrons per shell volume (bohr^-3) in each shell of RADIAL_EDGES around the single
  nucleus of an atom, (len(RADIAL_EDGES) - 1,) per configuration."""
  del apply
  if len(system.charges) != 1:
    raise InputError('observable density: radial profiles are for atoms (one nucleus); '
                     f'{system.name} has {len(system.charges)}')
  centre = np.asarray(system.positions[0])
  volumes = 4.0 / 3.0 * np.pi * np.diff(RADIAL_EDGES ** 3)

  def estimate(params, x):
    del params
    r = jnp.linalg.norm(x.reshape(-1, 3) - jnp.asarray(centre, x.dtype), axis=-1)
    edges = jnp.asarray(RADIAL_EDGES, x.dtype)
    inside = (r[:, None] >= edges[None, :-1]) & (r[:, None] < edges[None, 1:])  # (N, shells)
    return jnp.sum(inside, axis=0).astype(x.dtype) / jnp.asarray(volumes, x.dtype)

  return estimate


def report_density(run_dir: str, values, errors) -> str:
  """Writes density.csv (shell edges, rho and its error) and says how many electrons the
  profile holds (sum of rho times shell volume)."""
  volumes = 4.0 / 3.0 * np.pi * np.diff(RADIAL_EDGES ** 3)
  table = np.column_stack([RADIAL_EDGES[:-1], RADIAL_EDGES[1:], values, errors])
  np.savetxt(os.path.join(run_dir, 'density.csv'), table, delimiter=',',
             header='r_lo_bohr,r_hi_bohr,rho_per_bohr3,error', comments='')
  n = float(np.sum(np.asarray(values) * volumes))
  return (f'{n:.4f} electrons within {RADIAL_EDGES[-1]:g} bohr; the radial profile is in '
          'density.csv')


GRID_MARGIN = 4.0  # bohr of space around the outermost nuclei in a density grid.
GRID_SPACING = 0.2  # bohr between grid points (widened to keep at most GRID_MAX per axis).
GRID_MAX = 64


class Grid(NamedTuple):
  """A box of voxels: voxel (i, j, k) is centred at origin + spacing (i, j, k)."""
  origin: np.ndarray  # (3,) bohr, centre of the first voxel.
  spacing: float  # bohr.
  shape: tuple  # (n_x, n_y, n_z)


def density_grid(system: systems.System) -> Grid:
  """The grid of a molecule's density: its nuclei's bounding box plus GRID_MARGIN."""
  lo = np.min(system.positions, axis=0) - GRID_MARGIN
  extent = np.max(system.positions, axis=0) + GRID_MARGIN - lo
  spacing = max(GRID_SPACING, float(np.max(extent)) / GRID_MAX)
  shape = tuple(int(n) for n in np.ceil(extent / spacing))
  return Grid(lo + 0.5 * spacing, spacing, shape)


def grid_indices(system: systems.System, grid: Grid) -> Callable:
  """(params, x (3N,)) -> (N,): the flat index of each electron's voxel (z fastest), -1
  outside the grid (as x's dtype, exact for grids below 2^24 voxels)."""
  del system
  corner = np.asarray(grid.origin) - 0.5 * grid.spacing
  shape = np.asarray(grid.shape)

  def indices(params, x):
    del params
    ijk = jnp.floor((x.reshape(-1, 3) - jnp.asarray(corner, x.dtype)) / grid.spacing)
    inside = jnp.all((ijk >= 0) & (ijk < jnp.asarray(shape, x.dtype)), axis=-1)
    flat = (ijk[:, 0] * shape[1] + ijk[:, 1]) * shape[2] + ijk[:, 2]
    return jnp.where(inside, flat, -1.0).astype(x.dtype)

  return indices


def grid_histogram(values: jax.Array, grid: Grid) -> jax.Array:
  """A sweep's density on the grid (n_x n_y n_z,), bohr^-3: electrons per voxel per walker
  over the voxel's volume, from the walkers' `grid_indices` (B, N); walkers with a
  non-finite position are left out."""
  ok = jnp.all(jnp.isfinite(values), axis=1, keepdims=True)
  size = int(np.prod(grid.shape))
  # Electrons outside the grid (and walkers left out) get index `size`, which is dropped.
  index = jnp.where(ok & (values >= 0), values, size).astype(jnp.int32).ravel()
  counts = jnp.zeros(size, values.dtype).at[index].add(1.0, mode='drop')
  return counts / jnp.maximum(jnp.sum(ok), 1) / grid.spacing ** 3


def write_cube(run_dir: str, values, errors, system: systems.System, grid: Grid) -> str:
  """Writes density.cube (Gaussian cube format, bohr) and says how many electrons the grid
  holds."""
  del errors
  rho = np.asarray(values, np.float64).reshape(grid.shape)
  numbers = [systems.atomic_number(s, 'density') for s in system.symbols]
  lines = ['Electron density (bohr^-3) from ferminet_fast.evaluate',
           f'{system.name}: walker histogram, voxel {grid.spacing:.4f} bohr',
           f'{len(numbers):5d} ' + ' '.join(f'{c:12.6f}' for c in grid.origin)]
  for axis in range(3):
    step = np.zeros(3)
    step[axis] = grid.spacing
    lines.append(f'{grid.shape[axis]:5d} ' + ' '.join(f'{c:12.6f}' for c in step))
  for z, q, p in zip(numbers, system.charges, system.positions):
    lines.append(f'{z:5d} {q:12.6f} ' + ' '.join(f'{c:12.6f}' for c in p))
  flat = rho.reshape(-1, grid.shape[2])
  for row in flat:  # Each (x, y) line of z values, six per line.
    lines += [' '.join(f'{v:13.5e}' for v in row[i:i + 6]) for i in range(0, len(row), 6)]
  with open(os.path.join(run_dir, 'density.cube'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
  n = float(rho.sum() * grid.spacing ** 3)
  return (f'{n:.4f} electrons on a {"x".join(map(str, grid.shape))} grid of '
          f'{grid.spacing:.3f} bohr; written to density.cube')


def _no_ecp(ham: hamiltonian.Hamiltonian) -> None:
  if ham.ecp is not None:
    raise InputError('observable forces: not available with effective core potentials (the '
                     "derivative of the ECP's non-local term is not implemented)")


def node_regularisation(grad_log_psi: jax.Array, node_cutoff: float) -> jax.Array:
  """Pathak and Wagner's factor f(s / eps) (module docstring) at one configuration, from
  grad log|psi| (3N,) over all electrons; 1 when `node_cutoff` (eps, bohr) is 0."""
  if not node_cutoff:
    return jnp.ones((), grad_log_psi.dtype)
  x2 = 1.0 / (jnp.sum(grad_log_psi**2) * node_cutoff**2)  # (s / eps)^2, s = 1 / |grad|.
  return jnp.where(x2 < 1.0, x2 * (9.0 - 15.0 * x2 + 7.0 * x2**2), 1.0)


def force_terms(log_psi: Callable, ham: hamiltonian.Hamiltonian,
                node_cutoff: float = 0.0) -> Callable:
  """Per-configuration terms of the zero-variance zero-bias force (module docstring) under the
  Hamiltonian `ham`, at its nuclei, for `log_psi(params, x (3N,), atoms (M, 3)) -> log|psi|`
  (a Network's): (params, x) -> (9 M + 1,), the zero-variance force (M, 3), d log|psi| / dR
  (M, 3) times the node regularisation at `node_cutoff` (bohr), E_L times that (M, 3) and
  E_L, flattened. `reduce_forces` turns a sweep of them into forces. An optional third
  argument, `atoms` (M, 3) bohr, places the nuclei there (data of the program, for nuclei
  that move: stages/relax.py); without it they are the Hamiltonian's, constants."""
  _no_ecp(ham)
  atoms = np.asarray(ham.positions, np.float64)
  charges = np.asarray(ham.charges, np.float64)
  # -dV_nn/dR_I = Z_I sum_J Z_J (R_I - R_J) / |R_I - R_J|^3, by differentiating V_nn.
  f_nn = -np.asarray(jax.grad(coulomb.nuclear_repulsion)(atoms, charges))
  local_energy = ham.local_energy_at(log_psi, with_gradient=True)

  def terms(params, x, moved=None):
    if moved is None:
      nuclei, repulsion = jnp.asarray(atoms, x.dtype), jnp.asarray(f_nn, x.dtype)
    else:
      nuclei = moved.astype(x.dtype)
      repulsion = -jax.grad(coulomb.nuclear_repulsion)(nuclei, jnp.asarray(charges, x.dtype))
    e_l, g = local_energy(params, x, nuclei)
    regularisation = node_regularisation(g, node_cutoff)
    g = g.reshape(-1, 1, 3)
    u = x.reshape(-1, 1, 3) - nuclei[None]  # (N, M, 3)
    r = jnp.linalg.norm(u, axis=-1, keepdims=True)
    u = u / r
    tangential = (g - u * jnp.sum(u * g, axis=-1, keepdims=True)) / r  # (N, M, 3)
    f_zv = (repulsion
            + jnp.asarray(charges, x.dtype)[:, None] * jnp.sum(tangential, axis=0))
    d = regularisation * jax.grad(log_psi, argnums=2)(params, x, nuclei)  # (M, 3)
    return jnp.concatenate([f_zv.ravel(), d.ravel(), (e_l * d).ravel(), e_l[None]])

  return terms


def reduce_forces(values: jax.Array) -> jax.Array:
  """One sweep's force estimate (3 M,), Ha/bohr, from its walkers' `force_terms` (B, 9 M + 1):
  mean zero-variance force - 2 Cov(E_L, d log|psi| / dR), the covariance over the walkers
  whose terms are all finite (with Bessel's correction)."""
  mean, n = finite_rows_mean(values)
  k = (values.shape[1] - 1) // 3
  f_zv, d, e_d, e = mean[:k], mean[k:2 * k], mean[2 * k:3 * k], mean[-1]
  covariance = (e_d - e * d) * n / jnp.maximum(n - 1, 1)
  return f_zv - 2.0 * covariance


def finite_rows_mean(values: jax.Array) -> tuple:
  """(mean over the rows of values (B, k) that are finite throughout, their number)."""
  ok = jnp.all(jnp.isfinite(values), axis=1)
  n = jnp.sum(ok)
  return jnp.sum(jnp.where(ok[:, None], values, 0), axis=0) / jnp.maximum(n, 1), n


WARP_STEP = 0.01  # bohr: nuclear displacement of the finite differences of 'forces_warp'.


def warp_weights(r: jax.Array, atoms: jax.Array) -> jax.Array:
  """Space-warp weights omega_I(r) = |r - R_I|^-4 / sum_J |r - R_J|^-4, (M,) for one
  electron at r (3,): 1 at its own nucleus, so an electron there moves rigidly with it."""
  return jax.nn.softmax(-2.0 * jnp.log(jnp.sum((r[None] - atoms) ** 2, axis=-1)))


def space_warp(x: jax.Array, atoms: jax.Array, moved_atoms: jax.Array) -> tuple:
  """(x' (3N,), log det dx'/dx ()): the space warp of Filippi & Umrigar (Phys. Rev. B 61,
  R16291 (2000)) of one configuration x (3N,) when the nuclei move from atoms to
  moved_atoms (M, 3), bohr: each electron r -> r + sum_I omega_I(r) (R'_I - R_I). An
  electron's image depends on its own position only, so the Jacobian is block diagonal and
  its determinant the product of the electrons' 3x3 ones. NaN where an electron's
  determinant is not positive: there the warp folds space onto itself, is not one-to-one,
  and no change of variables holds (two nuclei alone: at their midpoint once their distance
  D shrinks by more than D / 4, the warp's derivative there along the bond being
  1 + 4 dD / D)."""
  delta = moved_atoms - atoms
  warp = lambda ri: ri + warp_weights(ri, atoms) @ delta  # noqa: E731
  r = x.reshape(-1, 3)
  sign, log_jacobian = jnp.linalg.slogdet(jax.vmap(jax.jacfwd(warp))(r))  # (N,)
  return (jax.vmap(warp)(r).reshape(-1),
          jnp.where(jnp.all(sign > 0), jnp.sum(log_jacobian), jnp.nan))


def warped_log_weight(log_psi: Callable, params, x: jax.Array, atoms: jax.Array,
                      moved_atoms: jax.Array, log_psi_x: Optional[jax.Array] = None) -> tuple:
  """(x' (3N,), log w ()): the configuration x (3N,) sampled from |psi_R|^2 warped to the
  nuclei moved_atoms (space_warp), and the log of its correlated-sampling weight
  w = |psi_R'(x')|^2 / |psi_R(x)|^2 |dx'/dx| (NaN where the warp folds, space_warp).
  log_psi(params, x, atoms) -> log|psi|;
  log_psi_x: log|psi_R(x)| if already known."""
  moved, log_jacobian = space_warp(x, atoms, moved_atoms)
  if log_psi_x is None:
    log_psi_x = log_psi(params, x, atoms)
  return moved, 2.0 * (log_psi(params, moved, moved_atoms) - log_psi_x) + log_jacobian


def warped_energy_terms(log_psi: Callable, ham: hamiltonian.Hamiltonian,
                        step: float = WARP_STEP) -> Callable:
  """Per-configuration terms of forces by central finite differences of correlated-sampling
  energies with the space warp (`warped_log_weight`): for each displacement Delta of one
  nucleus along one axis by +-step, E(R + Delta) = <w E_L'> / <w> over the walkers of
  |psi|^2, E_L' the local energy at the warped configuration and moved nuclei.
  (params, x) -> (12 M,): w (6 M,) and w E_L' (6 M,), displacements ordered +step for each
  (nucleus, axis), then -step. Costs 6 M local energies per configuration; an independent
  check of 'forces'."""
  _no_ecp(ham)
  atoms = np.asarray(ham.positions, np.float64)
  m = len(atoms)
  plus = step * np.eye(3 * m).reshape(3 * m, m, 3)
  displacements = np.concatenate([plus, -plus])  # (6 M, M, 3)
  local_energy = ham.local_energy_at(log_psi)

  def terms(params, x):
    nuclei = jnp.asarray(atoms, x.dtype)
    log_psi_x = log_psi(params, x, nuclei)

    def displaced(delta):
      moved, log_w = warped_log_weight(log_psi, params, x, nuclei, nuclei + delta, log_psi_x)
      w = jnp.exp(log_w)
      return w, w * local_energy(params, moved, nuclei + delta)

    w, w_e = jax.vmap(displaced)(jnp.asarray(displacements, x.dtype))
    return jnp.concatenate([w, w_e])

  return terms


def reduce_warped_forces(values: jax.Array, step: float = WARP_STEP) -> jax.Array:
  """One sweep's forces (3 M,), Ha/bohr, from its walkers' `warped_energy_terms` (B, 12 M):
  -(E(R + Delta) - E(R - Delta)) / (2 step), each energy the weighted mean over the
  walkers whose terms are all finite."""
  mean, _ = finite_rows_mean(values)
  k = values.shape[1] // 2
  energies = mean[k:] / mean[:k]  # (6 M,)
  return -(energies[:k // 2] - energies[k // 2:]) / (2.0 * step)


def force_labels(system: systems.System) -> tuple:
  """'<symbol><index> <axis>' for every nucleus and axis, e.g. 'H0 x'."""
  return tuple(f'{s}{i} {a}' for i, s in enumerate(system.symbols) for a in 'xyz')


def report_forces(run_dir: str, values, errors) -> str:
  """Force on each nucleus, Ha/bohr, with standard errors, and their sum (zero in
  expectation: the energy does not change when the molecule is translated)."""
  del run_dir
  f, e = np.reshape(values, (-1, 3)), np.reshape(errors, (-1, 3))
  nuclei = '; '.join(f'nucleus {i}: ' + ', '.join(f'{a} {v:+.5f} +- {s:.5f}'
                                                  for a, v, s in zip('xyz', fi, ei))
                     for i, (fi, ei) in enumerate(zip(f, e)))
  total = ', '.join(f'{v:+.5f}' for v in np.sum(f, axis=0))
  return f'{nuclei} Ha/bohr; sum over nuclei ({total})'


RADIAL_LABELS = tuple(f'{0.5 * (a + b):.4g}' for a, b in zip(RADIAL_EDGES[:-1], RADIAL_EDGES[1:]))


def density(network, system: systems.System, ham: hamiltonian.Hamiltonian) -> Estimator:
  """The radial profile for an atom (density.csv), a grid for a molecule (density.cube)."""
  del ham
  if len(system.charges) == 1:
    return Estimator(radial_density(network.apply, system), RADIAL_LABELS,
                     report=report_density)
  grid = density_grid(system)
  return Estimator(grid_indices(system, grid), ('grid',),
                   functools.partial(grid_histogram, grid=grid),
                   functools.partial(write_cube, system=system, grid=grid), accumulate=True)


OBSERVABLES = {
    's2': Observable(lambda net, system, ham, node_cutoff: Estimator(
        spin_squared(net.apply, system), ('S^2',)), ''),
    'dipole': Observable(lambda net, system, ham, node_cutoff: Estimator(
        dipole(net.apply, system), ('x', 'y', 'z')), 'e bohr'),
    'density': Observable(lambda net, system, ham, node_cutoff: density(net, system, ham),
                          'bohr^-3'),
    'forces': Observable(lambda net, system, ham, node_cutoff: Estimator(
        force_terms(net.log_psi, ham, node_cutoff), force_labels(system), reduce_forces,
        report_forces), 'Ha/bohr'),
    'forces_warp': Observable(lambda net, system, ham, node_cutoff: Estimator(
        warped_energy_terms(net.log_psi, ham), force_labels(system),
        reduce_warped_forces, report_forces), 'Ha/bohr'),
}
