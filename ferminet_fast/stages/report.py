"""What a finished (or stopped) run reports: the final energy estimate with its error bar,
timings.json's totals, result.json and the closing lines."""

import math
import resource
import time
from typing import NamedTuple, Optional

from ferminet_fast.physics import systems
from ferminet_fast.runtime import context
from ferminet_fast.vmc import stats


class Result(NamedTuple):
  estimate: stats.Estimate  # Energy (Ha) over the last `log.final_fraction` of training.
  exact_energy: Optional[float]  # Ha, if known.
  history: dict  # Column -> (steps recorded,) array, as in stats.csv.
  timings: dict  # As in timings.json.
  state: object  # step.TrainState after the last step.
  run_dir: str
  stopped_by: Optional[str] = None  # Name of the signal that stopped training early.
  # Over a set of geometries, each one's estimate (as `estimate`, which is then their mean).
  geometries: Optional[list] = None
  # The step at which training stopped at its time budget (optim.seconds), or None.
  budget_step: Optional[int] = None

  @property
  def error_mha(self) -> Optional[float]:
    return None if self.exact_energy is None else 1e3 * (self.estimate.mean - self.exact_energy)


def final_line(result: Result, iterations: int) -> str:
  est = result.estimate
  if math.isfinite(est.error):
    line = (f'Energy {est.mean:.6f} +- {est.error:.6f} Ha (last {est.n} of {iterations} '
            f'steps, reblocked, tau={est.tau:.1f})')
    spread = f' +- {1e3 * est.error:.2f}'
  else:  # Too few steps to reblock.
    line = (f'Energy {est.mean:.6f} Ha (last {est.n} of {iterations} steps, too few for an '
            'error bar)')
    spread = ''
  if result.exact_energy is not None:
    line += (f' | exact {result.exact_energy:.6f} Ha | error {result.error_mha:+.2f}'
             f'{spread} mHa')
  return line


def finish(final_fraction: float, system: systems.System, run: context.Run, out, start: int,
           t0: float) -> Result:
  """The Result of a run whose loop ended with `out` (loop.Outcome), having started at
  step `start` and at perf_counter() `t0`; the energy is the reblocked mean of the last
  `final_fraction` of the steps. Writes timings.json and result.json."""
  t, wall, timings, say, run_dir = out.steps, out.wall_s, run.timings, run.say, run.dir
  estimate = stats.final_estimate(out.history['energy'][:t], final_fraction)
  timings.update({'train_loop_s': wall, 'iterations_per_s': (t - start) / wall
                  if wall > 0 else 0.0, 'total_s': time.perf_counter() - t0,
                  'rewinds': out.rewinds,
                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
  run.save_timings()
  exact = system.exact_reported_energy
  each = None
  if system.surface is not None:
    each = [stats.final_estimate(out.history[f'energy_{g}'][:t], final_fraction,
                                 drawn_only=True) for g in range(system.geometry_count)]
  result = Result(estimate, exact, out.history, timings, out.state, run_dir, out.stopped_by,
                  each, out.budget_step)
  run.write('result.json', {
      'energy': estimate.mean, 'error': estimate.error, 'tau': estimate.tau,
      'samples': estimate.n, 'exact_energy': exact, 'states': system.states,
      'error_mha': result.error_mha, 'iterations': t, 'complete': not out.stopped_by,
      'wall_s': timings['total_s'], 'stopped_at_time_budget': out.budget_step,
      **({'geometries': [{'energy': e.mean, 'error': e.error, 'tau': e.tau, 'samples': e.n}
                         for e in each]} if each else {})})
  say(f'Trained steps {start}-{t} in {wall:.1f} s ({timings["iterations_per_s"]:.1f} it/s); '
      f'total {timings["total_s"]:.1f} s'
      + (' (stopped at the time budget, optim.seconds)' if out.budget_step is not None else ''))
  # Each step measures parameters just fitted to nearly the same walkers, so the training
  # mean runs low (tens of mHa at Ne); an evaluation freezes the parameters.
  say('The training mean below was measured while the parameters moved (biased low at '
      f'size); for a number to quote: python -m ferminet_fast.evaluate --run {run_dir}')
  say(final_line(result, t) + (f' (the sum of the {system.states} states; their energies: '
                                f'python -m ferminet_fast.evaluate --run {run_dir})'
                                if system.states > 1 else '')
      + (f' (the mean over the {len(each)} geometries)' if each else ''))
  for g, e in enumerate(each or ()):
    say(f'  geometry {g}: {e.mean:.6f} +- {e.error:.6f} Ha')
  return result
