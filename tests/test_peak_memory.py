"""scripts/peak_memory.py: a process's peak resident memory as the kernel counts it, the
signal that ended a killed one, and a ladder that stops a code at the first system it
fails, so that the largest system each code trained is what the table and the standing say."""

import os
import sys

import pytest

from scripts import artifacts
from scripts import peak_memory
from scripts import standing

MIB = 2.0**20


def _allocating(mib: int, then: str = 'import time\ntime.sleep(0.5)') -> list:
  """A process that touches `mib` MiB (bytes of ones, so every page is resident), then runs
  `then` (by default holds them for half a second)."""
  return [sys.executable, '-c', f'b = b"\\1" * {mib * 2**20}\n{then}']


def test_peak_memory_of_a_process_that_holds_a_known_amount():
  ballast = b'\1' * (300 * 2**20)  # This process's pages are not counted in its child's.
  small = peak_memory.measure(_allocating(1), os.getcwd())
  large = peak_memory.measure(_allocating(400), os.getcwd())
  del ballast
  assert small['exit'] == large['exit'] == 0 and 'output_tail' not in large
  assert small['peak_gib'] * 2**30 / MIB < 64  # An interpreter and 1 MiB.
  # The interpreter's own footprint is in both; the difference is the 399 MiB held.
  assert (large['peak_gib'] - small['peak_gib']) * 2**30 / MIB == pytest.approx(399, abs=25)


def test_a_killed_process_reports_its_signal_and_output():
  r = peak_memory.measure(_allocating(1, 'import os, signal\nprint("going", flush=True)\n'
                                         'os.kill(os.getpid(), signal.SIGKILL)'), os.getcwd())
  assert r['exit'] == -9 and 'going' in r['output_tail']


def _fake_ladder(monkeypatch, tmp_path, fails_from: dict):
  """peak_memory.ladder over three systems with each code's training replaced by a process
  holding 10 MiB per electron, killed from `fails_from[code]` electrons on."""

  def commands(fn_dir, name, run_dir, keys):
    n = peak_memory.benchmark_tables.ELECTRONS[name]
    kill = 'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)'
    return {code: (_allocating(10 * n, kill if n >= fails_from.get(code, 99) else ''), None,
                   str(tmp_path)) for code in peak_memory.CODES}

  monkeypatch.setattr(peak_memory, 'commands', commands)
  rows = peak_memory.ladder('unused', ['C4H4', 'Ne', 'C2H4'], {})
  path = str(tmp_path / 'memory.json')
  meta = {'date': '2026-01-01T00:00:00+00:00',
          'machine': {'cpu': 'test', 'cpu_count': 2, 'memory_gib': 23.5}}
  keys = {'batch_size': '256', 'pretrain.iterations': '5', 'optim.iterations': '5'}
  artifacts.append(path, {'rows': rows, 'keys': keys, 'network': 'small'}, meta)
  monkeypatch.setattr(peak_memory, 'JSON', path)
  return rows, artifacts.latest(path)


def test_the_ladder_stops_a_code_at_its_first_failure(monkeypatch, tmp_path):
  rows, run = _fake_ladder(monkeypatch, tmp_path, {'ferminet': 16})
  assert [r['system'] for r in rows] == ['Ne', 'C2H4', 'C4H4']  # Fewest electrons first.
  assert rows[1]['ferminet']['exit'] == -9 and rows[2]['ferminet'] is None
  assert all(r['ours']['exit'] == 0 for r in rows)
  assert peak_memory.largest(rows, 'ours')['system'] == 'C4H4'
  assert peak_memory.largest(rows, 'ferminet')['system'] == 'Ne'
  assert peak_memory.limit_text(run) == (
      'largest trained in 23.5 GiB: ours C4H4 (28 electrons), its limit not reached; '
      'FermiNet Ne (10 electrons)')
  assert 'not tried (failed on a smaller system)' in peak_memory.render(peak_memory.JSON)
  (row,) = standing.memory_rows()
  assert row[3] == '**met**'


def test_the_standing_is_judged_only_where_a_limit_was_reached(monkeypatch, tmp_path):
  _fake_ladder(monkeypatch, tmp_path, {})
  (row,) = standing.memory_rows()
  assert row[3].startswith('not reached: both trained every system tried (at C4H4')
  _fake_ladder(monkeypatch, tmp_path, {'ours': 28})
  (row,) = standing.memory_rows()  # Ours failed where FermiNet did not: a miss.
  assert row[3] == '**missed**'
