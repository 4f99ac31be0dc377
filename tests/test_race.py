"""scripts/race.py: FermiNet's per-step log lines are read, the reported energy is the mean of
the last 20% of steps; races alternate which code goes first and change our seed, FermiNet
runs at the settings asked for (recorded in the artifact), and the ratio of evaluated
errors is reported as a mean and sample standard deviation over the races."""

import json
import os
import sys

import jax
import numpy as np
import pytest

from scripts import artifacts
from scripts import race


def test_ferminet_log_line():
  line = ('I1123 10:07:01.123 140 train.py:1055] Step 00042: -128.1234 E_h, exp. '
          'variance=12.3456 E_h^2, pmove=0.53\n')
  m = race.reference.STEP_LINE.search(line)
  assert m and (m.group(1), float(m.group(2)), float(m.group(3))) == ('00042', -128.1234,
                                                                       12.3456)


def test_summary_is_mean_of_last_fifth():
  rng = np.random.default_rng(0)
  energy = np.concatenate([np.full(800, -120.0), -128.9 + 0.01 * rng.normal(size=200)])
  s = race.summary({'t': list(np.arange(1000.0)), 'energy': energy}, exact=-128.9376)
  assert s['steps'] == 1000 and s['first_step_s'] == 0.0
  assert abs(s['error_mha'] - 1e3 * (energy[800:].mean() + 128.9376)) < 1e-9
  assert 0.3 < s['stat_mha'] < 2.0  # 10 mHa noise over 200 steps: about 0.7 mHa.


def test_ferminet_evaluation_restores_its_last_checkpoint(tmp_path):
  """FermiNet's inference run (a stand-in executable here) is started on the run's
  checkpoints with the optimizer off, and its step energies are reblocked into an error,
  a non-finite one left out and counted."""
  fn_dir, run_dir = tmp_path / 'fn', tmp_path / 'run'
  (fn_dir / 'venv' / 'bin').mkdir(parents=True)
  run_dir.mkdir()
  for step in (120, 2693):
    (run_dir / f'qmcjax_ckpt_{step:06d}.npz').write_bytes(b'')
  fake = fn_dir / 'venv' / 'bin' / 'ferminet'
  fake.write_text(
      f'#!{sys.executable}\n'
      'import json, sys\n'
      'args = dict(a[len("--config."):].split("=", 1) for a in sys.argv[1:]\n'
      '            if a.startswith("--config."))\n'
      f'json.dump(dict(args, OPENBLAS=__import__("os").environ.get("OPENBLAS_NUM_THREADS")), '
      f'open({str(tmp_path / "args.json")!r}, "w"))\n'
      'for i in range(int(args["optim.iterations"])):\n'
      '  e = -128.8 + (0.01 if i % 2 else -0.01) if i != 7 else float("nan")\n'
      '  print(f"Step {i:05d}: {e} E_h, exp. variance=1.0 E_h^2, pmove=0.5", file=sys.stderr)\n')
  fake.chmod(0o755)
  ev = race.evaluate_ferminet(str(fn_dir), 'Ne', str(run_dir), str(tmp_path / 'out'),
                              sweeps=64, burn_in=10, exact=-128.9376)
  args = json.loads((tmp_path / 'args.json').read_text())
  assert args['optim.optimizer'] == 'none' and args['log.restore_path'] == str(run_dir)
  assert args['mcmc.burn_in'] == '10' and args['system.atom'] == 'Ne'
  # Best settings by default: its folx Laplacian, its BLAS at one thread.
  assert args['optim.laplacian'] == 'folx' and args['OPENBLAS'] == '1'
  # Sweep 7's nan is left out of the mean (32 sweeps at -0.01, 31 at +0.01) and counted.
  assert ev['checkpoint_step'] == 2693 and ev['sweeps'] == 63 and ev['nonfinite'] == 1
  assert abs(ev['error_mha'] - 1e3 * (-128.8 - 0.01 / 63 + 128.9376)) < 1e-6
  assert 0 <= ev['stat_mha'] < 5


def _fake_ferminet(tmp_path):
  """A stand-in FermiNet: logs steps until stopped (or for optim.iterations steps), writes a
  checkpoint, and records its arguments and BLAS threads per call."""
  fn_dir = tmp_path / 'fn'
  (fn_dir / 'venv' / 'bin').mkdir(parents=True)
  fake = fn_dir / 'venv' / 'bin' / 'ferminet'
  fake.write_text(
      f'#!{sys.executable}\n'
      'import json, os, sys, time\n'
      'args = dict(a[len("--config."):].split("=", 1) for a in sys.argv[1:]\n'
      '            if a.startswith("--config."))\n'
      'args["OPENBLAS"] = os.environ.get("OPENBLAS_NUM_THREADS")\n'
      f'with open({str(tmp_path / "calls.jsonl")!r}, "a") as f: f.write(json.dumps(args) + "\\n")\n'
      'os.makedirs(args["log.save_path"], exist_ok=True)\n'
      'open(os.path.join(args["log.save_path"], "qmcjax_ckpt_000010.npz"), "w").close()\n'
      'for i in range(min(int(args["optim.iterations"]), 40)):\n'
      '  e = -128.8 + 0.001 * (i % 3)\n'
      '  print(f"Step {i:05d}: {e} E_h, exp. variance=1.0 E_h^2, pmove=0.5",\n'
      '        file=sys.stderr, flush=True)\n')
  fake.chmod(0o755)
  return fn_dir


def _race_args(fn_dir, settings):
  import argparse
  return argparse.Namespace(ferminet=str(fn_dir), seconds=30.0, seed=7, eval_sweeps=20,
                            peer_settings=settings)


@pytest.mark.parametrize('settings', ['best', 'default'])
def test_races_alternate_order_change_seed_and_record_peer_settings(tmp_path, monkeypatch,
                                                                    settings):
  fn_dir = _fake_ferminet(tmp_path)
  order, seeds = [], []
  real = race.race_ferminet

  def ours(name, seconds, run_dir, extra, seed=0):
    order.append('ours')
    seeds.append(seed)
    return {'t': [1.0] * 20, 'energy': [-128.9] * 20, 'variance': [1.0] * 20, 'wall_s': 2.0}

  def ferminet(*a, **k):
    order.append('ferminet')
    return real(*a, **k)

  monkeypatch.setattr(race, 'race_ours', ours)
  monkeypatch.setattr(race, 'race_ferminet', ferminet)
  monkeypatch.setattr(race, 'evaluate_ours', lambda d, s, b, exact, parameters: {
      'error_mha': 20.0 if parameters == 'last' else 15.0, 'stat_mha': 1.0,
      'parameters': parameters, 'checkpoint_step': 20, 'sweeps': s})
  entries = []
  for repeat in range(3):
    (tmp_path / f'r{repeat}').mkdir()
    entries.append(race.one_race(_race_args(fn_dir, settings), 'Ne', repeat, [],
                                 str(tmp_path / f'r{repeat}')))
  assert order == ['ferminet', 'ours', 'ours', 'ferminet', 'ferminet', 'ours']
  assert [e['first'] for e in entries] == ['ferminet', 'ours', 'ferminet']
  assert seeds == [7, 8, 9] and [e['seed_ours'] for e in entries] == [7, 8, 9]
  assert all(e['peer_settings'] == settings for e in entries)
  # Each FermiNet setting has its own curves file: races of one do not overwrite another's.
  pngs = {race.png_name('Ne', entries[0]['seconds'], s) for s in race.reference.PEER_SETTINGS}
  assert len(pngs) == len(race.reference.PEER_SETTINGS)
  calls = [json.loads(line) for line in (tmp_path / 'calls.jsonl').read_text().splitlines()]
  assert len(calls) == 6  # Three races, three evaluations.
  for call in calls:
    assert ('optim.laplacian' in call) == (settings == 'best')
    assert call['OPENBLAS'] == ('1' if settings == 'best' else os.environ.get(
        'OPENBLAS_NUM_THREADS'))
  # The headline: our averaged parameters (evaluate's default) against FermiNet's last
  # checkpoint; last against last beside.
  fn_error = 1e3 * (-128.8 + 0.001 * (sum(i % 3 for i in range(20)) / 20) + 128.9376)
  for e in entries:
    assert e['ours_evaluated_last']['parameters'] == 'last'
    assert e['ours_evaluated']['parameters'] == 'average'
    assert abs(race.default_ratio(e) - 15.0 / e['ferminet_evaluated']['error_mha']) < 1e-12
    assert abs(race.like_for_like_ratio(e) - 20.0 / e['ferminet_evaluated']['error_mha']) < 1e-12
    assert abs(e['ferminet_evaluated']['error_mha'] - fn_error) < 1e-3


def test_races_added_later_continue_the_numbering(tmp_path):
  """A later sitting's races continue the order and seeds of the races the artifact holds
  for the same system, budget and FermiNet settings; other budgets and settings and the
  races before the artifact format do not count."""
  path = str(tmp_path / 'race.json')
  assert race.races_held(path, 'Ne', 1800, 'best') == 0
  for repeat, (seconds, settings) in enumerate([(1800, 'best'), (600, 'best'), (1800, 'best'),
                                                (1800, 'default')]):
    artifacts.append(path, {'system': 'Ne', 'seconds': float(seconds), 'repeat': repeat,
                            'peer_settings': settings}, artifacts.meta())
  assert race.races_held(path, 'Ne', 1800, 'best') == 2
  assert race.races_held(path, 'N2', 1800, 'best') == 0
  assert race.first_code(2) == 'ferminet' and race.seed_of(0, 2) == 2


def test_replot_draws_the_latest_race_of_each_group_to_its_own_file(tmp_path, monkeypatch):
  """The curves are drawn again from the artifact alone: one file per (system, budget,
  FermiNet settings), from that group's latest race."""
  path = str(tmp_path / 'race.json')
  run = {'t': [1.0, 2.0, 3.0], 'energy': [-128.0, -128.5, -128.8]}
  for order, (seconds, settings) in enumerate([(600, 'best'), (600, 'default'), (600, 'best'),
                                               (1800, 'best')]):
    artifacts.append(path, {'system': 'Ne', 'seconds': float(seconds), 'exact': -128.9376,
                            'peer_settings': settings, 'ours': run, 'ferminet': run,
                            'order': order}, artifacts.meta())
  drawn = []
  monkeypatch.setattr(race, 'REPO', str(tmp_path))
  monkeypatch.setattr(race, 'plot', lambda entry, png: drawn.append((entry['order'], png)))
  written = race.replot(path)
  assert written == [race.png_name('Ne', 600, 'best'), race.png_name('Ne', 600, 'default'),
                     race.png_name('Ne', 1800, 'best')]
  assert drawn == [(order, os.path.join(str(tmp_path), png))
                   for order, png in zip((2, 1, 3), written)]


def test_a_race_where_ours_ended_before_its_budget_is_marked():
  """A race in which our run ended at its step limit well before the budget (a handicap for
  ours, in races before the limits were raised) is named in the verdict, and so is one that
  ended short of the raised limit (a failure); one that ran to the budget is not."""
  def entry(last_step_s, **more):
    return {'system': 'Ne', 'seconds': 1800.0, 'ours': {'t': [20.0, last_step_s]},
            'exact_source': 'Chakravorty et al. 1993',
            'ours_evaluated': {'error_mha': 3.0, 'parameters': 'average'},
            'ferminet_evaluated': {'error_mha': 45.0}, **more}
  raised = {'step_limit': int(race.RACE_ITERATIONS)}
  assert race.ended_early(entry(1037.0)) == 'limit'
  assert race.ended_early(entry(1037.0, **raised)) == 'failed'
  assert race.ended_early({**entry(0.0, **raised), 'ours': {'t': []}}) == 'failed'
  assert race.ended_early(entry(1799.0)) is None
  assert race.ended_early(entry(1799.0, **raised)) is None
  assert 'stopped at its config\'s step limit before the budget in 1 of 2' in race.verdict(
      'Ne', 1800, [entry(1037.0), entry(1799.0)])
  assert 'ours failed before the budget in 1 of 2' in race.verdict(
      'Ne', 1800, [entry(1037.0, **raised), entry(1799.0, **raised)])
  assert 'stopped' not in race.verdict('Ne', 1800, [entry(1799.0)])


def test_goals_are_judged_race_by_race_on_the_default_outputs(tmp_path):
  """The headline compares each code's default output: our averaged parameters against
  FermiNet's last. A goal is met only when every race is within both bounds (our error and
  the ratio); last against last is shown beside and never decides."""
  from scripts import artifacts

  def entry(averaged, theirs, seconds=1800.0, last=None):
    s = {'steps': 100, 'error_mha': theirs, 'stat_mha': 1.0}
    last = 2 * averaged if last is None else last
    return {'system': 'Ne', 'seconds': seconds, 'peer_settings': 'best',
            'ferminet_summary': s, 'ours_summary': dict(s, error_mha=last),
            'ours_evaluated_last': {'error_mha': last, 'stat_mha': 1.0, 'parameters': 'last'},
            'ours_evaluated': {'error_mha': averaged, 'stat_mha': 1.0,
                               'parameters': 'average'},
            'ferminet_evaluated': {'error_mha': theirs, 'stat_mha': 1.0}}

  s = race.spread([0.4, 0.5, 0.6])
  assert s['n'] == 3 and abs(s['mean'] - 0.5) < 1e-12 and abs(s['sd'] - 0.1) < 1e-12
  # Ne 1800 s: <= +5 mHa and <= 0.15x FermiNet in every race.
  assert race.verdict('Ne', 1800, [entry(4, 40), entry(5, 50), entry(3, 60)]).startswith('met')
  # Within both bounds on the mean, not in one race: missed.
  assert race.verdict('Ne', 1800, [entry(2, 40), entry(2, 50), entry(6, 60)]).startswith(
      'missed')
  # Within the error bound, the ratio above 0.15 in one race: missed.
  assert race.verdict('Ne', 1800, [entry(4, 40), entry(4, 20), entry(4, 40)]).startswith(
      'missed')
  # The last parameters never decide, in either direction.
  assert race.verdict('Ne', 1800, [entry(4, 40, last=400)] * 3).startswith('met')
  assert race.verdict('Ne', 1800, [entry(8, 400, last=1)] * 3).startswith('missed')
  assert 'of the 3 needed' in race.verdict('Ne', 1800, [entry(4, 40)])
  # A race whose averaged parameters were not evaluated is not judged, and is named.
  old = entry(4, 40)
  del old['ours_evaluated']
  assert 'without both' in race.verdict('Ne', 1800, [entry(4, 40)] * 3 + [old])
  assert race.verdict('Ne', 600, [entry(14, 100, 600.0)] * 3).startswith('met')
  assert race.verdict('Ne', 600, [entry(16, 100, 600.0)] * 3).startswith('missed')
  path = str(tmp_path / 'race.json')
  for averaged in (4.0, 5.0, 6.0):
    artifacts.append(path, entry(averaged, 100.0), {'recorded': True, 'machine': None,
                                                    'date': '2026-11-25T00:00:00',
                                                    'commit': 'abc'})
  text = race.render_table(path)
  row = next(line for line in text.splitlines() if line.startswith('| Ne | 1800 | best | 3 |'))
  cells = [c.strip() for c in row.split('|')]
  assert cells[7] == '+5.0 ± 1.0 (n = 3)' and cells[8] == '0.05 ± 0.01 (n = 3)'
  assert cells[9] == '+10.0 ± 2.0 (n = 3)' and cells[10] == '0.10 ± 0.02 (n = 3)'
  assert cells[13].startswith('missed')  # 6 mHa in one race is above +5.


def test_electron_gas_is_judged_on_the_difference_of_evaluated_energies():
  """The gas has no exact energy to take errors from: ours must be lower than FermiNet's by
  more than the combined standard error in every race."""
  def entry(ours, theirs, stat=1.0):
    return {'system': 'HEG', 'seconds': 600.0, 'exact_source': race.HARTREE_FOCK,
            'ours_evaluated': {'error_mha': ours, 'stat_mha': stat, 'parameters': 'average'},
            'ours_evaluated_last': {'error_mha': 99.0, 'stat_mha': stat, 'parameters': 'last'},
            'ferminet_evaluated': {'error_mha': theirs, 'stat_mha': stat}}

  d, err = race.difference(entry(-10.0, -6.0, stat=3.0))
  assert d == -4.0 and abs(err - 3.0 * 2 ** 0.5) < 1e-12
  assert race.verdict('HEG', 600, [entry(-10.0, 0.0)] * 3).startswith('met')
  # Lower in every race, but within the combined error bar in one: missed.
  assert race.verdict('HEG', 600, [entry(-10.0, 0.0)] * 2 + [entry(-1.0, 0.0)]).startswith(
      'missed')
  assert race.verdict('HEG', 600, [entry(5.0, 0.0)] * 3).startswith('missed')
  assert 'of the 3 needed' in race.verdict('HEG', 600, [entry(-10.0, 0.0)])
  assert race.verdict('HEG', 600, [{'system': 'HEG'}]).startswith('not judged')
  # Errors from the Hartree-Fock energy: no ratio of them is formed.
  assert race.like_for_like_ratio(entry(-10.0, 5.0)) is None


def test_every_race_has_its_own_row_with_its_time_per_step(tmp_path):
  """The per-race table lists each race of a group in the order run, with each code's time
  per step from its logged steps (start-up excluded) and what the goal compares: the
  difference for the gas, the ratio of errors for an atom."""
  def entry(system, ours, theirs, first, seed, ours_t, fn_t):
    gas = system == 'HEG'
    return {'system': system, 'seconds': 1800.0, 'peer_settings': 'default', 'first': first,
            'seed_ours': seed,
            'exact_source': race.HARTREE_FOCK if gas else 'Chakravorty et al. 1993',
            'ours': {'t': ours_t}, 'ferminet': {'t': fn_t},
            'ours_summary': {'steps': len(ours_t), 'first_step_s': ours_t[0]},
            'ferminet_summary': {'steps': len(fn_t), 'first_step_s': fn_t[0]},
            'ours_evaluated': {'error_mha': ours, 'stat_mha': 3.0, 'parameters': 'average'},
            'ours_evaluated_last': {'error_mha': 2 * ours, 'stat_mha': 3.0,
                                    'parameters': 'last'},
            'ferminet_evaluated': {'error_mha': theirs, 'stat_mha': 4.0}}

  path = str(tmp_path / 'race.json')
  meta = {'recorded': True, 'date': '2026-11-25T00:00:00', 'machine': None, 'commit': 'abc'}
  ours_t = list(np.linspace(30.0, 1800.0, 6))  # 5 intervals of 354 s.
  fn_t = list(np.linspace(60.0, 1800.0, 3))  # 2 intervals of 870 s.
  artifacts.append(path, entry('HEG', -510.0, -300.0, 'ferminet', 0, ours_t, fn_t), meta)
  artifacts.append(path, entry('HEG', -500.0, -400.0, 'ours', 1, ours_t, fn_t), meta)
  artifacts.append(path, entry('Ne', 30.0, 60.0, 'ours', 1, ours_t, fn_t), meta)
  rows = [line for line in race.render_each(path).splitlines() if line.startswith('| HEG')
          or line.startswith('| Ne')]
  assert len(rows) == 3
  ne, gas1, gas2 = rows  # Atoms before the gas, as in the summary table.
  assert gas1.startswith('| HEG | 1800 | default | 1 | 2026-11-25 | FermiNet | 0 | 3, 6 |')
  assert '| 60, 30 | 870000, 354000 |' in gas1
  # FermiNet's last, our averaged, their comparison; our last and last against last.
  assert '| -300.0 ± 4.0 | -510.0 ± 3.0 | -210.0 ± 5.0 | -1020.0 ± 3.0 | -720.0 ± 5.0 |' in gas1
  assert '| 2 | 2026-11-25 | ours | 1 |' in gas2 and '| -100.0 ± 5.0 |' in gas2
  assert '| +60.0 ± 4.0 | +30.0 ± 3.0 | 0.50 | +60.0 ± 3.0 | 1.00 |' in ne


def test_the_electron_gas_is_measured_from_its_hartree_fock_energy():
  """configs/heg.py has no exact energy: the race measures both codes from the cell's
  Hartree-Fock energy, 8.49148 Ha for 7 + 7 electrons at r_s = 1."""
  from ferminet_fast.physics import systems
  from ferminet_fast.runtime import cli
  cfg = cli.load_config_file(os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                          'configs', 'heg.py'))
  try:
    assert abs(race.reference_energy(systems.make_system(cfg.system)) - 8.49148) < 1e-5
  finally:
    jax.config.update('jax_enable_x64', False)
