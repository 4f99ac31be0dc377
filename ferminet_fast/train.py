"""Training: wires config, system, network and the compiled step into a loop.

  python -m ferminet_fast.train --config configs/li.py --config.optim.iterations=5000

From Python: `ferminet_fast.train.train(cfg)` with `cfg = ferminet_fast.config.default()`.
"""

import time

_T0 = time.perf_counter()  # Before the heavy imports, so start-up includes them.

import concurrent.futures  # noqa: E402
import datetime  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from typing import Any, NamedTuple, Optional  # noqa: E402

from absl import app, flags  # noqa: E402
import jax  # noqa: E402
from ml_collections import config_flags  # noqa: E402
import numpy as np  # noqa: E402

import ferminet_fast  # noqa: E402
from ferminet_fast import InputError, cli, config, rundir, stats, step, systems  # noqa: E402


class Result(NamedTuple):
  estimate: stats.Estimate  # Energy (Ha) over the last `log.final_fraction` of training.
  exact_energy: Optional[float]  # Ha, if known.
  history: dict  # Column -> (iterations,) array, as in stats.csv.
  timings: dict  # As in timings.json.
  state: step.TrainState
  run_dir: str

  @property
  def error_mha(self) -> Optional[float]:
    if self.exact_energy is None:
      return None
    return 1e3 * (self.estimate.mean - self.exact_energy)


def versions() -> dict:
  import flax
  import optax
  return {'ferminet_fast': ferminet_fast.__version__, 'jax': jax.__version__,
          'jaxlib': jax.lib.__version__ if hasattr(jax.lib, '__version__') else '',
          'flax': flax.__version__, 'optax': optax.__version__, 'numpy': np.__version__,
          'python': platform.python_version()}


def _cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      return next(l.split(':', 1)[1].strip() for l in f if l.startswith('model name'))
  except (OSError, StopIteration):
    return platform.processor()


def _machine() -> dict:
  devices = jax.devices()
  return {'platform': devices[0].platform, 'device': devices[0].device_kind,
          'cpu': _cpu_model(),
          'device_count': len(devices), 'cpu_count': os.cpu_count(),
          'host': platform.node(), 'date': datetime.datetime.now().isoformat(timespec='seconds')}


def _format_timings(t: dict) -> str:
  keys = ('train_step_ms', 'mcmc_ms', 'energy_grad_ms', 'optimizer_ms', 'forward_ms')
  return '  '.join(f'{k}={t[k]:.3f}' for k in keys if k in t) + f'  compile_s={t["compile_s"]:.2f}'


def final_line(result: Result, iterations: int) -> str:
  est = result.estimate
  line = (f'Energy {est.mean:.6f} +- {est.error:.6f} Ha (last {est.n} of {iterations} steps, '
          f'reblocked, tau={est.tau:.1f})')
  if result.exact_energy is not None:
    line += (f' | exact {result.exact_energy:.6f} Ha | error {result.error_mha:+.2f} '
             f'+- {1e3 * est.error:.2f} mHa')
  return line


class _StageTimers:
  """Compiles the stage timers in a background thread, so training starts without waiting."""

  def __init__(self, parts, state):
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    self._future = self._pool.submit(step.compile_stages, parts, step.shapes_of(state))
    self._t0 = time.perf_counter()
    self.compile_s = None

  def measure(self, compiled, state, wait: bool):
    if not (wait or self._future.done()):
      return None
    stages = self._future.result()
    if self.compile_s is None:
      self.compile_s = time.perf_counter() - self._t0
      self._pool.shutdown()
    return {**step.measure_stages(compiled, stages, state),
            'timers_compile_s': self.compile_s}


def train(cfg, quiet: bool = False) -> Result:
  """Trains the wavefunction described by `cfg` and writes the run directory.

  Raises InputError for bad input, before anything is written.
  """
  say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
  config.validate(cfg)
  if cfg.precision == 'float64':
    jax.config.update('jax_enable_x64', True)
  if cfg.debug.deterministic:
    os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') +
                               ' --xla_gpu_deterministic_ops=true').strip()
  system = systems.make_system(cfg.system)
  run_dir = rundir.prepare(cfg.log.save_path, system.name)
  rundir.write_json(os.path.join(run_dir, 'config.json'), cfg.to_dict())
  say(f'System  {systems.describe(system)}')
  say(f'Run dir {run_dir}')

  parts = step.make_parts(cfg, system)
  state = step.init_state(parts, cfg, system, jax.random.PRNGKey(cfg.debug.seed))
  n_params = sum(p.size for p in jax.tree.leaves(state.params))
  timings = {}
  if cfg.optim.laplacian == 'auto':
    method, timings['laplacian_auto_ms'] = step.choose_laplacian(cfg, system, state)
    parts = step.make_parts(cfg, system, method)
    say('Laplacian auto: ' + ', '.join(f'{m} {t:.2f} ms' for m, t in
                                       timings['laplacian_auto_ms'].items()) + f' -> {method}')
  compiled = step.compile_step(parts, state)
  timers = _StageTimers(parts, state) if (cfg.log.timers or cfg.log.timers_every) else None
  t_burn = time.perf_counter()
  state = step.burn_in(compiled, state, cfg.mcmc.burn_in, cfg.mcmc.steps)
  timings.update({'compile_s': compiled.compile_s, 'burn_in_s': time.perf_counter() - t_burn,
                  'n_params': int(n_params), 'batch_size': cfg.batch_size,
                  'mcmc_steps': cfg.mcmc.steps, 'laplacian': parts.laplacian,
                  'optimizer': cfg.optim.optimizer, **step.memory_mb(compiled.train_step),
                  'startup_s': time.perf_counter() - _T0,
                  'machine': _machine(), 'versions': versions()})
  say(f'Network {n_params} parameters; Laplacian {parts.laplacian}; compiled in '
      f'{compiled.compile_s:.1f} s; move width '
      f'after burn-in {float(state.walkers.width):.3f} bohr; first step '
      f'{timings["startup_s"]:.1f} s after start')
  timings_path = os.path.join(run_dir, 'timings.json')
  rundir.write_json(timings_path, timings)

  def measure(t, wait=False):
    """Stage timers on the current state, once their compilation is done (or `wait`)."""
    nonlocal last
    result = timers.measure(compiled, state, wait)
    if result is None:
      return
    if 'train_step_ms' not in timings:
      timings.update(result)
      timings['timers_at_step'] = t
      say(f'Timers  {_format_timings(timings)}  (at step {t})')
    else:
      timings.setdefault('remeasured', []).append({'step': t, **result})
      say(f'Timers  step {t}: ' + '  '.join(f'{k}={v:.3f}' for k, v in result.items()))
    rundir.write_json(timings_path, timings)
    last = time.perf_counter()

  history = {c: np.zeros(cfg.optim.iterations) for c in rundir.STATS_COLUMNS}
  writer = rundir.StatsWriter(os.path.join(run_dir, 'stats.csv'))
  t_loop = last = time.perf_counter()

  def record(t, device_stats):
    nonlocal last
    s = jax.device_get(device_stats)  # Blocks on step t only; step t + 1 is already queued.
    now = time.perf_counter()
    row = {'step': t, 'energy': float(s.energy), 'variance': float(s.variance),
           'pmove': float(s.pmove), 'move_width': float(s.width), 'lr': float(s.lr),
           'step_time_ms': 1e3 * (now - last)}
    last = now
    writer.write(row)
    for c in rundir.STATS_COLUMNS:
      history[c][t] = row[c]
    if cfg.log.print_every and (t + 1) % cfg.log.print_every == 0:
      writer.flush()
      rate = (t + 1) / (now - t_loop)
      say(f'step {t + 1:6d}  E {row["energy"]:12.6f}  var {row["variance"]:9.5f}  '
          f'pmove {row["pmove"]:.2f}  width {row["move_width"]:.3f}  {rate:7.1f} it/s')

  pending = None
  for t in range(cfg.optim.iterations):
    state, device_stats = compiled.train_step(state)
    if pending is not None:
      record(*pending)
    pending = (t, device_stats)
    if timers is not None and ('train_step_ms' not in timings or (
        cfg.log.timers_every and (t + 1) % cfg.log.timers_every == 0)):
      measure(t + 1)
  if pending is not None:
    record(*pending)
  writer.close()
  wall = time.perf_counter() - t_loop
  if timers is not None and 'train_step_ms' not in timings:
    measure(cfg.optim.iterations, wait=True)  # A run shorter than the timers' compilation.

  n_final = max(1, int(round(cfg.log.final_fraction * cfg.optim.iterations)))
  if cfg.optim.iterations:
    estimate = stats.reblock(history['energy'][-n_final:])
  else:
    estimate = stats.Estimate(float('nan'), float('nan'), float('nan'), 0, 1)
  timings.update({'train_loop_s': wall, 'iterations_per_s': cfg.optim.iterations / wall
                  if wall > 0 else 0.0, 'total_s': time.perf_counter() - _T0,
                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
  rundir.write_json(timings_path, timings)
  result = Result(estimate, system.exact_energy, history, timings, state, run_dir)
  rundir.write_json(os.path.join(run_dir, 'result.json'), {
      'energy': estimate.mean, 'error': estimate.error, 'tau': estimate.tau,
      'samples': estimate.n, 'exact_energy': system.exact_energy,
      'error_mha': result.error_mha, 'iterations': cfg.optim.iterations,
      'wall_s': timings['total_s']})
  say(f'Trained {cfg.optim.iterations} steps in {wall:.1f} s '
      f'({timings["iterations_per_s"]:.1f} it/s); total {timings["total_s"]:.1f} s')
  say(final_line(result, cfg.optim.iterations))
  return result


_DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), 'config.py')


def main(argv) -> None:
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)  # No 'no TPU' notices.
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
  cfg = flags.FLAGS.config
  try:
    if flags.FLAGS.dry_run:
      config.validate(cfg)
      print(cfg)
      return
    train(cfg)
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)


def run() -> None:
  """Console entry point. Flags are defined here, not at import, so that importing this
  module from Python registers nothing, and only after the arguments were checked."""
  sys.argv = [('--dry_run' if a == '--dry-run' else a) for a in sys.argv]
  cli.precheck(sys.argv, _DEFAULT_CONFIG)
  config_flags.DEFINE_config_file(
      'config', _DEFAULT_CONFIG,
      'Config file exposing get_config(); override keys with --config.KEY=VALUE.')
  flags.DEFINE_bool('dry_run', False, 'Print the resolved config and exit (also --dry-run).')
  app.run(main)


if __name__ == '__main__':
  run()
