"""physics/equation_of_state.py: the Birch-Murnaghan fit recovers an exact Birch-Murnaghan
E(V), converges to the analytic minimum and bulk modulus of the Hartree-Fock electron gas
as the scan narrows, and its bootstrap errors cover the truth as often as they claim."""

import numpy as np
import pytest

from ferminet_fast.physics import equation_of_state as eos

# The unpolarised electron gas in Hartree-Fock, per electron (Ha): kinetic 3 k_F^2 / 10 and
# exchange -3 k_F / (4 pi), k_F = (9 pi / 4)^(1/3) / r_s.
K_F = (9 * np.pi / 4) ** (1 / 3)
A, B = 0.3 * K_F ** 2, 0.75 * K_F / np.pi


def birch_murnaghan(volume, e0, v0, b0, b0_prime):
  """E(V) of Birch and Murnaghan, third order, as usually written."""
  x = (v0 / volume) ** (2 / 3)
  return e0 + 9 * v0 * b0 / 16 * ((x - 1) ** 3 * b0_prime + (x - 1) ** 2 * (6 - 4 * x))


def test_an_exact_birch_murnaghan_curve_is_recovered():
  e0, v0, b0, b0_prime, v1 = -10.0, 500.0, 0.01, 4.5, 480.0  # Ha, bohr^3, Ha/bohr^3.
  scales = np.linspace(0.95, 1.1, 7)
  energies = birch_murnaghan(v1 * scales ** 3, e0, v0, b0, b0_prime)
  fit = eos.equation_of_state(scales, energies, np.full(7, 1e-4), v1)
  assert fit['minimum'] and fit['inside'] and fit['chi2_dof'] < 1e-9
  assert fit['energy'] == pytest.approx(e0, abs=1e-9)
  assert fit['volume_bohr3'] == pytest.approx(v0, rel=1e-9)
  assert fit['scale'] == pytest.approx((v0 / v1) ** (1 / 3), rel=1e-9)
  assert fit['bulk_modulus_gpa'] == pytest.approx(b0 * eos.GPA_PER_HA_BOHR3, rel=1e-9)
  assert fit['bulk_modulus_derivative'] == pytest.approx(b0_prime, rel=1e-9)


def test_the_electron_gas_minimum_is_approached_as_the_scan_narrows():
  """Hartree-Fock jellium, E = A / r_s^2 - B / r_s, is not of the fitted form: its minimum
  (r_s = 2 A / B = 4.82 bohr) and bulk modulus (E'' / (12 pi r_s) at the minimum,
  Ha/bohr^3) are approached as the scan about it narrows, the minimum faster than the
  curvature (the form's first missing term, f^4, shifts it at higher order)."""
  r0 = 2 * A / B
  bulk = (6 * A / r0 ** 4 - 2 * B / r0 ** 3) / (12 * np.pi * r0) * eos.GPA_PER_HA_BOHR3
  misses = []
  for width in (0.2, 0.1, 0.05):
    rs = r0 * np.linspace(1 - width, 1 + width, 7)
    fit = eos.equation_of_state(rs / rs[0], A / rs ** 2 - B / rs, np.full(7, 1e-7),
                                4 * np.pi / 3 * rs[0] ** 3)
    misses.append((abs(fit['scale'] * rs[0] / r0 - 1), abs(fit['energy'] + B ** 2 / (4 * A)),
                   abs(fit['bulk_modulus_gpa'] / bulk - 1)))
  misses = np.array(misses)
  assert np.all(misses[1:] < misses[:-1] / 3)  # Each halving of the width: at least 3x.
  assert misses[1, 0] < 1e-3 and misses[1, 2] < 0.03  # At +-10%: r_s, B0.


def test_the_errors_cover_the_truth_as_often_as_they_claim():
  """Energies drawn within their errors about an exact curve: the fitted minimum lies
  within 1.96 of its errors of the true one in 95% of the draws (3 binomial sigmas)."""
  v1, truth = 480.0, (-10.0, 500.0, 0.01, 4.5)
  scales = np.linspace(0.95, 1.1, 6)
  exact = birch_murnaghan(v1 * scales ** 3, *truth)
  rng = np.random.default_rng(1)
  s0 = (truth[1] / v1) ** (1 / 3)
  covered = []
  for seed in range(300):
    fit = eos.equation_of_state(scales, exact + 2e-4 * rng.normal(size=6), np.full(6, 2e-4),
                                v1, seed=seed)
    covered.append(abs(fit['scale'] - s0) <= 1.96 * fit['scale_error'])
  assert abs(np.mean(covered) - 0.95) < 3 * np.sqrt(0.95 * 0.05 / 300)


def test_a_curve_without_a_minimum_or_with_too_few_sizes():
  """No minimum (kinetic energy alone), energies that cannot be fitted (a NaN, an error of
  zero) and too few sizes are said, not fitted."""
  scales = np.linspace(1.0, 1.5, 5)
  fit = eos.equation_of_state(scales, 1.0 / scales ** 2, np.full(5, 1e-3))
  assert fit['minimum'] is False and 'scale' not in fit and 'no minimum' in fit['why']
  for energies, errors in (([1.0, np.nan, 0.5, 0.4, 0.3], np.full(5, 1e-3)),
                           (1.0 / scales ** 2, [1e-3, 0.0, 1e-3, 1e-3, 1e-3])):
    fit = eos.equation_of_state(scales, energies, errors)
    assert fit['minimum'] is False and 'not finite' in fit['why']
  assert eos.equation_of_state(scales[:4], 1.0 / scales[:4] ** 2, np.full(4, 1e-3)) is None
