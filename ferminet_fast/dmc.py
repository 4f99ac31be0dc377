"""Fixed-node diffusion Monte Carlo on a trained run (fixed-phase in a cell at a twist): the
energy below VMC, within the network's nodes (or phase).

  python -m ferminet_fast.dmc --run runs/he [--tau 0.02,0.01,0.005] [--steps 2000]
                                            [--moves electron] [--ecp_moves tmoves]
  python -m ferminet_fast.dmc --twist_average runs/t0,runs/t1 [--out dmc_twists.json]

Loads the run's config, Laplacian method, precision and newest checkpoint, takes its
parameters (averaged by default, as evaluation) and walkers, and runs DMC (diffusion/walk.py) at
each time step (by default three chosen from the system, plan.dmc_time_steps): `equilibration` steps discarded, then `steps` kept and reblocked. With two
or more time steps, E(tau) is fitted linearly and extrapolated to tau -> 0. Writes
<run>/dmc.json, <run>/dmc_stats.csv and, with matplotlib, <run>/plots/dmc_*.png. The
settings are the run's dmc.* keys (config.py), which the flags override. A stopped DMC run
(SIGTERM, SIGINT, SIGUSR1) is checkpointed in <run>/dmc and resumes when run again.
`--twist_average` runs DMC in each run of one periodic system at its twists (one run per
twist, as training makes them) and writes their equal-weight average, each twist's energy
beside it, to --out (stages/twists.py); run again after a stop, it resumes.
"""

import os
import sys
from typing import Optional

from ferminet_fast import config
from ferminet_fast.diffusion import stage
from ferminet_fast.environment import packages, signals
from ferminet_fast.errors import InputError
from ferminet_fast.runtime import cli, rundir, watchdog
from ferminet_fast.stages import twists


def dmc(run_dir: str, tau=None, steps: Optional[int] = None,
        equilibration: Optional[int] = None, batch_size: Optional[int] = None,
        parameters: Optional[str] = None, seed: int = 1, quiet: bool = False,
        handle_signals: bool = False, stop=None, moves: Optional[str] = None,
        ecp_moves: Optional[str] = None) -> dict:
  """Runs (or resumes) DMC on the run in `run_dir`; returns dmc.json's content (with
  `stopped_by` set, and no dmc.json written, when a stop signal ended it early). The
  arguments override the run's dmc.* settings (None: the run's). `stop`: an object whose
  `received` names a stop signal (tests); else the signals themselves with `handle_signals`.
  A step that stops completing ends the process (runtime/watchdog.py, exit status 4)."""
  say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
  cfg = stage.settings(run_dir, {'tau': tau, 'steps': steps, 'equilibration': equilibration,
                                     'batch_size': batch_size, 'parameters': parameters,
                                     'moves': moves, 'ecp_moves': ecp_moves})
  with signals.StopSignals(handle_signals and stop is None,
                           cfg.watchdog.signal_grace_s) as signalled:
    setup = stage.prepare(cfg, run_dir)
    progress = stage.fresh(setup, seed)
    restored = stage.resume(run_dir, progress, setup)
    d = cfg.dmc
    total = d.equilibration + d.steps
    if restored is not None:
      progress = restored
      say(f'Resuming DMC at tau = {d.tau[min(int(progress.tau_index), len(d.tau) - 1)]}, '
          f'step {int(progress.state.step)} of {total}')
    say(f'DMC of {run_dir} (step {setup.trained_step}, {setup.which} parameters): '
        f'{setup.x.shape[0]} walkers, tau {", ".join(map(str, d.tau))} Ha^-1, '
        f'{d.equilibration} + {d.steps} steps each, {d.moves} moves'
        + (f'; ECP non-local part: {d.ecp_moves}' if setup.system.has_ecp else ''))
    done = int(progress.tau_index) * total + int(progress.state.step)
    bar = stage.progress_bar(len(d.tau) * total, done, quiet)
    with watchdog.for_stage('DMC', cfg.watchdog, cli.EXIT_STALLED, run_dir) as watch:
      progress, stopped = stage.run_taus(setup, progress, run_dir, stop or signalled,
                                             watch, say, bar)
    if bar is not None:
      bar.close()
  stage.write_stats(os.path.join(run_dir, 'dmc_stats.csv'), d.tau, progress.series)
  if stopped:
    return {'stopped_by': stopped}
  result = stage.results(setup, progress)
  eval_json = os.path.join(run_dir, 'eval.json')
  if os.path.exists(eval_json):
    vmc = rundir.read_json(eval_json)
    result['vmc'] = {'energy': vmc.get('energy'), 'error': vmc.get('error')}
  rundir.write_json(os.path.join(run_dir, 'dmc.json'), result)
  stage.say_results(result, say)
  if packages.installed('matplotlib'):
    from ferminet_fast import plot
    plot.plot_dmc(run_dir)
  return result


def twist_average(run_dirs, out: str, quiet: bool = False, stop=None, **settings) -> dict:
  """DMC (as `dmc`, the same `settings`) of each run of `run_dirs`, one periodic system at
  one twist each (checked first, stages/twists.py), in turn; then their equal-weight
  average into the JSON file `out`, each twist's DMC energy beside it (its own dmc.json
  in its run). Returns the average, or {'stopped_by': ...} when a stop signal ended a
  twist's DMC (run the command again to resume)."""
  twists.check(run_dirs)
  twists.check_out(run_dirs, out)
  for run_dir in run_dirs:  # Each run's settings checked before any DMC runs.
    stage.settings(run_dir, {k: settings.get(k) for k in stage.KEYS})
  for i, run_dir in enumerate(run_dirs):
    if not quiet:
      print(f'Twist {i + 1} of {len(run_dirs)}: {run_dir}', flush=True)
    result = dmc(run_dir, quiet=quiet, stop=stop, **settings)
    if result.get('stopped_by'):
      return result
  return twists.write(run_dirs, out, quiet, result='dmc.json')


def main(argv) -> None:
  f = cli.stage_flags(argv)
  with cli.exit_on_error():
    taus = None
    if f.tau:
      try:
        taus = tuple(float(t) for t in f.tau.split(',') if t.strip())
      except ValueError:
        raise InputError(f'--tau {f.tau!r}: give time steps as numbers, e.g. 0.02,0.01')
    if (f.run is None) == (f.twist_average is None):
      raise InputError('give either --run (one run) or --twist_average (the runs of one '
                       'periodic system at its twists, comma-separated)')
    settings = dict(tau=taus, steps=f.steps, equilibration=f.equilibration,
                    batch_size=f.batch_size, parameters=f.parameters, seed=f.seed,
                    handle_signals=True, moves=f.moves, ecp_moves=f.ecp_moves)
    if f.twist_average is None:
      out = dmc(f.run, **settings)
    else:
      out = twist_average([d.strip() for d in f.twist_average.split(',') if d.strip()],
                          f.out, **settings)
  if out.get('stopped_by'):
    sys.exit(cli.EXIT_PREEMPTED)


def run() -> None:
  """Console entry point (ferminet-fast-dmc, python -m ferminet_fast.dmc)."""
  from absl import app, flags
  flags.DEFINE_string('run', None, 'Run directory (with checkpoints) of the trial function.')
  flags.DEFINE_string('twist_average', None, 'Comma-separated run directories of one '
                      'periodic system at different twists: DMC of each, then their average.')
  flags.DEFINE_string('out', 'dmc_twist_average.json', 'The JSON file of --twist_average.')
  flags.DEFINE_string('tau', None, "Time steps in Ha^-1, comma-separated (default: the run's "
                      'config.dmc.tau).')
  flags.DEFINE_integer('steps', None, "DMC steps kept per time step (default: dmc.steps).")
  flags.DEFINE_integer('equilibration', None, 'DMC steps discarded first per time step.')
  flags.DEFINE_integer('batch_size', None, "Walkers (default: dmc.batch_size, 0: the run's).")
  flags.DEFINE_string('parameters', None, "'average' or 'last' (default: dmc.parameters).")
  flags.DEFINE_string('moves', None, "'electron' (one at a time) or 'all' (at once) "
                      '(default: dmc.moves).')
  flags.DEFINE_string('ecp_moves', None, "'tmoves' or 'locality': an ECP's non-local part "
                      '(default: dmc.ecp_moves).')
  flags.DEFINE_integer('seed', 1, 'Seed of the DMC walk.', lower_bound=config.SEEDS[0],
                       upper_bound=config.SEEDS[1])
  app.run(main, flags_parser=cli.parse_stage_flags)


if __name__ == '__main__':
  run()
