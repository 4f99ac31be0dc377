"""The equation of state of a periodic system from its energies at several sizes of its cell
(a scan of the cell, config.system.scan.cell): the Birch-Murnaghan form, third order in the
Eulerian strain f = ((s0 / s)^2 - 1) / 2 of the cell's length scale s (F. Birch, Phys. Rev.
71, 809 (1947)),

  E(s) = E0 + a2 f^2 + a3 f^3,

which is a cubic polynomial in u = 1 / s^2, so it is fitted by weighted linear least squares
(weights 1 / error^2) and its minimum s0 found as a root. In three periodic dimensions
a2 = 9 V0 B0 / 2 and a3 = a2 (B0' - 4), with V0 the cell's volume at s0, B0 the bulk modulus
and B0' its pressure derivative: the usual E(V) of Birch and Murnaghan. A chain's or a
slab's fit gives its minimum alone (their cells have no volume to compress).

Errors are the spread of the same fit to the energies redrawn within their errors
(parametric bootstrap, SAMPLES draws), which carries the nonlinear map from the coefficients
to s0, E0 and B0, over the draws whose fit has a minimum (a fraction found_in of them: well
below 1, the minimum is barely resolved and the errors understate it); chi^2 per degree of
freedom says whether the form fits within the errors.
"""

from typing import Optional

import numpy as np

SAMPLES = 2000  # Redrawn energy sets of the bootstrap.
MIN_POINTS = 5  # The four coefficients and one degree of freedom to judge the fit by.
GPA_PER_HA_BOHR3 = 29421.02648438959  # 1 Ha / bohr^3 in GPa (CODATA 2018).


def fit_cubic(scales, energies, errors) -> tuple:
  """(the weighted least-squares map M (4, G) from energies (G,) to coefficients, chi^2
  per degree of freedom of `energies`)."""
  u = np.asarray(scales, np.float64) ** -2.0
  w = 1.0 / np.asarray(errors, np.float64)
  design = np.vander(u, 4, increasing=True)
  m = np.linalg.pinv(design * w[:, None]) * w[None, :]
  e = np.asarray(energies, np.float64)
  residual = (design @ (m @ e) - e) * w
  return m, float(residual @ residual / max(len(e) - 4, 1))


def minimum(c: np.ndarray) -> tuple:
  """(u0, E0, a2, a3) at the minimum of each cubic c (..., 4) in u, NaN where it has none:
  the root of c1 + 2 c2 u + 3 c3 u^2 where the curvature is positive. With u = u0 (1 + 2f),
  a2 = 2 u0^2 E''(u0) and a3 = 8 u0^3 c3."""
  c0, c1, c2, c3 = np.moveaxis(np.asarray(c, np.float64), -1, 0)
  with np.errstate(invalid='ignore', divide='ignore'):
    root = np.sqrt(c2 ** 2 - 3 * c3 * c1)
    # The root of positive curvature 2 c2 + 6 c3 u = 2 root, written to keep its precision
    # as c3 -> 0 (then u0 -> -c1 / (2 c2)).
    u0 = np.where(c2 > 0, -c1 / (c2 + root), (root - c2) / (3 * c3))
  u0 = np.where(np.isfinite(u0) & (u0 > 0) & (root > 0), u0, np.nan)
  e0 = c0 + c1 * u0 + c2 * u0 ** 2 + c3 * u0 ** 3
  return u0, e0, 2 * u0 ** 2 * (2 * c2 + 6 * c3 * u0), 8 * u0 ** 3 * c3


def equation_of_state(scales, energies, errors, volume: Optional[float] = None,
                      seed: int = 0) -> Optional[dict]:
  """The fitted equation of state of energies (G,) Ha with their errors at the cell's scales
  (G,); `volume`: the cell's volume at scale 1, bohr^3, in three periodic dimensions (None
  otherwise). None with fewer than MIN_POINTS sizes. Keys: scale (s0), energy (E0, Ha) and
  with `volume` volume_bohr3 (V0), bulk_modulus_gpa (B0) and bulk_modulus_derivative (B0'),
  each beside its `<key>_error`; coefficients (c0..c3, Ha, of the cubic in 1 / scale^2);
  chi2_dof; inside (s0 within the scanned scales); minimum (False, with `why`, where the
  fit to the energies themselves has none or they cannot be fitted: the rest is then
  absent); found_in (the fraction of redrawn sets whose fit has a minimum: the errors are
  the spread over those, None with fewer than two)."""
  if len(scales) < MIN_POINTS:
    return None
  energies, errors = np.asarray(energies, np.float64), np.asarray(errors, np.float64)
  form = {'form': 'Birch-Murnaghan, third order in the Eulerian strain', 'points': len(scales)}
  if not (np.all(np.isfinite(energies)) and np.all(np.isfinite(errors)) and np.all(errors > 0)):
    return {**form, 'minimum': False, 'why': 'an energy or its error is not finite, or an '
                                               'error is zero'}
  m, chi2 = fit_cubic(scales, energies, errors)
  coefficients = m @ energies
  drawn = energies + np.random.default_rng(seed).normal(size=(SAMPLES, len(scales))) * errors
  central, spread = _derived(coefficients, volume), _derived(drawn @ m.T, volume)
  found = np.isfinite(spread['scale'])
  out = {**form, 'coefficients': coefficients.tolist(), 'chi2_dof': chi2,
         'found_in': float(found.mean()), 'minimum': bool(np.isfinite(central['scale']))}
  if not out['minimum']:
    return {**out, 'why': 'the fitted curve has no minimum'}
  for key, value in central.items():
    out[key] = float(value)
    out[key + '_error'] = float(np.std(spread[key][found], ddof=1)) if found.sum() > 1 else None
  out['inside'] = bool(min(scales) <= out['scale'] <= max(scales))
  return out


def _derived(c: np.ndarray, volume: Optional[float]) -> dict:
  """s0, E0 and (with `volume`) V0, B0 and B0' of the cubics c (..., 4)."""
  u0, e0, a2, a3 = minimum(c)
  out = {'scale': u0 ** -0.5, 'energy': e0}
  if volume is not None:
    v0 = volume * out['scale'] ** 3
    out.update(volume_bohr3=v0, bulk_modulus_gpa=2 * a2 / (9 * v0) * GPA_PER_HA_BOHR3,
               bulk_modulus_derivative=4 + a3 / a2)
  return out
