"""The watchdog: a stage whose steps stop completing is reported and ended, with its files
left as they were; steady progress, however slow, is not."""

import json
import os
import re
import subprocess
import sys
import time

from ferminet_fast.runtime import cli, watchdog

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(REPO, 'tests', 'faults.py')  # Runs the training command line with a fault.


def watch(**kw):
  stalls = []
  args = dict(stage='test', multiple=5.0, floor_s=0.3, first_s=1.0, exit_code=4,
              on_stall=stalls.append, poll_s=0.02)
  args.update(kw)
  return watchdog.Watchdog(**args), stalls


def test_steady_steps_are_not_stalls_and_a_missing_one_is():
  dog, stalls = watch()
  with dog:
    for _ in range(10):
      time.sleep(0.05)
      dog.beat('step k')
    assert not stalls
    limit, why = dog.limit()  # 5 x ~0.05 s is under the floor of 0.3 s.
    assert limit == 0.3 and 'floor_s' in why
    dog.waiting_for('the step that never comes')
    t0 = time.monotonic()
    while not stalls and time.monotonic() - t0 < 5:
      time.sleep(0.01)
  assert len(stalls) == 1
  assert 0.3 <= time.monotonic() - t0 < 1.0
  assert 'test stalled' in stalls[0] and 'waiting for the step that never comes' in stalls[0]
  assert 'after 10 completed step(s)' in stalls[0]


def test_the_limit_grows_with_the_step_time_and_starts_at_first_s():
  dog, stalls = watch(floor_s=0.01)
  with dog:
    assert dog.limit() == (1.0, 'watchdog.first_s, before any step completed')
    for _ in range(4):
      time.sleep(0.1)
      dog.beat()
    limit, why = dog.limit()
    assert 0.45 <= limit < 1.0 and 'multiple = 5 x the median step time' in why
  assert not stalls


def test_paused_host_work_does_not_count():
  dog, stalls = watch()
  with dog:
    dog.beat()
    with dog.paused('compiling'):
      time.sleep(1.5)  # Longer than first_s and the floor.
    dog.beat()
  assert not stalls


def test_disabled_watchdog_never_fires():
  dog, stalls = watch(enabled=False)
  with dog:
    time.sleep(1.2)
  assert not stalls


def test_a_stalled_training_step_ends_the_run_with_a_report(tmp_path):
  """Through the command line: the step at counter 8 never returns (as a deadlocked
  compiled step would not); the process says what it waited for, exits 4 within the
  limit, and leaves the run directory resumable."""
  run = tmp_path / 'run'
  cmd = [sys.executable, FAULTS, 'stall@8', '--config', 'configs/he.py',
         '--config.batch_size=32', '--config.optim.optimizer=adam',
         '--config.optim.iterations=50', '--config.mcmc.burn_in=5',
         "--config.network.ferminet.hidden_dims=((8, 4),)", '--config.log.save_every=4',
         '--config.log.progress=False', '--config.watchdog.floor_s=2',
         '--config.watchdog.multiple=5', '--config.watchdog.first_s=120',
         f'--config.log.save_path={run}']
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == cli.EXIT_STALLED, proc.stderr[-3000:]
  m = re.search(r'error: training stalled: nothing completed for (\d+) s, over the limit of '
                r'(\d+) s \(watchdog.floor_s', proc.stderr)
  assert m, proc.stderr[-3000:]
  idle, limit = int(m.group(1)), int(m.group(2))
  assert limit == 2 and idle <= limit + 2  # Noticed within a poll of the limit.
  # The results it waited for: those of the step before the stalled one (fetched one behind).
  assert re.search(r'waiting for training step [78] of 50 \(the compiled step', proc.stderr)
  assert 'faults.py' in proc.stderr  # The main thread's stack shows where it waits.
  assert 'Traceback' not in proc.stderr.split('Python stacks')[0]
  # The run directory is intact and resumable: config, records, the step-8 checkpoint.
  assert json.loads((run / 'config.json').read_text())['optim']['iterations'] == 50
  assert sorted(os.listdir(run / 'checkpoints'))[-1].endswith('8')


def test_an_idle_process_is_a_stall_whatever_the_limits_and_a_busy_one_is_not():
  """On the CPU a deadlock leaves every thread asleep: a process that uses (almost) no CPU
  for idle_s is stalled, even during paused host work and before the first step's limit;
  one whose CPU time keeps growing is not, however long it works."""
  busy, busy_stalls = watch(first_s=100.0, idle_s=0.3, cpu_time=time.monotonic)
  with busy, busy.paused('compiling'):
    time.sleep(1.0)
  assert not busy_stalls
  dog, stalls = watch(first_s=100.0, idle_s=0.3, cpu_time=lambda: 7.0)
  t0 = time.monotonic()
  with dog:
    with dog.paused('the Hartree-Fock SCF'):
      while not stalls and time.monotonic() - t0 < 5:
        time.sleep(0.01)
  assert len(stalls) == 1 and 0.3 <= time.monotonic() - t0 < 1.5
  assert 'less than 1% of a core' in stalls[0] and 'deadlock' in stalls[0]
  assert 'waiting for the Hartree-Fock SCF' in stalls[0]


def test_a_gap_in_the_polling_restarts_the_idle_count():
  """A process stopped (SIGSTOP, a suspended laptop) used no CPU meanwhile: not a stall."""
  cpu = [0.0]
  dog, _ = watch(idle_s=10.0, poll_s=1.0, cpu_time=lambda: cpu[0])
  assert all(dog.asleep(t) is None for t in range(0, 9))
  assert dog.asleep(600.0) is None  # Stopped for ten minutes.
  assert all(dog.asleep(600.0 + t) is None for t in range(1, 10))
  assert dog.asleep(610.0) == 10.0
  cpu[0] = 5.0  # Work again: half a core over the window.
  assert dog.asleep(611.0) is None


def test_a_new_phase_waits_first_s_for_its_first_step():
  dog, stalls = watch(floor_s=0.01)
  with dog:
    for _ in range(3):
      time.sleep(0.02)
      dog.beat()
    assert 'median step time' in dog.limit()[1]
    dog.phase('the first training step')
    assert dog.limit() == (1.0, 'watchdog.first_s, before any step completed')
  assert not stalls


def test_a_deadlocked_start_up_ends_within_idle_s(tmp_path):
  """Through the command line: the burn-in's first sweep never returns and the process
  sleeps, as in a deadlock of the runtime; the start-up ends with its report and exit
  status 4 after watchdog.idle_s, though first_s is long."""
  run = tmp_path / 'run'
  driver = ('import sys; from ferminet_fast.vmc import step; from ferminet_fast import train\n'
            'def stuck(*a, **k):\n  import threading; threading.Event().wait()\n'
            'step.burn_in = stuck\ntrain.run()')
  cmd = [sys.executable, '-c', driver, '--config', 'configs/he.py',
         '--config.batch_size=32', '--config.optim.iterations=5', '--config.mcmc.burn_in=5',
         "--config.network.ferminet.hidden_dims=((8, 4),)", '--config.log.progress=False',
         '--config.watchdog.first_s=600', '--config.watchdog.idle_s=5',
         f'--config.log.save_path={run}']
  t0 = time.monotonic()
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == cli.EXIT_STALLED, proc.stderr[-3000:]
  assert 'error: training stalled' in proc.stderr and 'watchdog.idle_s' in proc.stderr
  assert 'waiting for the first sweep of the burn-in' in proc.stderr
  assert time.monotonic() - t0 < 120
