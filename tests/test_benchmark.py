"""scripts/benchmark.py's loop-period timing: FermiNet's per-step absl log lines and our
stats.csv give the time of each step's end, and the period between two steps is the step
time; scripts/benchmark_tables.py's size sweep fits each code's exponent and says which
grows faster; scripts/ferminet_launch.py's replacement for jax.device_put_replicated puts
one copy per device along a new leading axis, as the removed function did."""

import jax
import numpy as np
import pytest

from scripts import benchmark
from scripts import benchmark_tables
from scripts import ferminet_launch


def _line(day, clock, step):
  return (f'I11{day:02d} {clock} 140 train.py:1055] Step {step:05d}: -128.1 E_h, exp. '
          f'variance=1.2 E_h^2, pmove=0.53')


def test_step_times_read_ferminet_log():
  # Steps every 0.25 s across midnight, with other log lines between them.
  lines, t = [], 23 * 3600 + 59 * 60 + 59.0
  for step in range(10):
    day, s = 27 + int(t // 86400), t % 86400
    clock = f'{int(s // 3600):02d}:{int(s % 3600 // 60):02d}:{s % 60:09.6f}'
    lines += [_line(day, clock, step), f'I11{day:02d} {clock} 140 x.py:1] other']
    t += 0.25
  times = benchmark.step_times('\n'.join(lines))
  assert sorted(times) == list(range(10))
  assert benchmark.loop_period_ms(times, 2, 10) == pytest.approx(250.0, abs=1e-6)


def test_loop_period_needs_both_ends():
  with pytest.raises(RuntimeError, match='not recorded'):
    benchmark.loop_period_ms({0: 0.0, 1: 0.1}, 0, 5)


def test_device_put_replicated_replacement():
  x = {'a': np.arange(6.0).reshape(2, 3), 'b': np.float32(2.5)}
  devices = jax.local_devices()
  out = ferminet_launch.device_put_replicated(x, devices)
  n = len(devices)
  assert out['a'].shape == (n, 2, 3) and out['b'].shape == (n,)
  np.testing.assert_array_equal(np.asarray(out['a'])[0], x['a'])
  assert {d for s in out['a'].addressable_shards for d in [s.device]} == set(devices)


def test_scaling_fit_recovers_a_power_law():
  n = [2, 4, 10, 14, 28]
  p, err = benchmark_tables.scaling_fit(n, [0.3 * k ** 2.7 for k in n])
  assert p == pytest.approx(2.7, abs=1e-9) and err == pytest.approx(0.0, abs=1e-6)
  # Noise gives a standard error; three sizes give none.
  rng = np.random.default_rng(0)
  p, err = benchmark_tables.scaling_fit(n, [k ** 3 * np.exp(rng.normal(0, 0.1)) for k in n])
  assert abs(p - 3) < 0.3 and 0 < err < 0.3
  assert benchmark_tables.scaling_fit(n[:3], [k ** 2 for k in n[:3]])[1] is None


def _sweep_row(system, peer_ms, ours_ms):
  return {'system': system, 'optimizer': 'adam', 'peer_settings': 'best', 'baseline': peer_ms,
          'ours': ours_ms, 'ratio': ours_ms / peer_ms, 'ratio_per_repeat': [ours_ms / peer_ms],
          'startup_s': {'baseline': 10.0, 'ours': 10.0},
          'runs_ms': {'baseline': [peer_ms], 'ours': [ours_ms]}}


def test_scaling_table_fits_each_code_and_says_which_grows_faster(tmp_path):
  from scripts import artifacts
  path = str(tmp_path / 'sweep.json')
  systems, n = ('He', 'Be', 'Ne', 'N2', 'C2H4', 'C4H4'), benchmark_tables.ELECTRONS
  rows = [_sweep_row(s, 0.5 * n[s] ** 3, 0.2 * n[s] ** 2) for s in systems]
  artifacts.append(path, {'rows': rows, 'measure': 'loop', 'label': 'FermiNet'},
                   {'date': '2026-01-01', 'machine': {}})
  text = benchmark_tables.render_scaling(path)
  assert '| all 6 sizes (2, 4, 10, 14, 16, 28 electrons) | 3.00 ± 0.00 | 2.00 ± 0.00 | no ' \
         'faster |' in text
  assert '| N ≥ 10 (10, 14, 16, 28 electrons) | 3.00 ± 0.00 | 2.00 ± 0.00 |' in text
  # Ours growing faster is said so.
  rows = [_sweep_row(s, 0.5 * n[s] ** 2, 0.2 * n[s] ** 3) for s in systems]
  artifacts.append(path, {'rows': rows, 'measure': 'loop', 'label': 'FermiNet'},
                   {'date': '2026-01-02', 'machine': {}})
  assert '**faster**' in benchmark_tables.render_scaling(path)
  png = tmp_path / 'sweep.png'
  benchmark_tables.plot_scaling(path, str(png))
  assert png.stat().st_size > 1000


def test_ferminet_split_devices_follow_the_batch(monkeypatch):
  from scripts import ferminet_reference as reference
  from ferminet_fast.environment import cpu_devices
  monkeypatch.setattr(cpu_devices, 'cores', lambda: 4)
  flags = reference.peer_env('split', {}, batch=6)['XLA_FLAGS']
  assert f'{cpu_devices.FORCE_COUNT}=3 ' in flags  # 4 cores, but 6 walkers split into 3.
  assert f'{cpu_devices.FORCE_COUNT}=4 ' in reference.peer_env('split', {}, batch=256)[
      'XLA_FLAGS']
  assert 'XLA_FLAGS' not in reference.peer_env('best', {}, batch=6)
  assert reference.peer_settings_record('split', 6)['env']['XLA_FLAGS'] == flags


def test_the_tables_never_import_the_runners():
  import ast
  tree = ast.parse(open(benchmark_tables.__file__).read())
  names = [f'{n.module}.{a.name}' for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
           for a in n.names] + [a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                                for a in n.names]
  assert not [n for n in names if n == 'scripts.benchmark' or n.startswith('scripts.benchmark.')]
