"""Reblocking error bars against the analytic error of an AR(1) series."""

import numpy as np

from ferminet_fast.vmc import stats


def ar1(phi, n, seed):
  rng = np.random.default_rng(seed)
  eps = rng.normal(size=n)
  x = np.empty(n)
  x[0] = eps[0] / np.sqrt(1 - phi**2)
  for t in range(1, n):
    x[t] = phi * x[t - 1] + eps[t]
  return x


def test_ar1_error_matches_analytic():
  """x_t = phi x_{t-1} + e_t: var = 1/(1-phi^2), tau = (1+phi)/(1-phi)."""
  phi, n = 0.8, 2**16
  analytic = np.sqrt(1 / (1 - phi**2) * (1 + phi) / (1 - phi) / n)
  errors = [stats.reblock(ar1(phi, n, seed)).error for seed in range(5)]
  np.testing.assert_allclose(np.mean(errors), analytic, rtol=0.15)
  tau = stats.reblock(ar1(phi, n, 9)).tau
  assert 0.6 * 9 < tau < 1.4 * 9


def test_uncorrelated_series_keeps_the_naive_error():
  x = np.random.default_rng(0).normal(size=4096)
  est = stats.reblock(x)
  np.testing.assert_allclose(est.error, x.std(ddof=1) / np.sqrt(x.size), rtol=0.2)
  assert est.mean == x.mean()


def test_a_series_too_short_for_its_correlation_is_flagged():
  """A long AR(1) series reaches the plateau (the criterion is met); a ramp, correlated over
  its whole length, never does: its blocked error grows as the square root of the block
  length, so B^3 > 2 n B^2 would need blocks longer than twice the series. Its error is
  then that of the longest blocks, flagged plateau=False, as is a single sample's."""
  assert stats.reblock(ar1(0.8, 2**14, 3)).plateau
  ramp = stats.reblock(np.arange(256.0))
  assert not ramp.plateau and ramp.block_size == 128 and np.isfinite(ramp.error)
  assert not stats.reblock([1.0]).plateau
