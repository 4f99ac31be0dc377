"""The closing line of a run: the reblocked energy with its error bar, and none claimed when
the run was too short to reblock."""

from ferminet_fast.stages import report
from ferminet_fast.vmc import stats


def _line(series, exact):
  estimate = stats.reblock(series)
  result = report.Result(estimate, exact, {}, {}, None, '/tmp/run')
  return report.final_line(result, 100)


def test_energy_line_gives_the_reblocked_error_and_the_error_against_exact():
  series = [-2.90, -2.91, -2.89, -2.90]
  error = stats.reblock(series).error
  line = _line(series, exact=-2.903724)
  assert line.startswith(f'Energy -2.900000 +- {error:.6f} Ha (last 4 of 100 steps, reblocked')
  assert line.endswith(f'| exact -2.903724 Ha | error +3.72 +- {1e3 * error:.2f} mHa')


def test_one_sample_gives_no_error_bar_rather_than_nan():
  line = _line([-2.90], exact=-2.903724)
  assert 'nan' not in line.lower() and 'too few for an error bar' in line
  assert line.endswith('error +3.72 mHa')
  assert 'nan' not in _line([-2.90], exact=None).lower()
