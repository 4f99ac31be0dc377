"""Geometry optimisation while the wavefunction trains (config.system.relax): the step
compiled with the nuclei as its data and the forces of its samples as an output, the
moves of the nuclei (physics/relaxation.py says how and when they stop), and relax.json,
the path and the final geometry, from which a resumed run continues and evaluation takes
its geometry.

Each training step also estimates the force on each nucleus from the configurations its
sweep sampled (the zero-variance zero-bias estimator of physics/observables.py at the
parameters that sampled them), about the cost of one more local energy per walker, until
the nuclei have stopped and the residual forces there are measured (`relax.every` steps);
then the step without them, compiled beside it before the loop, takes over. After
every `relax.every` steps their mean moves the nuclei; the walkers move with them by the
space warp (observables.space_warp: each electron follows the nuclei near it), so that
they stay close to equilibrium, and their log|psi| is taken at the new nuclei.

relax.json (written at every move and at the end):
  symbols; settings (the `relax` block); criterion (in words); hessian (with relax.hessian =
    'hf': method, and ha_per_bohr2 (3 M, 3 M), computed once at the start, which a resumed
    run reuses; null without);
  path: one entry per geometry the nuclei took, in order: step (the training steps done when
    they arrived there), positions_bohr (M, 3), velocity_bohr (the move that brought them,
    the optimiser's state), forces_ha_per_bohr and force_errors_ha_per_bohr (M, 3: the mean
    over the steps spent there, net force and torque removed, and its standard error;
    null before two steps), force_samples (steps averaged), stop ('criterion' or
    'max_moves' on the entry where the nuclei stopped, with the final geometry there);
  moves; converged (the criterion was met); stopped_by ('criterion', 'max_moves' or null:
    still moving when training ended); stopped_at_step;
  final: positions_bohr and errors_bohr (M, 3), the mean of the trailing `relax.average` of
    the positions before the stop (or the end; with the Hessian each carried a Newton step
    along its forces, relaxation.newton_estimates) and its standard error (reblocked),
    distances (each pair: atoms, distance_bohr between the mean positions, error_bohr,
    drift: the two halves' difference over its error), positions_averaged, meets (the
    criterion holds there); once stopped, the one computed at the stop;
  current_positions_bohr: where the nuclei are at the end, the geometry of the last
    checkpoint's parameters (the final geometry once stopped).
A resumed run keeps the path up to the step of its checkpoint and continues from there.
"""

import dataclasses
import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import hartree_fock, observables, relaxation, systems
from ferminet_fast.runtime import checkpoint, context, memory, rundir
from ferminet_fast.vmc import stats, step

FILE = 'relax.json'


def check(cfg, system: systems.System) -> None:
  """What a relaxation of the built `system` refuses (relaxation.check_system), and a basis
  pyscf does not know for the Hessian (relax.hessian = 'hf'); nothing without system.relax."""
  if not cfg.system.relax:
    return
  relaxation.check_system(system)
  if relaxation.settings_of(cfg.relax).hessian is relaxation.HARTREE_FOCK:
    hartree_fock.check_basis(cfg.pretrain.basis, system)


def with_forces(parts: step.Parts, node_cutoff: float) -> step.Parts:
  """`parts` whose train_step(state, geometry) also gives the sweep's forces (M 3,) Ha/bohr,
  (state, (stats, forces)): the zero-variance estimate of the walkers just sampled, at the
  parameters that sampled them, regularised at `node_cutoff` (bohr)."""
  terms = jax.vmap(observables.force_terms(parts.network.log_psi, parts.hamiltonian,
                                           node_cutoff), in_axes=(None, 0, None))
  train_step = parts.train_step

  def relax_step(state: step.TrainState, geometry: systems.Geometry, clock=None):
    new, out = train_step(state, geometry, clock=clock)
    forces = observables.reduce_forces(terms(state.params, new.walkers.x, geometry.positions))
    return new, (out, forces)

  return dataclasses.replace(parts, train_step=relax_step)


def compiled_step(cfg, built, system: systems.System, run: context.Run,
                  state: step.TrainState, source_dir: str, start: int, watch) -> tuple:
  """(parts, compiled, MiB free or None, train_step, Relaxation or None): a run's training
  step compiled to fit the device's memory (runtime/memory.py) from the plan of `built`.
  With config.system.relax, the step with the nuclei as data and the forces as output, the
  step without forces beside it for after the nuclei stop, both attached to the run's
  Relaxation (which starts where the run in `source_dir` left its nuclei at `start`)."""
  relaxing, make_parts = None, built.plan.parts
  if cfg.system.relax:
    with watch.paused('the Hartree-Fock Hessian'):
      relaxing = Relaxation(cfg.relax, system, run, state, built.parts.dtype, source_dir,
                            start, cfg.log.print_every > 0, cfg.pretrain.basis)
    make_parts = lambda chunk: with_forces(built.plan.parts(chunk),  # noqa: E731
                                           cfg.forces.node_cutoff)
  with watch.paused('compiling the training step'):
    parts, compiled, free_mb = memory.compile_to_fit(
        make_parts, built.parts.chunk_size, cfg.optim.energy_chunk_size == 'auto', state,
        agree=run.ctx.smallest, geometry=relaxing and relaxing.geometry)
  if relaxing is None:
    return parts, compiled, free_mb, compiled.train_step, None
  with watch.paused('compiling the training step without forces'):
    settled = step.compile_step(built.plan.parts(parts.chunk_size), state, relaxing.geometry)
  compiled = relaxing.attach(parts, compiled, settled)
  if relaxing.resumed:
    run.say(f'Relax   continuing from step {start}, {relaxing.moves} moves done')
  return parts, compiled, free_mb, relaxing.step, relaxing


def mean_and_error(series: np.ndarray) -> tuple:
  """(mean, standard error) over the first axis of `series` (n, ...), each component's error
  reblocked (vmc/stats.py; NaN for n < 2) and never below the error of uncorrelated samples:
  the positions of a path and the forces of successive steps are correlated positively, so
  a blocked error below that is the noise of an estimate from few blocks."""
  flat = series.reshape(len(series), -1)
  pairs = [stats.reblock(flat[:, k]) for k in range(flat.shape[1])]
  naive = (np.std(flat, axis=0, ddof=1) / np.sqrt(len(flat)) if len(flat) > 1
           else np.full(flat.shape[1], np.nan))
  shape = series.shape[1:]
  return (np.array([p.mean for p in pairs]).reshape(shape),
          np.maximum([p.error for p in pairs], naive).reshape(shape))


def final_geometry(path: list, s: relaxation.Settings,
                   hessian: Optional[np.ndarray] = None) -> dict:
  """The mean of the positions (bohr) of the trailing `s.average` of `path` (stops left
  out), their standard errors, every internuclear distance there with its error and its
  drift (the difference of the mean distances of the two halves of those positions over its
  standard error), and whether that meets the stopping criterion (physics/relaxation.py).
  With `hessian` (3 M, 3 M) Ha/bohr^2, each position x of an entry with forces F is first
  carried a Newton step, x + H^-1 F (relaxation.newton_estimates); entries without forces
  are left out."""
  moving = [e for e in path if not e.get('stop')]
  moving = moving[-relaxation.averaged(len(moving), s.average):]
  if hessian is not None and any(e.get('forces_ha_per_bohr') is not None for e in moving):
    moving = [e for e in moving if e.get('forces_ha_per_bohr') is not None]
    positions = relaxation.newton_estimates(
        np.array([e['positions_bohr'] for e in moving]),
        np.array([e['forces_ha_per_bohr'] for e in moving]), hessian)
  else:
    positions = np.array([e['positions_bohr'] for e in moving])  # (n, M, 3)
  mean, error = mean_and_error(positions)
  pairs, d = relaxation.distances(positions)  # (n, P)
  # The distances of the mean positions, where the nuclei stop: the mean of the distances
  # lies above them by the spread across each bond over twice its length. Their errors
  # are those of the distances' means, to first order in the spread.
  d_error = mean_and_error(d)[1]
  d_mean = relaxation.distances(mean)[1]
  half = len(d) // 2
  drift = np.full(len(pairs), np.nan)
  if half >= 2:
    (first, e1), (second, e2) = mean_and_error(d[:half]), mean_and_error(d[-half:])
    drift = (second - first) / np.maximum(np.hypot(e1, e2), 1e-300)
  distances = [{'atoms': list(p), 'distance_bohr': float(m), 'error_bohr': float(e),
                'drift': float(z)} for p, m, e, z in zip(pairs, d_mean, d_error, drift)]
  return {'positions_bohr': mean.tolist(), 'errors_bohr': error.tolist(),
          'distances': distances, 'positions_averaged': len(moving),
          'meets': relaxation.meets(d_error, drift, len(moving), s)}


def newest_checkpoint_step(run_dir: str) -> Optional[int]:
  steps = checkpoint.saved_steps(run_dir)
  return steps[-1] if steps else None


def read_path(run_dir: str, at_step: Optional[int]) -> Optional[dict]:
  """relax.json of `run_dir` cut to the entries of steps <= `at_step` (None: all), or None
  where the run has none."""
  path = os.path.join(run_dir, FILE)
  if not os.path.exists(path):
    return None
  saved = rundir.read_json(path)
  entries = [e for e in saved['path'] if at_step is None or e['step'] <= at_step]
  if not entries:
    return None
  return {**saved, 'path': entries}


def positions_at(run_dir: str, at_step: Optional[int] = None) -> Optional[np.ndarray]:
  """(M, 3) bohr: where a relaxed run's nuclei were after `at_step` steps (None: the step of
  its newest checkpoint), from its relax.json; None without one."""
  if at_step is None:
    at_step = newest_checkpoint_step(run_dir)
  saved = read_path(run_dir, at_step)
  return None if saved is None else np.asarray(saved['path'][-1]['positions_bohr'], np.float64)


def at_relaxed_geometry(run_dir: str, system: systems.System, say=print,
                        at_step: Optional[int] = None) -> systems.System:
  """`system` with the nuclei where the relaxed run in `run_dir` had them after `at_step`
  steps (None: at its newest checkpoint), what its parameters of that step were trained
  at; `system` itself without relax.json."""
  positions = positions_at(run_dir, at_step)
  if positions is None:
    return system
  if positions.shape != np.shape(system.positions):
    raise InputError(f'{os.path.join(run_dir, FILE)} holds {len(positions)} nuclei, the run '
                     f'{len(system.positions)}')
  say(f'Relaxed geometry of {run_dir} (relax.json), bohr: ' + '; '.join(
      f'{s} ' + ' '.join(f'{c:.4f}' for c in p) for s, p in zip(system.symbols, positions)))
  return dataclasses.replace(system, positions=positions)


class _AtGeometry:
  """A compiled f(state, geometry[, clock]) called as f(state[, clock]) at the relaxation's
  current nuclei.
  `split`: f is the step of with_forces, whose (state, (stats, forces)) is returned as
  (state, stats), the forces given to `keep` (if any). Other attributes (memory_analysis)
  are the compiled function's."""

  def __init__(self, fn, relaxation_run: 'Relaxation', split: bool = False, keep=None):
    self._fn, self._run, self._split, self._keep = fn, relaxation_run, split, keep

  def __call__(self, state, *clock):
    out = self._fn(state, self._run.geometry, *clock)
    if not self._split:
      return out
    state, (stats_, forces) = out
    if self._keep is not None:
      self._keep(forces)
    return state, stats_

  def __getattr__(self, name):
    return getattr(self._fn, name)


class Relaxation:
  """The nuclei of one run, moved between training steps (stages/training.py calls
  `after_step` and `rewound`); `geometry` is where they are now, on the devices."""

  def __init__(self, relax_cfg, system: systems.System, run: context.Run, state: step.TrainState,
               dtype, source_dir: str = '', start: int = 0, print_moves: bool = True,
               basis: str = 'sto-6g'):
    self.settings = relaxation.settings_of(relax_cfg)
    self.symbols, self.run, self.dtype = tuple(system.symbols), run, dtype
    self._shardings, self._replicated = step.shardings_of(state)
    saved = read_path(source_dir, start) if source_dir else None
    if saved is not None and len(saved['path'][-1]['positions_bohr']) != len(self.symbols):
      raise InputError(f'{os.path.join(source_dir, FILE)} holds another molecule\'s path')
    first = {'step': start, 'positions_bohr': np.asarray(system.positions, np.float64).tolist(),
             'velocity_bohr': np.zeros_like(system.positions, np.float64).tolist()}
    self.path = saved['path'] if saved is not None else [first]
    self.resumed = saved is not None
    # The Hessian, once at the start: a resumed run keeps the one it saved.
    at_start = dataclasses.replace(system, positions=np.asarray(self.path[0]['positions_bohr']))
    self.hessian = None if saved is None else saved.get('hessian')
    if self.hessian is None or self.settings.hessian is relaxation.NO_HESSIAN:
      self.hessian = self.settings.hessian(at_start, basis)
    if not self._settled_by(start):  # Measured again from here; once settled, kept.
      for key in ('forces_ha_per_bohr', 'force_errors_ha_per_bohr', 'force_samples'):
        self.path[-1].pop(key, None)
    self.print_moves = print_moves
    self._pending, self._samples, self._mark = [], [], start
    self._warp, self.parts, self._settled_step = None, None, None
    self.geometry = self._on_device(self.positions)
    self.settled = self._settled_by(start)

  # The nuclei and the optimiser's state.
  @property
  def positions(self) -> np.ndarray:
    return np.asarray(self.path[-1]['positions_bohr'], np.float64)

  @property
  def hessian_matrix(self) -> Optional[np.ndarray]:
    """(3 M, 3 M) Ha/bohr^2: the Hessian that preconditions the moves, or None."""
    return None if self.hessian is None else np.asarray(self.hessian['ha_per_bohr2'])

  @property
  def stopped(self) -> Optional[dict]:
    return next((e for e in self.path if e.get('stop')), None)

  @property
  def moves(self) -> int:
    return sum(1 for e in self.path[1:] if not e.get('stop'))

  def _on_device(self, positions) -> systems.Geometry:
    return systems.Geometry(jax.device_put(np.asarray(positions, self.dtype), self._replicated))

  def _settled_by(self, t: int) -> bool:
    """Whether after `t` steps the nuclei have stopped and the residual forces at the final
    geometry have been measured over `relax.every` steps: the forces are no longer needed."""
    stop = self.stopped
    return stop is not None and t >= stop['step'] + self.settings.every

  # The compiled functions.
  def attach(self, parts: step.Parts, compiled: step.Compiled,
             settled: Optional[step.Compiled] = None) -> step.Compiled:
    """The run's parts (with_forces's) and compiled step; returns the compiled step and
    sweep called with the state alone at the current nuclei (the forces dropped: the burn-in
    and the stage timers), and keeps the step that records them (`step`). `settled`: the
    plain step compiled with the nuclei as data, which `step` takes once the nuclei have
    stopped and their residual forces are measured (it saves the forces' cost, about one
    more local energy per walker, for the rest of the training)."""
    self.parts = parts
    self._step = _AtGeometry(compiled.train_step, self, True, self._pending.append)
    self._settled_step = None if settled is None else _AtGeometry(settled.train_step, self)
    return step.Compiled(_AtGeometry(compiled.train_step, self, True),
                         _AtGeometry(compiled.mcmc, self), compiled.compile_s,
                         compiled.clocked)

  def step(self, state, *clock):
    """One training step at the current nuclei (`clock`: a clocked step's, step.clock); its
    forces are kept for the next move (or, settled, the step without them)."""
    if self.settled and self._settled_step is not None:
      return self._settled_step(state, *clock)
    return self._step(state, *clock)

  def _warp_walkers(self, state, old: np.ndarray, new: np.ndarray):
    """The walkers carried from nuclei `old` to `new` by the space warp, log|psi| at `new`."""
    if self._warp is None:
      parts = self.parts

      def warp(s, old, new):
        x = jax.vmap(lambda xi: observables.space_warp(xi, old, new)[0])(s.walkers.x)
        log_psi = parts.batch_log_psi(s.params, x, systems.Geometry(new))
        return s._replace(walkers=s.walkers._replace(x=x, log_psi=log_psi))

      self._warp = jax.jit(warp, donate_argnums=0,
                           in_shardings=(self._shardings, self._replicated, self._replicated),
                           out_shardings=self._shardings)
    return self._warp(state, *(jax.device_put(np.asarray(p, self.dtype), self._replicated)
                               for p in (old, new)))

  # The loop's hooks.
  def _collect(self) -> None:
    if self._pending:
      self._samples.extend(np.asarray(jnp.stack(self._pending), np.float64))
      self._pending.clear()

  def _measure(self) -> bool:
    """Sets the current entry's mean forces and errors from its steps' samples; whether
    there were two finite ones at least."""
    samples = np.array(self._samples).reshape(len(self._samples), len(self.symbols), 3)
    samples = samples[np.all(np.isfinite(samples), axis=(1, 2))]
    if len(samples) < 2:
      return False
    variances = np.mean(np.var(samples, axis=0), axis=-1)  # (M,): each nucleus's noise.
    mean, error = mean_and_error(relaxation.project(samples, self.positions, variances))
    entry = self.path[-1]
    entry.update(forces_ha_per_bohr=mean.tolist(), force_errors_ha_per_bohr=error.tolist(),
                 force_samples=len(samples))
    return True

  def after_step(self, t: int, state):
    """After `t` steps: every `relax.every` steps, the forces measured since the last move
    and, unless the nuclei have stopped, a move (or the stop), the walkers carried along."""
    if t <= self.settings.start:  # Not yet: these steps' forces are not used.
      self._pending.clear()
      self._mark = t
      return state
    if not self.settled and self._settled_by(t):  # The final geometry's residual forces,
      self.settled = True  # measured and written now, so that a restart keeps them.
      self._collect()
      self._measure()
      self.write(t)
    if t - self._mark < self.settings.every:
      return state
    self._mark = t
    self._collect()
    if self.stopped or not self._measure():
      return state
    entry, s = self.path[-1], self.settings
    old = self.positions
    final = final_geometry(self.path, s, self.hessian_matrix)
    if final['meets'] or (s.max_moves and self.moves >= s.max_moves):
      why = 'criterion' if final['meets'] else 'max_moves'
      new = np.asarray(final['positions_bohr'])
      self.path.append({'step': t, 'positions_bohr': new.tolist(),
                        'velocity_bohr': np.zeros_like(new).tolist(), 'stop': why,
                        'final': final})
      said = ('the criterion was met' if why == 'criterion' else
              f'relax.max_moves = {s.max_moves}')
      self.run.say(f'Relax   step {t}: stopped after {self.moves} moves ({said}); the nuclei '
                   f'stay at the final geometry, {_distances(final, self.symbols)}')
    else:
      forces = np.asarray(entry['forces_ha_per_bohr'])
      inverse = None if self.hessian is None else relaxation.inverse_hessian(
          np.asarray(self.hessian['ha_per_bohr2']), old)
      new, velocity = relaxation.move(old, np.asarray(entry['velocity_bohr']), forces, s,
                                      inverse)
      self.path.append({'step': t, 'positions_bohr': new.tolist(),
                        'velocity_bohr': velocity.tolist()})
      if self.print_moves:
        errors = np.asarray(entry['force_errors_ha_per_bohr'])
        self.run.say(f'Relax   step {t}: move {self.moves}, max |F| {np.max(np.abs(forces)):.4f}'
                     f' +- {np.max(errors):.4f} Ha/bohr, largest displacement '
                     f'{np.max(np.linalg.norm(velocity, axis=-1)):.4f} bohr')
    self._samples = []
    state = self._warp_walkers(state, old, new)
    self.geometry = self._on_device(new)
    self.write(t)
    return state

  def rewound(self, t: int) -> None:
    """The loop went back to the state after `t` steps: the nuclei go back to where they
    were then."""
    self.path = [e for e in self.path if e['step'] <= t]
    self._pending.clear()
    self._samples, self._mark = [], t
    self.settled = self._settled_by(t)
    self.geometry = self._on_device(self.positions)

  def finish(self, t: int) -> dict:
    """relax.json at the end of training after `t` steps (the forces measured since the last
    move in its last entry); says where the nuclei are and whether they converged."""
    self._collect()
    self._measure()  # At the final geometry once stopped: its residual forces.
    record = self.write(t)
    stop = self.stopped
    if stop is None:
      self.run.say(f'Relax   {self.moves} moves in {t} steps, still moving (the criterion '
                   'was not met); final geometry from the last positions: '
                   + _distances(record['final'], self.symbols))
    self.run.say(f'Relax   path and final geometry: {os.path.join(self.run.dir, FILE)}')
    return record

  def record(self, t: int) -> dict:
    s, stop = self.settings, self.stopped
    final = (stop['final'] if stop is not None
             else final_geometry(self.path, s, self.hessian_matrix))
    return {
        'symbols': list(self.symbols), 'settings': {**s._asdict(), 'hessian': s.hessian.name},
        'criterion': criterion(s),
        'hessian': self.hessian,
        'steps': t, 'path': self.path, 'moves': self.moves,
        'converged': stop is not None and stop['stop'] == 'criterion',
        'stopped_by': None if stop is None else stop['stop'],
        'stopped_at_step': None if stop is None else stop['step'], 'final': final,
        'current_positions_bohr': self.path[-1]['positions_bohr']}

  def write(self, t: int) -> dict:
    record = self.record(t)
    self.run.write(FILE, record)
    return record


def criterion(s: relaxation.Settings) -> str:
  """The stopping criterion of settings `s`, in words (relax.json)."""
  limit = f', or after {s.max_moves} moves' if s.max_moves else ''
  carried = (', each carried a Newton step along the forces measured there (the Hessian '
             'that preconditions the moves)' if s.hessian is relaxation.HARTREE_FOCK else '')
  return (f'from step {s.start}, a move every {s.every} steps; the final geometry is the mean '
          f'of the trailing {s.average:g} of the positions{carried}; the nuclei stop there '
          f'once at least {s.min_averaged} positions are averaged, every internuclear '
          f'distance has a standard error of at most {s.tolerance:g} bohr, and the means of '
          f'the two halves of those positions agree for every distance (two-sided 5%, '
          f'Bonferroni over the distances){limit}')


def _distances(final: dict, symbols: tuple) -> str:
  return ', '.join(f'R({symbols[a]}{a}-{symbols[b]}{b}) {d["distance_bohr"]:.4f} +- '
                   f'{d["error_bohr"]:.4f} bohr' for d in final['distances']
                   for a, b in [d['atoms']])
