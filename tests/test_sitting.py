"""scripts/sitting.py, the GPU sitting: its tiny form runs on a CPU through
`python -m scripts.benchmark --sitting gpu` and writes an artifact that
scripts/benchmark_tables.py renders; measurements run in priority order and those over the
time budget are skipped and named; each variant's energy is shown beside float32's; the
chip's peak is looked up by device kind."""

import math
import types

import pytest

from scripts import artifacts
from scripts import benchmark
from scripts import benchmark_tables
from scripts import sitting


def test_tiny_sitting_through_the_command_writes_and_renders(tmp_path):
  path = str(tmp_path / 'gpu_sitting.json')
  # One product that compiles on a CPU and one that does not (no TF32 there).
  assert benchmark.main(['--sitting', 'gpu', '--tiny', '--optimizers', 'adam', '--precisions',
                         'float32', 'tf32', '--json', path]) == path
  run = artifacts.latest(path)
  assert run.meta['recorded'] and run.meta['date'] and 'commit' in run.meta
  assert {'python', 'jax', 'jaxlib', 'flax'} <= set(run.meta['versions'])
  d = run.data
  assert d['tiny'] and d['device']['platform'] == 'cpu' and d['device']['count'] >= 1
  assert d['sizes']['batch'] == 8 and d['peaks_tflops'] is None and 'pretraining' in d[
      'not_measured']
  measured, failed = d['rows']
  assert (measured['system'], measured['optimizer'], measured['precision'],
          measured['status']) == ('He', 'adam', 'float32', 'measured')
  assert measured['ms_per_step'] > 0 and measured['compile_s'] > 0
  assert measured['flops_per_step'] > 0 and measured['tflops'] > 0
  assert measured['percent_of_float32_peak'] is None  # No peak for a CPU.
  assert len(measured['energies']) == 2 and math.isfinite(measured['energy'])
  assert failed['precision'] == 'tf32' and failed['status'] == 'failed' and failed['reason']
  text = benchmark_tables.render_sitting(path)
  assert '| He (2) | adam | float32 |' in text and 'Failed: He adam tf32' in text
  assert 'not a measurement' in text and 'gpu_sitting.json' in text


def _fake_clock(monkeypatch):
  """sitting's clock, advanced by each fake measurement's wall time."""
  now = [0.0]
  monkeypatch.setattr(sitting, 'time', types.SimpleNamespace(
      monotonic=lambda: now[0], perf_counter=lambda: now[0]))
  return now


def test_budget_skips_what_would_overrun_and_the_table_compares_with_float32(
    tmp_path, monkeypatch):
  now = _fake_clock(monkeypatch)

  def run_one(name, optimizer, precision, tiny, timeout_s):
    now[0] += 100.0
    energy = -128.5 + (0.002 if precision == 'bf16' else 0.0)
    return {'build_s': 5.0, 'compile_s': 60.0, 'ms_per_step': 50.0, 'energy': energy,
            'energies': [energy], 'nonfinite': 0, 'flops_per_step': 1.675e12,
            'mcmc_loop_counted_once': True, 'tflops': 33.5,
            'percent_of_float32_peak': 100 * 33.5 / 67.0, 'laplacian': 'folx',
            'status': 'measured', 'wall_s': 100.0}

  monkeypatch.setattr(sitting, 'run_one', run_one)
  rows = sitting.sitting(['Ne', 'C2H4'], ['kfac'], ['float32', 'bf16'], False, 250.0, 0.0,
                         say=lambda *a, **k: None)
  # Ne first (nothing expected); C2H4 expected at 100 s x 16 / 10 electrons: over 250 s.
  assert [(r['system'], r['precision'], r['status']) for r in rows] == [
      ('Ne', 'float32', 'measured'), ('C2H4', 'float32', 'skipped'),
      ('Ne', 'bf16', 'measured'), ('C2H4', 'bf16', 'skipped')]
  assert sitting.expected_s(rows[:1], 'C2H4') == pytest.approx(160.0)
  facts = {'platform': 'gpu', 'kind': 'NVIDIA H200', 'count': 1,
           'peaks': sitting.peaks('NVIDIA H200')}
  path = str(tmp_path / 'gpu_sitting_nvidia_h200.json')
  data = sitting.record(rows, sitting.STANDARD, facts, 250.0, 200.0, False)
  artifacts.append(path, data)
  text = benchmark_tables.render_sitting(path)
  same = '| 50.0 | 60.0 | 1675 | 33.5 | 50.0 |'  # ms, compile s, GFLOP, TFLOP/s, % of peak.
  first = artifacts.latest(path).meta['date'][:10]
  assert [line for line in text.splitlines() if line.startswith('| Ne (10) |')] == [
      f'| Ne (10) | kfac | float32 {same} −128.5000 | – | {first} |',
      f'| Ne (10) | kfac | bf16 {same} −128.4980 | +2.0 | {first} |']
  assert 'Not measured, skipped (over the budget): C2H4 kfac float32, C2H4 kfac bf16.' in text
  assert 'float32 peak 67 TFLOP/s' in text and 'batch 4096' in text and 'One sitting' in text
  # A later sitting alike measures only what the first lacked (--missing); the table holds
  # both, each row from the sitting that measured it.
  like = {'device': {'kind': 'NVIDIA H200'}, 'sizes': data['sizes'], 'tiny': False}
  before = {key for key, (_, row) in benchmark_tables.sitting_variants(
      benchmark_tables.sitting_runs(path, like)).items() if row['status'] == 'measured'}
  assert before == {('Ne', 'kfac', 'float32'), ('Ne', 'kfac', 'bf16')}
  now[0] = 0.0
  later = sitting.sitting(['Ne', 'C2H4'], ['kfac'], ['float32', 'bf16'], False, 250.0, 0.0,
                          say=lambda *a, **k: None, measured_before=before)
  assert [(r['system'], r['precision'], r['status']) for r in later] == [
      ('C2H4', 'float32', 'measured'), ('C2H4', 'bf16', 'measured')]
  artifacts.append(path, sitting.record(later, sitting.STANDARD, facts, 250.0, 200.0, False))
  both = benchmark_tables.render_sitting(path)
  assert [line.split(' | ')[:3] for line in both.splitlines() if line.startswith('| ')][1:] == [
      ['| Ne (10)', 'kfac', 'float32'], ['| Ne (10)', 'kfac', 'bf16'],
      ['| C2H4 (16)', 'kfac', 'float32'], ['| C2H4 (16)', 'kfac', 'bf16']]
  second = artifacts.latest(path).meta['date'][:10]
  assert next(line for line in both.splitlines() if line.startswith(
      '| C2H4 (16) | kfac | bf16')).endswith(f'| +2.0 | {second} |')
  assert 'Not measured' not in both and '2 sittings' in both
  # The docs show the newest sittings that are not a tiny check, or say none was measured.
  monkeypatch.setattr(benchmark_tables, 'SITTING_GLOB', str(tmp_path / 'gpu_sitting_*.json'))
  assert benchmark_tables.render_sitting() == both
  artifacts.write(path, sitting.record(rows, sitting.TINY, facts, 250.0, 200.0, True))
  assert 'No GPU sitting has been measured yet' in benchmark_tables.render_sitting()


def test_a_measurement_that_outlasts_the_budget_is_cut_and_the_sitting_goes_on(tmp_path,
                                                                                monkeypatch):
  # A real child process, stopped long before it could build and compile.
  row = sitting.run_one('He', 'adam', 'float32', True, 1.0)
  assert row['status'] == 'cut' and 'at its 1 s limit' in row['reason']
  assert 1.0 <= row['wall_s'] < 30.0
  now = _fake_clock(monkeypatch)
  walls, limits = {'Ne': 100.0, 'He': 30.0}, []  # C2H4 would compile for ever.

  def run_one(name, optimizer, precision, tiny, timeout_s):
    limits.append(timeout_s)
    wall = min(walls.get(name, float('inf')), timeout_s)
    now[0] += wall
    if wall == timeout_s:
      return {'status': 'cut', 'wall_s': wall, 'reason': f'stopped {wall:.0f} s after it '
              f'started, at its {timeout_s:.0f} s limit, compiling (built in 20 s)'}
    return {'status': 'measured', 'wall_s': wall, 'build_s': 5.0, 'compile_s': 20.0,
            'ms_per_step': 50.0, 'energy': -1.0, 'energies': [-1.0], 'nonfinite': 0,
            'flops_per_step': 1e11, 'mcmc_loop_counted_once': True, 'tflops': 2.0,
            'percent_of_float32_peak': None, 'laplacian': 'folx'}

  monkeypatch.setattr(sitting, 'run_one', run_one)
  rows = sitting.sitting(['Ne', 'C2H4', 'He'], ['kfac'], ['float32'], False, 560.0, 0.0,
                         say=lambda *a, **k: None)
  # C2H4, expected at 100 s x 16 / 10 electrons, is stopped at twice that; He still runs.
  assert [(r['system'], r['status']) for r in rows] == [
      ('Ne', 'measured'), ('C2H4', 'cut'), ('He', 'measured')]
  # Ne: all that is left; C2H4: twice its 160 s; He: what is left, under twice Ne's 100 s.
  assert limits == pytest.approx([560.0, 320.0, 140.0])
  assert sitting.allowed_s(500.0, 0.0) == 500.0 and sitting.allowed_s(500.0, 10.0) == 120.0
  assert sitting.allowed_s(100.0, 160.0) == 100.0  # Never past the budget.
  path = str(tmp_path / 'gpu_sitting_nvidia_h200.json')
  artifacts.append(path, sitting.record(rows, sitting.STANDARD, {
      'platform': 'gpu', 'kind': 'NVIDIA H200', 'count': 1, 'peaks': None}, 560.0, 450.0,
      False))
  assert ('Cut: C2H4 kfac float32 (stopped 320 s after it started, at its 320 s limit, '
          'compiling (built in 20 s)).') in benchmark_tables.render_sitting(path)


def test_peaks_by_device_kind_and_the_priority_order():
  assert sitting.peaks('NVIDIA H200')['float32'] == 67.0
  assert sitting.peaks('NVIDIA H100 80GB HBM3')['tf32'] == 494.5
  assert sitting.peaks('NVIDIA H100 PCIe')['float32'] == 51.0
  assert sitting.peaks('NVIDIA H200 NVL')['float32'] == 60.0
  assert sitting.peaks('cpu') is None and sitting.peaks('Tesla V100-SXM2-16GB') is None
  assert sitting.order(['He', 'Ne'], ['kfac', 'adam'], ['float32', 'tf32'])[:4] == [
      ('He', 'kfac', 'float32'), ('Ne', 'kfac', 'float32'), ('He', 'adam', 'float32'),
      ('Ne', 'adam', 'float32')]


def test_a_tree_sent_away_records_the_commit_it_is_given(monkeypatch):
  monkeypatch.setattr(artifacts, '_git', lambda *args: '')
  monkeypatch.delenv(artifacts.COMMIT_VARIABLE, raising=False)
  assert artifacts.git_state() == {'commit': None, 'dirty': None}
  monkeypatch.setenv(artifacts.COMMIT_VARIABLE, 'abc123')
  assert artifacts.git_state() == {'commit': 'abc123', 'dirty': None, 'checkout_commit': None,
                                   'commit_from': artifacts.COMMIT_VARIABLE}
  # A copy whose git history is not its own: the given commit, the checkout's beside it.
  monkeypatch.setattr(artifacts, '_git', lambda *args: 'def456' if 'rev-parse' in args else '')
  assert artifacts.git_state()['commit'] == 'abc123'
  assert artifacts.git_state()['checkout_commit'] == 'def456'
  monkeypatch.delenv(artifacts.COMMIT_VARIABLE)
  assert artifacts.git_state() == {'commit': 'def456', 'dirty': False}
