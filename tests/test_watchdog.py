"""The watchdog: a stage whose steps stop completing is reported and ended, with its files
left as they were; steady progress, however slow, is not."""

import json
import os
import re
import subprocess
import sys
import time

from ferminet_fast.run import cli, watchdog

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
  driver = ('import sys; from ferminet_fast import train; '
            'from ferminet_fast.run import cli, recovery; '
            'cli.run_training(train.train, wrap_step=recovery.stall_injector(8))')
  cmd = [sys.executable, '-c', driver, '--config', 'configs/he.py',
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
  assert 'recovery.py' in proc.stderr  # The main thread's stack shows where it waits.
  assert 'Traceback' not in proc.stderr.split('Python stacks')[0]
  # The run directory is intact and resumable: config, records, the step-8 checkpoint.
  assert json.loads((run / 'config.json').read_text())['optim']['iterations'] == 50
  assert sorted(os.listdir(run / 'checkpoints'))[-1].endswith('8')
