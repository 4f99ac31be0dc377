"""Error bars for correlated Monte Carlo series: reblocking (Flyvbjerg & Petersen 1989)."""

from typing import NamedTuple

import numpy as np


class Estimate(NamedTuple):
  mean: float
  error: float  # Standard error of the mean, corrected for autocorrelation.
  tau: float  # Integrated autocorrelation time in samples, (error / naive error)^2.
  n: int  # Number of samples.
  block_size: int  # Block length at which the error was read off.
  # Whether a block length met the criterion, so that the error was read where it levels
  # off; False for a series too short for its correlation time: the error is then that of
  # the longest blocks, two or three of them, and most likely an underestimate.
  plateau: bool = True


def reblock(series) -> Estimate:
  """Mean and standard error of a correlated series.

  The series is repeatedly halved by averaging neighbouring pairs; the standard
  error of the blocked series rises until blocks are longer than the correlation
  time, then plateaus. The block size is the smallest B with
  B^3 > 2 n (err_B / err_1)^4 (Lee, Conduit, Nemec, Lopez Rios and Drummond, Phys. Rev.
  E 83, 066706 (2011), as in pyblock), and the error is the one measured at that level.
  Where no level meets it, the error of the last level is returned with plateau=False.
  """
  x = np.asarray(series, dtype=np.float64)
  n = x.size
  if n == 0:
    raise ValueError('reblock needs at least one sample')
  mean = float(x.mean())
  if n < 2:
    return Estimate(mean, float('nan'), float('nan'), n, 1, False)
  levels = []  # (block size, standard error, number of blocks)
  block, y = 1, x
  while y.size >= 2:
    levels.append((block, float(np.std(y, ddof=1) / np.sqrt(y.size)), y.size))
    if y.size < 4:
      break
    m = y.size // 2
    y = 0.5 * (y[:2 * m:2] + y[1:2 * m:2])
    block *= 2
  err0 = levels[0][1]
  if err0 == 0:
    met = [levels[0]]
  else:
    met = [lvl for lvl in levels if lvl[0] ** 3 > 2 * n * (lvl[1] / err0) ** 4]
  chosen = met[0] if met else levels[-1]
  error = chosen[1]
  tau = (error / err0) ** 2 if err0 > 0 else 1.0
  return Estimate(mean, error, float(tau), n, chosen[0], bool(met))


def final_estimate(energies, fraction: float, drawn_only: bool = False) -> Estimate:
  """The reblocked mean of the last `fraction` of a run's step energies (at least one);
  NaN with n = 0 for an empty run. `drawn_only`: the NaN of the steps that did not sample
  this energy (a geometry not drawn, optim.geometries_per_step) are left out of that last
  fraction."""
  energies = np.asarray(energies, float)
  last = energies[-max(1, int(round(fraction * len(energies)))):] if len(energies) else energies
  if drawn_only:
    last = last[~np.isnan(last)]
  if not len(last):
    return Estimate(float('nan'), float('nan'), float('nan'), 0, 1, False)
  return reblock(last)
