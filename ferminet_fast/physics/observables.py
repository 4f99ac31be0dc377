"""Observables besides the energy, estimated at walkers sampled from |psi|^2.

Each observable is a function of ONE configuration, (params, x (3N,)) -> values (k,), whose
mean over |psi|^2 is the expectation value; evaluation averages it over walkers and sweeps
and reblocks each component. Chosen by name from `OBSERVABLES`.

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
"""

import os
from typing import Callable, NamedTuple, Optional

from ferminet_fast import InputError
import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import systems

DEBYE_PER_AU = 2.541746473  # 1 e bohr in debye (CODATA 2018).


class Observable(NamedTuple):
  make: Callable  # (apply, system) -> (params, x (3N,)) -> values (k,)
  labels: tuple  # Names of the k components.
  unit: str
  # (run_dir, values (k,), errors (k,)) -> a summary line, writing any files of its own;
  # None: the line lists every component.
  report: Optional[Callable] = None


def spin_squared(apply: Callable, system: systems.System) -> Callable:
  """<S^2> estimator for `apply(params, x) -> (sign, log|psi|)`; see the module docstring."""
  n_up, n_down = system.n_up, system.n_down
  s_z = 0.5 * (n_up - n_down)
  pairs = np.array([(i, j) for i in range(n_up) for j in range(n_up, n_up + n_down)],
                   dtype=np.int32).reshape(-1, 2)

  def estimate(params, x):
    sign, log_abs = apply(params, x)
    r = x.reshape(-1, 3)

    def exchanged(pair):
      i, j = pair[0], pair[1]
      swapped = r.at[i].set(r[j]).at[j].set(r[i])
      sign_s, log_s = apply(params, swapped.reshape(-1))
      return sign_s * sign * jnp.exp(log_s - log_abs)

    exchange = jnp.sum(jax.vmap(exchanged)(pairs)) if len(pairs) else 0.0
    return jnp.reshape(s_z * (s_z + 1) + n_down - exchange, (1,)).astype(x.dtype)

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


OBSERVABLES = {
    's2': Observable(spin_squared, ('S^2',), ''),
    'dipole': Observable(dipole, ('x', 'y', 'z'), 'e bohr'),
    'density': Observable(radial_density, tuple(f'{0.5 * (a + b):.4g}' for a, b in
                                                 zip(RADIAL_EDGES[:-1], RADIAL_EDGES[1:])),
                          'bohr^-3', report_density),
}

