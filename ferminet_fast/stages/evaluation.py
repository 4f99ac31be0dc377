"""Evaluation's pieces: the estimators asked for, the sweep loop at frozen parameters, and
the report (eval.json and the printed lines); the trained run comes from stages/trained.py.
The entry point, evaluate.py, puts them together."""

import math
import os
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import plan
from ferminet_fast.environment import dispatch, distributed
from ferminet_fast.errors import InputError
from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import equation_of_state, excited_states, hamiltonian, references
from ferminet_fast.physics import systems
from ferminet_fast.physics import observables as observables_lib
from ferminet_fast.runtime import rundir, watchdog
from ferminet_fast.stages import differences
from ferminet_fast.vmc import ordering, stats, step

STATES = 'states'  # Key of the several states' matrices among the estimators.
# What the several states' evaluation estimates for every state (its `states` report).
STATES_OBSERVABLES = ('s2', 'dipole')
# Those defined in a periodic cell (no dipole, density, forces): the boundary says.
PERIODIC_OBSERVABLES = boundary_lib.Periodic.OBSERVABLES
EV_PER_HA = 27.211386246  # CODATA 2018.


def estimators(names: Sequence[str], network, system, ham: hamiltonian.Hamiltonian,
               node_cutoff: float) -> dict:
  """name -> observables.Estimator for the observables `names` (observables.OBSERVABLES)
  under the run's Hamiltonian `ham` (the forces regularised at `node_cutoff`, bohr), and
  with several states their local matrices under STATES (which hold each state's <S^2> and
  the dipoles: s2 and dipole are accepted there, the others refused)."""
  if system.surface is not None and names:
    raise InputError(f'--observables {",".join(names)}: a run over a set of geometries is '
                     'evaluated for its energies only')
  unknown = [n for n in names if n not in observables_lib.OBSERVABLES]
  if unknown:
    raise InputError(f'unknown observable {unknown[0]!r} (known: '
                     f'{", ".join(observables_lib.OBSERVABLES)})')
  refused = [n for n in names if not system.boundary.allows(n)]
  if refused:
    raise InputError(f'--observables {",".join(refused)}: not available for a periodic system '
                     '(the dipole is not defined in a cell; the density and the forces are not '
                     f'implemented for periodic systems yet); available: '
                     f'{", ".join(PERIODIC_OBSERVABLES)}')
  if system.states == 1:
    return {name: observables_lib.OBSERVABLES[name].make(network, system, ham, node_cutoff)
            for name in names}
  other = [n for n in names if n not in STATES_OBSERVABLES]
  if other:
    raise InputError(f'--observables {",".join(other)}: with {system.states} states '
                     'evaluation estimates ' + ' and '.join(STATES_OBSERVABLES) + ' (each '
                     "state's <S^2> and the transition dipoles); the others are for one state")
  return {STATES: observables_lib.Estimator(
      excited_states.make_local_matrices(network, system, ham), (),
      excited_states.reduce)}


def sweep_functions(parts: step.Parts, chosen: dict, k: int, stack=None) -> tuple:
  """(move, sweep), both state -> (state, ...): one MCMC sweep at fixed width and
  parameters; and a move followed by the mean local energy (non-finite ones left out, as
  in training) and each estimator's estimate from the sweep's walkers (its `reduce`). With
  several states the local energy is the trace of the local-energy matrix, not computed a
  second time. The estimates are made one after the other (vmc/ordering.py: side by side,
  two batched determinant factorisations deadlock jaxlib 0.10.0-0.11.0 on CPU).

  Over a set of geometries, `stack` (a systems.Geometry of positions (G, M, 3)): each
  geometry's chain moves with its own nuclei and width, and the energy and acceptance are
  (G,), one per geometry (no other estimator); with G >= 2, the correlated differences of
  adjacent geometries too (differences.py), ordered after the energies."""
  differ = (differences.make_pairs(parts)
            if stack is not None and stack.positions.shape[0] >= 2 else None)
  per_walker = {name: jax.vmap(est.per_config, in_axes=(None, 0))
                for name, est in chosen.items()}

  def move(s):
    key, sub = jax.random.split(s.key)
    if stack is None:
      walkers, pmove = parts.sweep(s.params, s.walkers, sub)
    else:
      keys = jax.random.split(sub, stack.positions.shape[0])
      chains, pmove = jax.vmap(parts.sweep, in_axes=(None, 0, 0, 0))(
          s.params, step.by_geometry(s.walkers, stack), keys, stack)
      walkers = step.in_a_row(chains)
    return s._replace(walkers=walkers, key=key), pmove

  def sweep(s):
    s, pmove = move(s)
    x, means, done = s.walkers.x, {}, ()
    if stack is not None:
      xs = step.by_geometry(s.walkers, stack).x
      mean, _ = jax.vmap(parts.energy, in_axes=(None, 0, 0))(s.params, xs, stack)
      if differ is not None:
        means[differences.DIFFERENCES] = differ(s.params, ordering.after(xs, mean), stack, mean)
      return s, (mean, pmove, means)
    if STATES not in chosen:
      mean, _ = parts.energy(s.params, x)
      done = mean
    for name, f in per_walker.items():
      x = ordering.after(x, done)
      means[name] = done = chosen[name].reduce(f(s.params, x))  # (B, k) -> estimate
    if STATES in means:
      mean = jnp.trace(means[STATES][:k * k].reshape(k, k))
    return s, (mean, pmove, means)

  return move, sweep


def settings(cfg, steps: Optional[int], burn_in: Optional[int],
             node_cutoff: Optional[float], walkers: Optional[int]) -> tuple:
  """(settings, steps, burn_in, devices' context) of an evaluation of the run whose settings
  are `cfg` (rundir.read_config): None takes the run's sweeps (config.evaluation), node
  cutoff and batch; `walkers` is per geometry of a set. Resolved by plan.settings; values
  out of range are InputErrors."""
  steps = cfg.evaluation.steps if steps is None else steps
  burn_in = cfg.evaluation.burn_in if burn_in is None else burn_in
  if steps < 2 or burn_in < 0:
    raise InputError(f'evaluation needs steps >= 2 and burn_in >= 0, got {steps}, {burn_in}')
  if node_cutoff is not None:  # Validated with the rest of the settings.
    cfg.forces.node_cutoff = node_cutoff
  g = 1 if walkers is None else systems.make_system(cfg.system).geometry_count
  if walkers is not None:
    if walkers < 1:
      raise InputError(f'--walkers must be at least 1, got {walkers}')
    cfg.batch_size = walkers * g
  cfg = plan.settings(cfg, later_stage=True)  # Validated, 'best' resolved, devices set.
  try:
    ctx = distributed.context(cfg.batch_size)  # The walkers split over them, as in training.
  except InputError:
    if walkers is None:
      raise
    n = len(jax.devices())
    each = f' ({walkers} at each of {g} geometries)' if g > 1 else ''
    raise InputError(f'--walkers {walkers}: {walkers * g} walkers{each} do not split evenly '
                     f'over the {n} devices of this run; use a multiple of '
                     f'{n // math.gcd(g, n)}') from None
  return cfg, steps, burn_in, ctx


def with_key(state, seed: int):
  """`state` with the evaluation chain's key of `seed`, replicated over the walkers' devices
  as the state's own key was: a key on one device beside a state on several would be copied
  over at the first sweep, a copy that XLA's CPU runtime (jaxlib 0.9) can leave waiting
  behind that sweep's first collective, stalling it."""
  _, replicated = step.shardings_of(state)
  return state._replace(key=jax.device_put(jax.random.PRNGKey(seed), replicated))


def compiled(f: Callable, state) -> Callable:
  """`f` (state -> (state, ...), as `sweep_functions` gives) compiled for `state`'s layout
  in and out, the state donated: each call feeds the next without moving a buffer."""
  shardings, replicated = step.shardings_of(state)
  return jax.jit(f, donate_argnums=0, in_shardings=(shardings,),
                 out_shardings=(shardings, replicated)).lower(state).compile()


def reference_of(text: str, system) -> Optional[references.Reference]:
  """The reference curve `evaluate --reference` names (physics/references.py), checked
  against the system, which must be a set of geometries; None for ''."""
  if not text:
    return None
  if system.surface is None:
    raise InputError('--reference is for a run over a set of geometries (its curve); '
                     'this run has one geometry')
  if not system.boundary.molecular_references:
    raise InputError("--reference: pyscf's references are of molecules; this run scans a "
                     'periodic cell')
  chosen = references.parse(text)
  references.check(chosen, system)
  return chosen


class Series(NamedTuple):
  """What the sweeps recorded."""
  energies: list  # Mean local energy of each sweep, Ha (G,) over a set of geometries.
  pmoves: list  # Acceptance of each sweep ((G,) likewise).
  # Per sweep: name -> estimate, for the estimators kept per sweep; over a set of geometries
  # differences.DIFFERENCES -> its pairs' (3, G - 1).
  values: list
  sums: dict  # name -> estimate summed over sweeps, for those that `accumulate`.


def run_sweeps(move: Callable, sweep: Callable, state, steps: int, burn_in: int,
               chosen: dict, watch: watchdog.Watchdog) -> Series:
  """`burn_in` moves, then `steps` sweeps, each one's results fetched one sweep behind (so
  the device never waits), `watch` told of each."""
  series = Series([], [], [], {})
  what = 'a sweep (MCMC moves, local energies' + ''.join(f', {n}' for n in chosen) + ')'

  def record(out):
    e, pmove, means = jax.device_get(out)
    series.energies.append(np.asarray(e, np.float64))
    series.pmoves.append(np.asarray(pmove, np.float64))
    # Summed, not kept per sweep.
    for name in [n for n in means if n in chosen and chosen[n].accumulate]:
      series.sums[name] = series.sums.get(name, 0.0) + np.asarray(means.pop(name), np.float64)
    series.values.append(means)

  watch.waiting_for(f'the burn-in ({burn_in} sweeps at fixed parameters)')
  ahead = dispatch.Bounded()
  for _ in range(burn_in):
    state, out = move(state)
    ahead.pushed(out)
  state = jax.block_until_ready(state)
  watch.beat(f'evaluation sweep 1 of {steps}: {what}')
  pending = None
  for i in range(steps):
    state, out = sweep(state)
    if pending is not None:
      record(pending)
      watch.beat(f'evaluation sweep {i + 1} of {steps}: {what}')
    pending = out
  record(pending)
  return series


def report(series: Series, chosen: dict, system, run_dir: str, say: Callable) -> tuple:
  """(energy estimate, eval.json's estimates): the reblocked energy, each observable (its
  reblocked components, or for those that accumulate the summary its report writes) and,
  with several states, each state's; the observables' lines printed."""
  energies = np.asarray(series.energies)  # (steps,) or (steps, G)
  estimate = stats.reblock(energies if energies.ndim == 1 else energies.mean(axis=1))
  result = {}
  if energies.ndim == 2:
    result['geometries'] = surface_report(energies, system, say)
    if system.surface.scales is not None:
      result['equation_of_state'] = cell_scan_report(result['geometries'], system, say)
    if differences.DIFFERENCES in series.values[0]:
      result['differences'] = differences.report(
          np.stack([v[differences.DIFFERENCES] for v in series.values]).astype(np.float64),
          result['geometries'], say)
  for name, obs in chosen.items():
    if name == STATES:
      result['states'] = report_states(
          np.stack([np.asarray(v[name]) for v in series.values]), system.states, say)
      result['states']['exact_ground_energy'] = system.exact_energy
      continue
    unit = observables_lib.OBSERVABLES[name].unit
    if obs.accumulate:  # Only the mean over sweeps; the report says where it went.
      summary = obs.report(run_dir, series.sums[name] / len(series.energies), None)
      result.setdefault('observables', {})[name] = {'unit': unit, 'summary': summary}
      say(f'  {name}: {summary}')
      continue
    values = np.stack([np.asarray(v[name]) for v in series.values])  # (steps, k)
    est = [stats.reblock(values[:, c]) for c in range(values.shape[1])]
    result.setdefault('observables', {})[name] = {
        'labels': list(obs.labels), 'unit': unit, 'value': [e.mean for e in est],
        'error': [e.error for e in est], 'tau': [e.tau for e in est]}
    if obs.report:
      say(f'  {name}: ' + obs.report(run_dir, [e.mean for e in est], [e.error for e in est]))
    else:
      say(f'  {name}: ' + ', '.join(f'{label} {e.mean:.5f} +- {e.error:.5f}'
                                    for label, e in zip(obs.labels, est)) + f' {unit}'.rstrip())
  return estimate, result


def summary(result: dict, states: int) -> str:
  """The line that ends an evaluation, from eval.json's content `result`."""
  r = result
  total = 'the sum of the states, ' if states > 1 else ''
  averaged_over = (f'parameters averaged over ~{r["average_updates"]:.0f} updates, '
                   if r['parameters'] == 'average' else 'last parameters, ')
  line = (f'Evaluated step {r["checkpoint_step"]} ({averaged_over}{r["steps"]} sweeps x '
          f'{r["batch_size"]} walkers): {total}{r["energy"]:.6f} +- {r["error"]:.6f} Ha '
          f'(reblocked, tau={r["tau"]:.1f})')
  if r['exact_energy'] is not None:
    line += (f' | exact {r["exact_energy"]:.6f} Ha | error {r["error_mha"]:+.2f} +- '
             f'{1e3 * r["error"]:.2f} mHa')
  if not r.get('error_plateau', True):
    line += (f'\nWarning: the error bar did not level off in {r["steps"]} sweeps (the series '
             'is short for its correlation time), so it is likely too small: evaluate with '
             'more sweeps (--steps)')
  return line


def report_states(series: np.ndarray, k: int, say: Callable) -> dict:
  """Each state's energy, excitation energy, <S^2> and oscillator strength from the series
  of sweep estimates of the local matrices (steps, 5 K^2), with jackknife errors; printed
  and returned for eval.json (lists, Ha and e bohr)."""
  values, errors = excited_states.jackknife(series, k)
  say(f'  {k} states (NES-VMC; errors by jackknife over {excited_states.JACKKNIFE_BLOCKS} '
      'blocks of sweeps):')
  for i in range(k):
    line = (f'    state {i}: E {values["energy"][i]:.6f} +- {errors["energy"][i]:.6f} Ha, '
            f'<S^2> {values["s2"][i]:.3f} +- {errors["s2"][i]:.3f}')
    if i:
      de, dde = values['excitation_energy'][i - 1], errors['excitation_energy'][i - 1]
      line += (f', excitation {de:.6f} +- {dde:.6f} Ha ({de * EV_PER_HA:.4f} eV), '
               f'|d_0{i}|^2 {values["transition_dipole_sq"][i - 1]:.4f} +- '
               f'{errors["transition_dipole_sq"][i - 1]:.4f} e^2 bohr^2, oscillator strength '
               f'{values["oscillator_strength"][i - 1]:.4f} +- '
               f'{errors["oscillator_strength"][i - 1]:.4f}')
    say(line)
  if k > 2:
    say(f'    oscillator strengths summed over states 1-{k - 1}: '
        f'{values["oscillator_strength_sum"][0]:.4f} +- {errors["oscillator_strength_sum"][0]:.4f}')
  return {name: {'value': values[name].tolist(), 'error': errors[name].tolist()}
          for name in values}


def surface_report(energies: np.ndarray, system, say: Callable) -> list:
  """Each geometry's reblocked energy from the sweeps' energies (steps, G): its nuclei
  (bohr), its scan coordinate if any (for a scan of a cell also its scale and volume),
  energy, error, tau; printed. (pes.json's rows.)"""
  surface, rows = system.surface, []
  say(f'  {len(surface.positions)} geometries:')
  for g, positions in enumerate(np.asarray(surface.positions)):
    e = stats.reblock(energies[:, g])
    row = {'index': g, 'positions_bohr': positions.tolist(), 'energy': e.mean,
           'error': e.error, 'tau': e.tau, 'error_plateau': e.plateau,
           'sweeps': int(energies.shape[0])}
    where = f'geometry {g}'
    if surface.coordinate is not None:
      row['coordinate'] = float(surface.coordinate[g])
      where += f' ({surface.label} = {row["coordinate"]:.4f})'
    if surface.scales is not None:
      row['scale'] = float(surface.scales[g])
      row['volume_bohr3'] = float(system.lattice.volume * surface.scales[g] ** 3)
    say(f'    {where}: {e.mean:.6f} +- {e.error:.6f} Ha (tau={e.tau:.1f}'
        + ('' if e.plateau else '; the error bar did not level off: likely too small') + ')')
    rows.append(row)
  return rows


def cell_scan_report(rows: list, system, say: Callable) -> Optional[dict]:
  """The equation of state (physics/equation_of_state.py) of a scan of a cell from its
  geometries' rows (surface_report), with the scan's coordinate (r_s, or the factor of the
  cell) at the minimum; printed. None with too few sizes to fit."""
  scales = [r['scale'] for r in rows]
  volume = system.lattice.volume if system.lattice.dims == 3 else None
  eos = equation_of_state.equation_of_state(scales, [r['energy'] for r in rows],
                                            [r['error'] for r in rows], volume)
  if eos is None:
    say(f'  Equation of state: not fitted ({len(rows)} sizes of the cell; it needs '
        f'{equation_of_state.MIN_POINTS})')
    return None
  if not eos['minimum']:
    say(f'  Equation of state: not fitted ({eos["why"]})')
    return eos
  per_scale = rows[0]['coordinate'] / rows[0]['scale']
  error = eos['scale_error']
  eos.update(label=system.surface.label, coordinate=eos['scale'] * per_scale,
             coordinate_error=None if error is None else error * per_scale)
  pm = lambda key, digits: (f'{eos[key]:.{digits}f} +- '  # noqa: E731
                            + ('?' if eos[key + '_error'] is None
                               else f'{eos[key + "_error"]:.{digits}f}'))
  line = (f'  Equation of state ({eos["form"]}; chi^2/dof {eos["chi2_dof"]:.2f}): minimum at '
          f'{eos["label"]} = {pm("coordinate", 4)}, E0 {pm("energy", 6)} Ha')
  if volume is not None:
    line += (f', V0 {pm("volume_bohr3", 2)} bohr^3, B0 {pm("bulk_modulus_gpa", 2)} GPa, '
             f'B0\' {pm("bulk_modulus_derivative", 2)}')
  if eos['found_in'] < 0.95:
    line += (f'; only {100 * eos["found_in"]:.0f}% of the energies redrawn within their errors '
             'have a minimum: it is barely resolved, and its errors understate it')
  say(line + ('' if eos['inside'] else ' (outside the scanned sizes: extrapolated)'))
  return eos


PES = 'pes.json'  # Each geometry's evaluated energy, for a run over a set of geometries.


def write_surface(run_dir: str, system, result: dict, batch_size: int,
                  reference: Optional[references.Reference] = None,
                  say: Callable = print) -> str:
  """Writes <run_dir>/pes.json from eval.json's `result` of a run over a set of geometries:
  each geometry's row (surface_report) and the correlated differences, and with
  `reference` its energy at each geometry (physics/references.py, pyscf; the VMC energy's
  difference from it printed); returns its path."""
  path = os.path.join(run_dir, PES)
  rows = result['geometries']
  if reference is not None:
    say(f'  Reference {reference.name} at each geometry (pyscf) ...')
    for row, e in zip(rows, references.energies(system, reference)):
      row['reference'] = float(e)
      say(f"    geometry {row['index']}: {e:.6f} Ha, VMC - reference "
          f"{1e3 * (row['energy'] - e):+.2f} +- {1e3 * row['error']:.2f} mHa")
  rundir.write_json(path, {
      'reference': None if reference is None else reference.name,
      'label': system.surface.label, 'checkpoint_step': result['checkpoint_step'],
      'parameters': result['parameters'], 'steps': result['steps'],
      'burn_in': result['burn_in'],
      'walkers_per_geometry': batch_size // system.geometry_count,
      'geometries': rows, 'differences': result.get('differences', []),
      **{k: result[k] for k in ('equation_of_state',) if k in result}})
  return path
