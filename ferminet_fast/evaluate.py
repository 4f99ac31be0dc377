"""Evaluation: the energy (and other observables) of a trained wavefunction with honest
error bars.

  python -m ferminet_fast.evaluate --run runs/li [--steps 4000] [--walkers 1024]
                                   [--observables s2,dipole]
  python -m ferminet_fast.evaluate --twist_average runs/t0,runs/t1 [--out twists.json]

Loads the run's config and newest checkpoint, takes its parameters (by default their
moving average over the last updates, config.optim.average_fraction; `--parameters last`
for the last ones) and freezes them, equilibrates the walkers with the move width fixed,
then records the mean local energy of every MCMC sweep for `--steps` sweeps (default:
the run's config.evaluation) of training's walkers, or of `--walkers` (per geometry of a
set) cycled from them and equilibrated by the burn-in, and the walker mean of
each requested observable (physics/observables.py). Each estimate is the reblocked mean
with its standard error and integrated autocorrelation time, written to <run>/eval.json.
A set of geometries is evaluated at each one (its own chain and nuclei, the same
parameters) into <run>/pes.json with the correlated differences of adjacent ones and
`--reference`'s pyscf curve, or for a scan of a cell its fitted equation of state
(physics/equation_of_state.py); <run>/plots/pes.png draws it (matplotlib).
`--twist_average` averages the evaluated runs of one periodic system at several twists
(stages/twists.py) into one JSON file.
"""

import os
import time
from typing import Optional, Sequence

import numpy as np

from ferminet_fast import config, plot
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import optim
from ferminet_fast.runtime import checkpoint, cli, rundir, watchdog
from ferminet_fast.stages import evaluation, trained, twists
from ferminet_fast.vmc import stats

PARAMETERS = config.PARAMETERS


def evaluate(run_dir: str, steps: Optional[int] = None, burn_in: Optional[int] = None,
             quiet: bool = False, seed: int = 1, observables: Sequence[str] = (),
             parameters: str = 'average', reference: str = '',
             node_cutoff: Optional[float] = None,
             walkers: Optional[int] = None) -> stats.Estimate:
  """Evaluates the newest checkpoint of run_dir; returns the energy estimate and writes
  eval.json. steps, burn_in: sweeps recorded and discarded; None takes the run's
  config.evaluation. observables: names from observables.OBSERVABLES, estimated too.
  parameters: 'average' (the moving average of the parameters, optim.averaged) or 'last'.
  reference: a set of geometries' pyscf reference, 'METHOD/BASIS' (physics/references.py).
  node_cutoff: the forces' node regularisation (bohr, physics/observables.py); None takes the
  run's config.forces.node_cutoff. walkers: the chains' walkers (per geometry of a set), None
  for training's; more give smaller error bars in the same sweeps, at their cost.
  A sweep that stops completing ends the process (runtime/watchdog.py, exit status 4)."""
  say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
  if not checkpoint.has_checkpoint(run_dir):
    raise InputError(f'--run {run_dir!r} holds no checkpoint to evaluate')
  cfg, steps, burn_in, ctx = evaluation.settings(rundir.read_config(run_dir), steps, burn_in,
                                                 node_cutoff, walkers)
  run = trained.TrainedRun.load(run_dir, cfg, parameters, ctx, say)
  built, system, state, which, trained_step = (run.built, run.built.system, run.state,
                                               run.parameters, run.trained_step)
  stack = built.parts.geometries  # A set of geometries (None: one).
  chosen_reference = evaluation.reference_of(reference, system)
  chosen = evaluation.estimators(observables, built.network, system, built.parts.hamiltonian,
                                 cfg.forces.node_cutoff)
  if parameters == 'average' and which == 'last':
    say(f'Step {trained_step} of {run_dir} holds no average of the parameters: evaluating '
        'the last ones')
  state = evaluation.with_key(state, seed)
  horizon = (optim.average_horizon(state.opt_state, cfg.optim.average_fraction)
             if which == 'average' else 1.0)  # Read now: the sweeps consume the state.
  move, sweep = evaluation.sweep_functions(built.parts, chosen, system.states, stack)
  # Compiled before the clock starts, under the watchdog with its clock held (the
  # compilation is not a sweep; on the CPU a deadlock while lowering still ends the process
  # with a report), then every sweep is watched (runtime/watchdog.py).
  with watchdog.for_stage('evaluation', cfg.watchdog, cli.EXIT_STALLED, run_dir) as watch:
    with watch.paused('compiling the sweeps'):
      sweep = evaluation.compiled(sweep, state)
      move = evaluation.compiled(move, state) if burn_in else None
    t0 = time.perf_counter()
    series = evaluation.run_sweeps(move, sweep, state, steps, burn_in, chosen, watch)
  wall = time.perf_counter() - t0
  estimate, estimates = evaluation.report(series, chosen, system, run_dir, say)
  exact = system.exact_reported_energy
  result = {'energy': estimate.mean, 'error': estimate.error, 'tau': estimate.tau,
            'block_size': estimate.block_size, 'error_plateau': estimate.plateau,
            'steps': steps, 'burn_in': burn_in,
            'batch_size': cfg.batch_size, 'mcmc_steps_per_sweep': cfg.mcmc.steps,
            'checkpoint_step': trained_step, 'parameters': which,
            'average_updates': horizon,
            'pmove': float(np.mean(series.pmoves)), 'exact_energy': exact,
            **({'node_cutoff': cfg.forces.node_cutoff} if 'forces' in observables else {}),
            'error_mha': None if exact is None else 1e3 * (estimate.mean - exact),
            'wall_s': wall, **estimates}
  rundir.write_json(os.path.join(run_dir, 'eval.json'), result)
  if stack is not None:  # The surface: each geometry's energy (pes.json), and its curve.
    path = evaluation.write_surface(run_dir, system, result, cfg.batch_size,
                                    chosen_reference, say)
    say(f'Wrote {path}' + ''.join(f' and {p}' for p in plot.plot_surface(run_dir, True)))
  say(evaluation.summary(result, system.states))
  return estimate


def main(argv) -> None:
  f = cli.stage_flags(argv)
  with cli.exit_on_error():
    if (f.run is None) == (f.twist_average is None):
      raise InputError('give either --run (one run to evaluate) or --twist_average (evaluated '
                       'runs to average over their twists)')
    if f.twist_average is not None:
      twists.write([d.strip() for d in f.twist_average.split(',') if d.strip()], f.out)
      return
    names = [n.strip() for n in (f.observables or '').split(',') if n.strip()]
    evaluate(f.run, f.steps, f.burn_in, seed=f.seed, observables=names,
             parameters=f.parameters, reference=f.reference, node_cutoff=f.node_cutoff,
             walkers=f.walkers)


def run() -> None:
  from absl import app, flags
  flags.DEFINE_string('run', None, 'Run directory (with checkpoints) to evaluate.')
  flags.DEFINE_string('twist_average', None, 'Comma-separated run directories of one periodic '
                      'system at different twists, each evaluated already: their energies '
                      'averaged (equal weights) into --out instead of evaluating a run.')
  flags.DEFINE_string('out', 'twist_average.json', 'The JSON file --twist_average writes.')
  flags.DEFINE_integer('steps', None, 'MCMC sweeps whose energies are recorded '
                       "(default: the run's config.evaluation.steps).")
  flags.DEFINE_integer('burn_in', None, 'Sweeps discarded before recording '
                       "(default: the run's config.evaluation.burn_in).")
  flags.DEFINE_integer('seed', 1, 'Seed of the evaluation chain.', lower_bound=config.SEEDS[0],
                       upper_bound=config.SEEDS[1])
  flags.DEFINE_integer('walkers', None, "Walkers of the evaluation (per geometry of a set), "
                       "cycled from training's last ones (default: training's batch).")
  flags.DEFINE_string('parameters', 'average', "'average': the parameters averaged over the "
                      "last updates (the run's config.optim.average_fraction); 'last': the "
                      'parameters of the last update.')
  flags.DEFINE_string('reference', '', "A set of geometries' reference curve from pyscf, "
                      "'METHOD/BASIS' (hf, ccsd, ccsd(t), fci, nevpt2; 'cc-pv[q5]z': to the basis "
                      'limit).')
  flags.DEFINE_string('observables', '', 'Comma-separated observables besides the energy: s2 '
                      "(<S^2>), dipole (e bohr), density (an atom's radial profile to density.csv"
                      "; a molecule's on a grid to density.cube), forces (Ha/bohr, zero-variance "
                      'zero-bias), forces_warp (by space-warp finite differences: a check).')
  flags.DEFINE_float('node_cutoff', None, "bohr: the forces' node regularisation, 0 for none "
                     "(default: the run's config.forces.node_cutoff).")
  app.run(main, flags_parser=cli.parse_stage_flags)


if __name__ == '__main__':
  run()
