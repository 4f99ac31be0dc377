"""scripts/pes_goals.py: the water geometry read back from relax.json's distances, each
goal judged from the recorded figures, an empty artifact rendering as not measured, and the
rows carried over sittings on a stand-in machine."""

import json
import math
import os
import shutil

import numpy as np
import pytest

from ferminet_fast.runtime import rundir
from scripts import pes_goals


def final_of(r_angstrom: float, theta_degrees: float, error_bohr: float = 0.001) -> dict:
  """relax.json's 'final' block of water at bonds r and angle theta (stages/relax.py)."""
  r = r_angstrom * pes_goals.BOHR_PER_ANGSTROM
  hh = 2 * r * math.sin(math.radians(theta_degrees) / 2)
  pairs = (((0, 1), r), ((0, 2), r), ((1, 2), hh))
  return {'distances': [{'atoms': list(a), 'distance_bohr': d, 'error_bohr': error_bohr}
                        for a, d in pairs]}


@pytest.mark.parametrize('start', sorted(pes_goals.H2O_STARTS.values()))
def test_water_geometry_is_read_back_from_the_distances(start):
  """The molecule string of each start, its distances, and back: r and theta recovered."""
  positions = np.array([[float(c) for c in atom.split()[1:]]
                        for atom in pes_goals.water(*start).split(';')])
  oh = np.linalg.norm(positions[1] - positions[0])
  hh = np.linalg.norm(positions[2] - positions[1])
  assert oh == pytest.approx(start[0], abs=1e-7)
  w = pes_goals.water_geometry(final_of(oh, math.degrees(2 * math.asin(hh / (2 * oh)))))
  assert w['r'] == pytest.approx(start[0], abs=1e-7)
  assert w['theta'] == pytest.approx(start[1], abs=1e-5)
  assert 0 < w['r_error'] < 1e-3 and 0 < w['theta_error'] < 0.2


def water_entry(r, theta, converged=True, row='h2o'):
  return {'row': row, 'start': list(pes_goals.H2O_STARTS[row]), 'train_s': 3000.0, 'relax': {
      'final': final_of(r, theta), 'converged': converged, 'moves': 30}}


def test_water_verdicts():
  assert pes_goals.verdict(water_entry(0.9590, 104.20)) == 'met'
  assert 'r 0.9650' in pes_goals.verdict(water_entry(0.9650, 104.52))
  assert 'theta 105.22' in pes_goals.verdict(water_entry(0.9572, 105.22))
  assert 'criterion was not met' in pes_goals.verdict(water_entry(0.9572, 104.52, False))
  assert pes_goals.verdict(water_entry(0.9590, 104.20, row='h2o_low')) == 'met'


def test_water_rows_name_their_start():
  """Each start is 0.05 angstrom and 5 degrees from experiment, one above, one below."""
  starts = pes_goals.H2O_STARTS
  for r, theta in starts.values():
    assert abs(r - pes_goals.H2O_R) == pytest.approx(0.05)
    assert abs(theta - pes_goals.H2O_THETA) == pytest.approx(5.0)
  assert starts['h2o'][1] > pes_goals.H2O_THETA > starts['h2o_low'][1]
  assert 'r -0.05 Å, θ -5°' in pes_goals.row_line(water_entry(0.95, 104.0, row='h2o_low'))
  assert 'r +0.05 Å, θ +5°' in pes_goals.row_line(water_entry(0.95, 104.0))


def surface_entry(surface_s, separate_s, reached=True, late=0):
  rung = {'iterations': 1000, 'energies': [-1.0, -1.1], 'errors': [1e-4, 1e-4]}
  return {'row': 'h2', 'tolerance_ha': 5e-4, 'goal_ratio': 0.25,
          'reference': {'name': 'ccsd/cc-pv[q5]z', 'energies': [-1.0002, -1.1001]},
          'surface': {'train_s': surface_s, 'reached': reached, 'rungs': [rung]},
          'separate': [{'train_s': separate_s / 2, 'reached': k >= late} for k in range(2)]}


def test_surface_verdicts():
  assert pes_goals.verdict(surface_entry(100.0, 400.0)) == 'met'
  assert 'time ratio 0.30 > 0.25' in pes_goals.verdict(surface_entry(120.0, 400.0))
  assert 'surface did not reach 0.5 mHa' in pes_goals.verdict(
      surface_entry(100.0, 400.0, reached=False))
  assert '1 separate runs did not reach it' in pes_goals.verdict(
      surface_entry(50.0, 400.0, late=1))
  line = pes_goals.row_line(surface_entry(100.0, 400.0))
  assert 'worst 0.20 mHa' in line and 'ratio 0.25' in line


def test_an_empty_artifact_renders_as_not_measured(tmp_path):
  assert pes_goals.render_table(str(tmp_path / 'none.json')).startswith('Not measured yet')


def test_the_path_summary_skips_the_newest_move_not_yet_measured():
  """relax.json's newest entry (the nuclei just moved) has no forces yet; the bonds and
  angles count every entry, the force statistics the measured ones."""
  def entry(r, theta, force=None):
    final = final_of(r, theta)['distances']
    rb = final[0]['distance_bohr']
    half = math.radians(theta) / 2
    h = [[rb * math.sin(half), 0, rb * math.cos(half)], [-rb * math.sin(half), 0,
                                                         rb * math.cos(half)]]
    e = {'step': 0, 'positions_bohr': [[0, 0, 0], *h], 'velocity_bohr': [[0, 0, 0]] * 3}
    if force is not None:
      e.update(forces_ha_per_bohr=[[force, 0, force]] * 3,
               force_errors_ha_per_bohr=[[force / 10, 0, force / 10]] * 3)
    return e

  summary = pes_goals.path_summary([entry(1.0, 110, 0.2), entry(0.95, 100)])
  assert summary['bond_range_angstrom'] == pytest.approx([0.95, 1.0])
  assert summary['angle_range_degrees'] == pytest.approx([100, 110])
  assert summary['force_median'] == pytest.approx(0.2)
  assert summary['force_error_median'] == pytest.approx(0.02)


class FakeMachine:
  """Stands in for the processes of row n2: a clock, and trainings that step at the rate the
  sitting's probe read (`probes`, one per sitting; the surface's steps SURFACE_COST times
  as long) after START_S of start-up, towards their
  --config.optim.iterations, until those are done or their seconds run out, resuming from
  the step their run directory holds; evaluations that write each run's energies; and
  trainings told to be killed with their sitting (`killed`) or to fail half way (`short`)."""

  START_S, SURFACE_COST, KILLED_AFTER_S = 20.0, 1.25, 100.0

  def __init__(self, probes, killed=(), short=(), killed_evaluating=()):
    self.now, self.probes, self.ms, self.trained = 0.0, list(probes), None, []
    self.steps = {}  # Run directory -> the step its newest checkpoint holds.
    self.killed, self.short = set(killed), set(short)
    self.killed_evaluating = set(killed_evaluating)

  def perf_counter(self):
    return self.now

  time = perf_counter  # The same clock for the epoch times of the pieces' starts.

  def probe(self, work, config, steps=pes_goals.PROBE_STEPS):
    if steps == pes_goals.PROBE_STEPS:  # A sitting's probe.
      self.ms = self.probes.pop(0)
      return self.ms
    ms = self.probes[0] if self.ms is None else self.ms  # Before or after the sitting's.
    return ms * (self.SURFACE_COST if config.endswith('_pes.py') else 1)

  def run(self, cmd, seconds=None):
    run = next(a.split('=', 1)[1] for a in cmd
               if a.startswith(('--run=', '--config.log.save_path=')))
    name = os.path.basename(run)
    if 'ferminet_fast.train' in cmd:
      if not os.path.isdir(run):
        self.steps[run] = 0
      os.makedirs(run, exist_ok=True)
      if name in self.killed:  # Killed KILLED_AFTER_S after its start.
        self.killed.remove(name)
        self.now += self.KILLED_AFTER_S
        raise KeyboardInterrupt
      target = int(next(a.split('=', 1)[1] for a in cmd
                        if a.startswith('--config.optim.iterations=')))
      start, ms = self.steps[run], self.ms * (self.SURFACE_COST if name == 'surface' else 1)
      reach = min(target, start + int((seconds - self.START_S) * 1e3 / ms))
      if name in self.short:
        self.short.remove(name)
        reach = start + (reach - start) // 2
      wall = self.START_S + (reach - start) * ms / 1e3
      self.steps[run] = reach
      self.trained.append((name, start, reach))
      self.now += wall
      return wall
    if name in self.killed_evaluating:
      self.killed_evaluating.remove(name)
      raise KeyboardInterrupt
    rows = [{'energy': -109.50 + 0.01 * i, 'error': 0.002} for i in range(2)]
    name, doc = (('pes.json', {'geometries': rows}) if run.endswith('surface') else
                 ('eval.json', {'energy': -109.45, 'error': 0.003}))
    with open(os.path.join(run, name), 'w') as f:
      json.dump(doc, f)
    self.now += 10
    return 10.0


def n2_row(monkeypatch, machine, separate: int):
  """Row n2 on `machine` with `separate` separate runs, their reference given."""
  monkeypatch.setattr(pes_goals, 'time', machine)
  monkeypatch.setattr(pes_goals, '_run', machine.run)
  monkeypatch.setattr(pes_goals, 'probe', machine.probe)
  monkeypatch.setattr(pes_goals, 'trained_steps', lambda run: machine.steps.get(run, 0))
  monkeypatch.setattr(pes_goals, 'step_ms', lambda run, after: machine.ms)
  monkeypatch.setattr(pes_goals, 'carry', lambda run: None)
  monkeypatch.setattr(pes_goals.artifacts, 'meta', lambda: {'date': 'today'})
  monkeypatch.setattr(pes_goals, 'reference_energies', lambda row, name=None, only=None: (
      {'name': 'nevpt2/cc-pcv[tq]z', 'energies': [-109.54, -109.53]} if only is None else
      {'name': name, 'geometries': [0], 'energies': [-109.5412]}))
  monkeypatch.setattr(pes_goals, 'n2_parts', lambda state, scratch: [
      *((f'separate_{g}', os.path.join(scratch, f'geometry_{g}'), []) for g in range(separate)),
      ('surface', os.path.join(state, 'surface'), [])])


def test_row_n2_is_carried_across_sittings_in_steps(tmp_path, monkeypatch):
  """Two separate runs and a surface over both geometries, over sittings on machines whose
  probe differs, each sitting on a fresh machine (its scratch gone; only the state
  directory carried): the first sitting's probes fix a separate run's budget (1800 s at 100
  ms: 18000 steps), which the second sitting's machine, twice as slow, trains in twice the
  time, and where the surface begins, probes of both configs its own (twice 18000 steps at
  the ratio of their step times, 200 to 250 ms: 28800); a
  separate run never starts where it cannot finish with its evaluation, the surface is
  continued in pieces, each resuming the step the last reached, and the entry appears only
  when every part is trained and evaluated."""
  machine = FakeMachine([100.0, 200.0, 100.0, 100.0])
  n2_row(monkeypatch, machine, 2)
  state, scratch = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  # A separate run needs 120 + 1.2 x 1800 s and 300 for its evaluation: after the first
  # (1820 s) and its evaluation the sitting has 2050 s left, too few for the second.
  assert pes_goals.run_n2_row(state, scratch, 4000.0) is None
  assert machine.trained == [('geometry_0', 0, 18000)]
  assert os.listdir(scratch) == []  # Evaluated at once: nothing of it is carried.
  progress = pes_goals._json(state, 'progress.json')
  assert progress['budget'] == {'separate': 18000, 'surface': None, 'probe_steps': 300,
                                'ms_per_step': {'separate': [100, 100]}, 'date': 'today'}
  assert progress['trained']['separate_0'] == [
      {'sitting': 0, 'from_step': 0, 'started': 0.0, 'ms_per_step': 100.0, 'wall_s': 1820.0,
       'to_step': 18000}]
  shutil.rmtree(scratch)
  # Twice as slow: the same 18000 steps in 3620 s; then the surface's first piece in the
  # 2250 s left, 8920 steps at 250 ms after its start-up.
  assert pes_goals.run_n2_row(state, scratch, 6000.0) is None
  assert machine.trained[1:] == [('geometry_1', 0, 18000), ('surface', 0, 8920)]
  budget = pes_goals._json(state, 'progress.json')['budget']
  assert budget['surface'] == 28800
  assert budget['surface_probes']['ms_per_step'] == {'separate': [200, 200],
                                                     'surface': [250, 250]}
  shutil.rmtree(scratch)
  # The surface's second piece resumes at 8920 and reaches 28800 with 375 s left, too few
  # for its evaluation (2 x 300 s): that waits for the next sitting, which trains nothing.
  assert pes_goals.run_n2_row(state, scratch, 3000.0) is None
  assert machine.trained[3] == ('surface', 8920, 28800)
  assert 'surface' not in pes_goals._json(state, 'progress.json')['evaluated']
  shutil.rmtree(scratch)
  entry = pes_goals.run_n2_row(state, scratch, 5400.0)
  assert len(machine.trained) == 4 and len(entry['probes']) == 4 and not machine.probes
  assert [p['to_step'] for p in entry['trained']['surface']] == [8920, 28800]
  assert entry['steps']['surface'] == 28800 and entry['budget'] == 'steps'
  assert entry['separate']['energies'] == [-109.45, -109.45]
  assert entry['commands'][1].endswith('--config.optim.iterations=28800')
  # Surface +40 at both (+40 +- 1.4 mHa) against separate +90 and +80 (+85): met at a half.
  assert pes_goals.verdict(entry) == 'met'
  line = pes_goals.row_line(entry)
  assert 'against ccsd(t)/cc-pcv[tq]z at 1.60 bohr: within 1.2 mHa' in line
  assert ("surface 28800 steps, separate 2 × 18000 (1800 s each at the first sitting's step "
          'time, the surface as long at its own)') in line
  assert 'surface − separate -45.0 ± 2.5 mHa; trained in 4755 s against 5440 s' in line
  entry['goal_fraction'] = 0.4
  assert pes_goals.verdict(entry).startswith("missed: the surface's mean error +40.0 ± 1.4")
  entry['reference']['energies'] = [-109.44, -109.43]  # A reference above the separate runs.
  assert pes_goals.verdict(entry).startswith('undetermined')


def test_the_surface_carries_what_resuming_needs(tmp_path):
  """Between pieces the surface's run directory keeps its newest checkpoint and the tail of
  its stats.csv, so that what is committed stays small."""
  run = tmp_path / 'surface'
  for step in ('100', '200', '300', 'retired'):
    (run / 'checkpoints' / step).mkdir(parents=True)
  (run / 'stats.csv').write_text('step,energy\n' + ''.join(f'{i},-1\n' for i in range(1500)))
  (run / 'config.json').write_text('{}')
  assert pes_goals.carry(str(run)) == 300
  assert os.listdir(run / 'checkpoints') == ['300']
  lines = (run / 'stats.csv').read_text().splitlines()
  assert lines[0] == 'step,energy' and lines[1] == '500,-1' and len(lines) == 1 + 1000
  assert rundir.prepare(str(run), 'N2_pes') == (str(run), True)  # What a resume accepts.


def test_a_pieces_step_time_is_read_from_its_own_steps(tmp_path):
  """A piece's median step time counts only the steps it trained (those from the step it
  resumed at), less the first tenth of them, whose start-up steps are slow."""
  run = tmp_path / 'surface'
  run.mkdir()
  assert pes_goals.step_ms(str(run), 0) is None
  times = [500.0] * 100 + [1000.0] * 5 + [70.0, 80.0, 90.0] * 15  # An earlier piece's steps.
  rows = ''.join(f'{i},{t}\n' for i, t in enumerate(times))
  (run / 'stats.csv').write_text('step,step_time_ms\n' + rows)
  assert pes_goals.step_ms(str(run), 100) == 80.0
  assert pes_goals.step_ms(str(run), 0) == 500.0
  with open(run / 'stats.csv', 'a') as f:
    f.write('150,')  # A last row cut short by a training killed while writing it.
  assert pes_goals.step_ms(str(run), 100) == 80.0


def test_a_separate_run_whose_evaluation_was_lost_is_trained_again(tmp_path, monkeypatch):
  """A separate run trained in a sitting that ended during its evaluation, on a machine
  whose scratch did not survive, is trained again from nothing (a restart counted)."""
  machine = FakeMachine([100.0, 100.0], killed_evaluating=['geometry_0'])
  n2_row(monkeypatch, machine, 1)
  state, scratch = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  with pytest.raises(KeyboardInterrupt):
    pes_goals.run_n2_row(state, scratch, 5400.0)
  shutil.rmtree(scratch)
  entry = pes_goals.run_n2_row(state, scratch, 5400.0)
  assert machine.trained[:2] == [('geometry_0', 0, 18000), ('geometry_0', 0, 18000)]
  assert entry['restarts'] == {'separate_0': 1}
  assert entry['separate']['energies'] == [-109.45]


def test_row_n2_after_a_sitting_ended_inside_a_training(tmp_path, monkeypatch):
  """A separate run cut short by the end of its sitting, or failing before its steps, starts
  again from nothing at the next sitting (its directory removed); the surface, stopped
  inside a piece, resumes from the step its checkpoint holds, the piece marked with the
  time it ran; the attempts given up are kept, and counted in each way's wall time."""
  machine = FakeMachine([100.0] * 4, killed=['geometry_0', 'surface'], short=['geometry_0'])
  n2_row(monkeypatch, machine, 1)
  work = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  with pytest.raises(KeyboardInterrupt):
    pes_goals.run_n2_row(*work, 5400.0)
  with pytest.raises(RuntimeError, match='separate_0 training stopped at step 9000 of 18000'):
    pes_goals.run_n2_row(*work, 5400.0)
  with pytest.raises(KeyboardInterrupt):  # The separate run trained; the surface is killed.
    pes_goals.run_n2_row(*work, 5400.0)
  entry = pes_goals.run_n2_row(*work, 5400.0)
  assert machine.trained == [('geometry_0', 0, 9000), ('geometry_0', 0, 18000),
                             ('surface', 0, 14400)]
  assert entry['restarts'] == {'separate_0': 2}
  assert [p['to_step'] for p in entry['trained']['separate_0']] == [18000]
  killed, short = entry['abandoned']['separate_0']
  assert killed['interrupted'] and killed['wall_s'] == 100.0 and killed['to_step'] == 0
  assert short['to_step'] == 9000 and short['wall_s'] == 920.0
  first, second = entry['trained']['surface']
  assert first == {'sitting': 2, 'from_step': 0, 'started': first['started'],
                   'ms_per_step': 100.0, 'interrupted': True, 'wall_s': 100.0, 'to_step': 0}
  assert second['from_step'] == 0 and second['to_step'] == 14400
  assert pes_goals.training_seconds(entry, 'separate') == 100.0 + 920.0 + 1820.0
  assert pes_goals.training_seconds(entry, 'surface') == 100.0 + second['wall_s']


def test_row_n2_refuses_to_go_on_under_other_settings(tmp_path, monkeypatch):
  """A progress file begun under other settings, or a sitting too short for a separate run,
  is refused in words."""
  machine = FakeMachine([100.0, 300.0])
  n2_row(monkeypatch, machine, 2)
  work = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  assert pes_goals.run_n2_row(*work, 3000.0) is None  # One of the two separate runs.
  monkeypatch.setattr(pes_goals, 'N2_SWEEPS', 1000)
  with pytest.raises(SystemExit, match='begun with other settings'):
    pes_goals.run_n2_row(*work, 5400.0)
  monkeypatch.setattr(pes_goals, 'N2_SWEEPS', 500)
  # The second run's 18000 steps at 300 ms: 120 + 1.2 x 5400 s, 300 for its evaluation,
  # 120 of margin.
  with pytest.raises(SystemExit, match='need 7020 s of this sitting'):
    pes_goals.run_n2_row(*work, 5400.0)


def test_row_n2_asks_room_for_a_separate_run_only_while_one_is_left(tmp_path, monkeypatch):
  """Once every separate run is evaluated, a sitting too slow for one (300 ms: 7020 s) still
  continues the surface, which began in the sitting before (its budget 18000 steps at 100
  against 125 ms: 14400) and now reaches it."""
  machine = FakeMachine([100.0, 300.0])
  n2_row(monkeypatch, machine, 1)
  work = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  assert pes_goals.run_n2_row(*work, 3000.0) is None
  assert 'separate_0' in pes_goals._json(work[0], 'progress.json')['evaluated']
  entry = pes_goals.run_n2_row(*work, 5400.0)
  assert machine.trained[1:] == [('surface', 0, 8240), ('surface', 8240, 14400)]
  assert entry['steps']['surface'] == 14400


class LadderMachine:
  """Stands in for the processes of row h2: a training to N iterations continues from its
  run's newest checkpoint at `ms` per step after 20 s of start-up, and when stopped at its
  seconds checkpoints the step it reached; an evaluation puts each geometry `error` * 1000 /
  (the iterations trained) above its reference (the surface's error, or the separate
  runs')."""

  def __init__(self, reference, error, killed=()):
    self.now, self.ms, self.trainings = 0.0, None, []
    self.reference, self.error, self.killed = reference, error, set(killed)

  def perf_counter(self):
    return self.now

  def probe(self, work, config):
    assert config == 'configs/h2.py'
    self.ms = self.probes.pop(0)
    return self.ms

  def run(self, cmd, seconds=None):
    run = next(a.split('=', 1)[1] for a in cmd
               if a.startswith(('--run=', '--config.log.save_path=')))
    name = os.path.basename(run)
    if 'ferminet_fast.train' in cmd:
      target = int(next(a.split('=')[1] for a in cmd if 'optim.iterations=' in a))
      start = pes_goals.trained_to(run)
      if name in self.killed:  # This script stopped inside the training, at its start.
        self.killed.remove(name)
        for step in (start, start + 1, start + 2):
          os.makedirs(os.path.join(run, 'checkpoints', str(step)), exist_ok=True)
        raise KeyboardInterrupt
      need = 20.0 + (target - start) * self.ms / 1000
      lived = need if seconds is None else min(need, seconds)
      reached = target if lived == need else start + int((lived - 20) * 1000 / self.ms)
      os.makedirs(os.path.join(run, 'checkpoints', str(reached)), exist_ok=True)
      self.trainings.append((name, target, lived))
      self.now += lived
      return lived
    iterations = pes_goals.trained_to(run)
    error = self.error['surface' if name == 'surface' else 'separate'] * 1000 / iterations
    if name == 'surface':
      doc = ('pes.json', {'geometries': [{'energy': e + error, 'error': 1e-5}
                                         for e in self.reference]})
    else:
      e = self.reference[int(name.split('_')[1])]
      doc = ('eval.json', {'energy': e + error, 'error': 1e-5})
    with open(os.path.join(run, doc[0]), 'w') as f:
      json.dump(doc[1], f)
    self.now += 10
    return 10.0


def ladder_row(monkeypatch, machine, positions, reference):
  """Row h2 on `machine` at `positions` (G, 2, 3) bohr, its reference given."""
  monkeypatch.setattr(pes_goals, 'time', machine)
  monkeypatch.setattr(pes_goals, '_run', machine.run)
  monkeypatch.setattr(pes_goals, 'probe', machine.probe)
  monkeypatch.setattr(pes_goals.artifacts, 'meta', lambda: {'date': 'today'})
  monkeypatch.setattr(pes_goals, 'geometries_of', lambda config: positions)
  monkeypatch.setattr(pes_goals, 'reference_energies', lambda row: {
      'name': 'ccsd/cc-pv[q5]z', 'energies': reference, 'offset': 0.0})


def test_row_h2_is_carried_across_sittings_in_the_first_sittings_seconds(tmp_path, monkeypatch):
  """A ladder row over three sittings, each on a fresh machine (its scratch gone), the
  second twice as slow: the surface's training cut by the first sitting's end is charged the
  seconds it lived and resumes from its checkpoint; a separate ladder cut by the second's
  starts again from nothing; every time counts in first-sitting seconds."""
  reference = [-1.17, -1.10]
  machine = LadderMachine(reference, {'surface': 0.9e-3, 'separate': 0.4e-3})
  machine.probes = [130.0, 260.0, 130.0]
  ladder_row(monkeypatch, machine, np.array([[[0, 0, 0], [0, 0, 1.4]],
                                             [[0, 0, 0], [0, 0, 2.0]]]), reference)
  state, scratch = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  margin = pes_goals.MARGIN
  # Rungs 500 and 1000 (85 s each, 10 s evaluations), then 130 s left for rung 2000 (150 s).
  assert pes_goals.run_ladder_row('h2', state, scratch, 190.0 + margin + 130.0) is None
  assert machine.trainings[-1] == ('surface', 2000, 130.0)
  shutil.rmtree(scratch)
  # Twice as slow: rung 2000 from step 1846 (60.04 s), both rungs of separate 0, and rung
  # 500 of separate 1, after which 140 s are left, too few to start a rung (240 s).
  assert pes_goals.run_ladder_row('h2', state, scratch, 390.04 + margin + 300.0) is None
  assert machine.trainings[3] == ('surface', 2000, pytest.approx(60.04))
  assert [t[0] for t in machine.trainings[4:]] == ['geometry_0'] * 2 + ['geometry_1']
  shutil.rmtree(scratch)
  entry = pes_goals.run_ladder_row('h2', state, scratch, 1000.0)
  assert [t[:2] for t in machine.trainings[7:]] == [('geometry_1', 500), ('geometry_1', 1000)]
  assert os.listdir(os.path.join(state, 'surface', 'checkpoints')) == ['2000']
  surface = entry['surface']
  assert [r['iterations'] for r in surface['rungs']] == [500, 1000, 2000]
  assert surface['reached'] and surface['train_s'] == pytest.approx(85 + 85 + 130 + 30.02)
  assert [s['train_s'] for s in entry['separate']] == pytest.approx([150.0, 170.0])
  assert entry['restarts'] == {'separate_1': 1} and len(entry['probes']) == 3
  assert pes_goals.verdict(entry) == 'missed: time ratio 1.03 > 0.25'
  assert 'ratio 1.03' in pes_goals.row_line(entry)


@pytest.mark.parametrize('probe_reads', [100.0, 200.0])
def test_one_sitting_timing_checks_the_probe_scaled_ratio(tmp_path, monkeypatch, probe_reads):
  """Row h2 over two sittings on a machine that runs at 100 ms per step throughout, the
  surface climbing in the first, the separate ladders in the second, whose probe reads
  `probe_reads`. Trained again in one sitting, the same processes give the carried ratio
  when the probe read the machine right, and the true ratio when it did not (a probe twice
  too slow halves the separate runs' charged seconds)."""
  reference = [-1.17, -1.10]
  machine = LadderMachine(reference, {'surface': 0.9e-3, 'separate': 0.4e-3})
  machine.ms, probes = 100.0, [100.0, probe_reads]
  ladder_row(monkeypatch, machine, np.array([[[0, 0, 0], [0, 0, 1.4]],
                                             [[0, 0, 0], [0, 0, 2.0]]]), reference)
  monkeypatch.setattr(pes_goals, 'probe', lambda work, config: probes.pop(0))
  state, scratch = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  # The surface's rungs 500, 1000, 2000 (70, 70, 120 s, each evaluated in 10 s), then too
  # little left to start a separate rung.
  assert pes_goals.run_ladder_row('h2', state, scratch, 290.0 + pes_goals.MARGIN + 100.0) is None
  entry = pes_goals.run_ladder_row('h2', state, scratch, 10000.0)
  carried = entry['surface']['train_s'] / sum(s['train_s'] for s in entry['separate'])
  assert carried == pytest.approx(260.0 / (280.0 * 100.0 / probe_reads))
  before = len(machine.trainings)
  source = pes_goals.artifacts.Run({'date': '2026-01-02T00:00:00', 'commit': 'abc'}, entry)
  again = pes_goals.one_sitting_row('h2', source, str(tmp_path / 'again'))
  assert [t[:2] for t in machine.trainings[before:]] == [
      ('surface', 500), ('geometry_0', 500), ('geometry_0', 1000), ('surface', 1000),
      ('geometry_1', 500), ('geometry_1', 1000), ('surface', 2000)]
  assert again['surface_s'] == pytest.approx(260.0)
  assert again['separate_s'] == pytest.approx([140.0, 140.0])
  assert again['climbed'] == {'surface': 2000, 'separate': [1000, 1000]}
  assert pes_goals.verdict(again, entry) == 'missed: time ratio 0.93 > 0.25 in one sitting'
  line = pes_goals.row_line(again, entry)
  assert line.startswith("| h2_one_sitting | row h2's climb (2026-01-02)") and 'ratio 0.93' in line
  # Its accuracy is the source's: a source short of the tolerance is a miss here too, and
  # a source the artifact does not hold leaves it unjudged, a miss.
  short = {**entry, 'separate': [{**entry['separate'][0], 'reached': False},
                                 *entry['separate'][1:]]}
  assert 'row h2: 1 separate runs did not reach it' in pes_goals.verdict(again, short)
  assert 'accuracy not judged' in pes_goals.verdict(again)
  path = str(tmp_path / 'pes.json')
  assert pes_goals.source_of(again, path) is None
  pes_goals.artifacts.append(path, entry, {'date': '2026-01-02T00:00:00', 'commit': 'abc'})
  pes_goals.artifacts.append(path, again, {'date': '2026-01-03T00:00:00', 'commit': 'def'})
  assert pes_goals.source_of(again, path) == entry
  assert pes_goals.source_of(entry, path) is None
  assert 'accuracy not judged' not in pes_goals.render_table(path)


def test_a_surface_stopped_inside_its_training_is_charged_it_whole(tmp_path, monkeypatch):
  """This script stopped (SIGTERM) inside the surface's training: the training's planned
  seconds are charged at the next sitting, which resumes from its newest checkpoint, the
  only one the state keeps."""
  machine = LadderMachine([-1.17], {'surface': 0.1e-3, 'separate': 0.1e-3}, killed=['surface'])
  machine.probes = [100.0, 100.0]
  ladder_row(monkeypatch, machine, np.zeros((1, 2, 3)), [-1.17])
  work = str(tmp_path / 'state'), str(tmp_path / 'scratch')
  with pytest.raises(KeyboardInterrupt):
    pes_goals.run_ladder_row('h2', *work, 1000.0)
  assert os.listdir(os.path.join(work[0], 'surface', 'checkpoints')) == ['2']
  entry = pes_goals.run_ladder_row('h2', *work, 1000.0)
  planned = 1000.0 - pes_goals.MARGIN  # The first training had the whole sitting.
  assert machine.trainings[0] == ('surface', 500, pytest.approx(20 + 498 * 0.1))
  assert entry['surface']['train_s'] == pytest.approx(planned + 20 + 498 * 0.1)


def test_a_ladder_training_that_stops_short_is_an_error(tmp_path, monkeypatch):
  """A training that ends before its rung without being stopped (it failed) is reported,
  not taken for a rung climbed."""
  machine = LadderMachine([-1.17], {'surface': 0.1e-3, 'separate': 0.1e-3})
  machine.probes = [100.0]
  ladder_row(monkeypatch, machine, np.zeros((1, 2, 3)), [-1.17])
  monkeypatch.setattr(pes_goals, '_run', lambda cmd, seconds=None: 5.0)
  with pytest.raises(RuntimeError, match='surface training to 500 iterations stopped after 5 s'):
    pes_goals.run_ladder_row('h2', str(tmp_path / 'state'), str(tmp_path / 'scratch'), 1000.0)


def test_a_ladder_training_whose_final_state_was_bad_climbs_from_its_last_good_one(
    tmp_path, monkeypatch):
  """A training that ran all its steps to its rung but whose final state was not finite (no
  checkpoint of it; result.json says it ended whole): the rung counts as climbed and is
  evaluated at the last good checkpoint, from which the next rung resumes."""
  machine = LadderMachine([-1.17], {'surface': 0.45e-3, 'separate': 0.1e-3})
  machine.probes = [100.0]
  ladder_row(monkeypatch, machine, np.zeros((1, 2, 3)), [-1.17])
  stand_in = machine.run

  def final_state_bad_at_500(cmd, seconds=None):
    lived = stand_in(cmd, seconds)
    run = next((a.split('=', 1)[1] for a in cmd if a.startswith('--config.log.save_path=')), '')
    if run.endswith('surface') and '--config.optim.iterations=500' in cmd:
      os.rename(os.path.join(run, 'checkpoints', '500'), os.path.join(run, 'checkpoints', '497'))
      with open(os.path.join(run, 'result.json'), 'w') as f:
        json.dump({'iterations': 500, 'complete': True}, f)
    return lived

  monkeypatch.setattr(pes_goals, '_run', final_state_bad_at_500)
  entry = pes_goals.run_ladder_row('h2', str(tmp_path / 'state'), str(tmp_path / 'scratch'),
                                   1000.0)
  rungs = entry['surface']['rungs']
  assert [r['iterations'] for r in rungs] == [500, 1000] and rungs[-1]['within']
  assert rungs[0]['evaluated_step'] == 497 and 'evaluated_step' not in rungs[1]
  assert rungs[0]['energies'] == pytest.approx([-1.17 + 0.45 / 497])
  assert machine.trainings[1] == ('surface', 1000, pytest.approx(20 + 503 * 0.1))


def test_a_reference_at_some_geometries_is_theirs():
  """The reference at a subset of a row's geometries (the check of row n2's) equals the
  full curve's there."""
  pytest.importorskip('pyscf')
  whole = pes_goals.reference_energies('h2', 'hf/sto-3g')
  some = pes_goals.reference_energies('h2', 'hf/sto-3g', [0, 5])
  assert some['geometries'] == [0, 5]
  assert some['energies'] == pytest.approx([whole['energies'][0], whole['energies'][5]],
                                           abs=1e-9)


def test_row_n2_in_progress_is_shown_as_far_as_it_has_come(tmp_path):
  """A row carried over sittings appears in the table before it is done: the separate runs
  evaluated so far, each against its geometry's reference, the surface's steps, unjudged."""
  assert pes_goals.in_progress(str(tmp_path)) == {}
  assert pes_goals.render_table(str(tmp_path / 'pes_goals.json')).startswith('Not measured')
  progress = {
      'setup': {'positions_bohr': [[[0, 0, 0], [0, 0, r]] for r in (2.0, 2.5, 3.0)]},
      'probes': [{'date': '2026-12-06T09:00:00', 'commit': 'abcdef123'}] * 2,
      'budget': {'separate': 1000, 'surface': 2700},
      'trained': {'separate_0': [], 'separate_2': [], 'surface': [{'to_step': 900}]},
      'evaluated': {'separate_2': {'energies': [-109.40], 'errors': [0.005]},
                    'separate_0': {'energies': [-109.50], 'errors': [0.004]}},
      'reference': {'name': 'nevpt2', 'energies': [-109.52, -109.50, -109.45]}}
  os.makedirs(tmp_path / 'pes_n2')
  with open(tmp_path / 'pes_n2' / 'progress.json', 'w') as f:
    json.dump(progress, f)
  line = pes_goals.progress_line(pes_goals.in_progress(str(tmp_path))['n2'])
  assert ('in progress after 2 sittings: 2 of 3 separate runs of 1000 steps trained and '
          'evaluated (errors +20.0 ± 4.0, +50.0 ± 5.0 mHa); the surface trained 900 of 2700 '
          'steps') in line
  assert line.endswith('| not yet judged |')
  table = pes_goals.render_table(str(tmp_path / 'pes_goals.json'))
  assert line in table and '*Row n2 in progress: from `' in table and 'commit abcdef1' in table
