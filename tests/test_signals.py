"""Stop signals: while active, SIGTERM/SIGUSR1/SIGINT only set a flag for the loop; the
previous handlers come back afterwards; a second SIGINT interrupts at once; a stage whose
step does not return still ends soon after SIGTERM, with its checkpoints whole."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ferminet_fast.environment import signals

pytestmark = pytest.mark.jax_range


@pytest.mark.parametrize('name', signals.STOP_SIGNALS)
def test_a_signal_sets_the_flag_and_handlers_are_restored(name):
  sig = getattr(signal, name)
  before = signal.getsignal(sig)
  with signals.StopSignals(True) as stop:
    assert stop.received is None
    os.kill(os.getpid(), sig)
    assert stop.received == name
  assert signal.getsignal(sig) == before


def test_second_sigint_interrupts():
  with signals.StopSignals(True) as stop:
    os.kill(os.getpid(), signal.SIGINT)
    assert stop.received == 'SIGINT'
    with pytest.raises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGINT)


def test_disabled_installs_nothing():
  before = signal.getsignal(signal.SIGTERM)
  with signals.StopSignals(False) as stop:
    assert signal.getsignal(signal.SIGTERM) == before
    assert stop.received is None


# A stage that never stops by itself: the main thread blocked in native code that signals
# do not interrupt (a second lock of a plain mutex), as in a compiled step that never
# returns, so that no Python signal handler can run.
BLOCKED = """
import ctypes, sys, time
from ferminet_fast.environment import signals
with signals.StopSignals(True, grace_s=float(sys.argv[1])) as stop:
  print('ready', flush=True)
  if sys.argv[2] == 'blocked':
    mutex = ctypes.create_string_buffer(64)  # Zeros: an unlocked default mutex (glibc).
    ctypes.CDLL(None).pthread_mutex_lock(mutex)
    ctypes.CDLL(None).pthread_mutex_lock(mutex)
  while stop.received is None:
    time.sleep(0.01)
time.sleep(2 * float(sys.argv[1]))  # Past the grace: the stage stopped in time.
print('stopped cleanly', flush=True)
"""


def start_blocked(grace_s: float, mode: str) -> subprocess.Popen:
  proc = subprocess.Popen([sys.executable, '-c', BLOCKED, str(grace_s), mode],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  assert proc.stdout.readline().strip() == 'ready'
  return proc


def test_sigterm_ends_a_blocked_stage_after_the_grace_and_spares_one_that_stops():
  proc = start_blocked(1.0, 'blocked')
  t0 = time.monotonic()
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 75, err
  assert 1.0 <= time.monotonic() - t0 < 10
  assert 'SIGTERM arrived 1 s ago (watchdog.signal_grace_s)' in err and 'resume' in err
  proc = start_blocked(1.0, 'stops')
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 0 and 'stopped cleanly' in out, err


def test_a_second_sigint_ends_a_blocked_stage_at_once():
  proc = start_blocked(100.0, 'blocked')
  proc.send_signal(signal.SIGINT)
  time.sleep(0.5)
  t0 = time.monotonic()
  proc.send_signal(signal.SIGINT)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == signals.EXIT_INTERRUPTED, err
  assert time.monotonic() - t0 < signals.SECOND_INTERRUPT_S + 5
  assert 'a second SIGINT' in err


def test_sigterm_during_a_step_that_never_returns_keeps_the_checkpoints(tmp_path):
  """Through the command line: the step at counter 6 never returns; SIGTERM then ends the
  process after watchdog.signal_grace_s with exit status 75, and the run resumes from its
  newest checkpoint."""
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  run = tmp_path / 'run'
  args = ['--config', 'configs/he.py', '--config.batch_size=32',
          '--config.optim.optimizer=adam', '--config.mcmc.burn_in=5',
          "--config.network.ferminet.hidden_dims=((8, 4),)", '--config.log.save_every=3',
          '--config.log.progress=False', '--config.log.print_every=1',
          '--config.watchdog.signal_grace_s=2', f'--config.log.save_path={run}']
  proc = subprocess.Popen([sys.executable, os.path.join(repo, 'tests', 'faults.py'), 'stall@6',
                           *args, '--config.optim.iterations=20'],
                          cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in proc.stdout:  # The records of step 5 are printed once step 6 has begun.
    if line.startswith('step 5') or line.startswith('    5') or ' 5 ' in line[:12]:
      break
  time.sleep(1.0)
  t0 = time.monotonic()
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 75, err[-3000:]
  assert 2.0 <= time.monotonic() - t0 < 30
  assert 'SIGTERM arrived 2 s ago' in err
  steps = sorted(int(n) for n in os.listdir(run / 'checkpoints') if n.isdigit())
  assert steps[-1] == 6, steps
  done = subprocess.run([sys.executable, '-m', 'ferminet_fast.train', *args,
                         '--config.optim.iterations=8'], cwd=repo, capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'Restored step 6' in done.stdout
  result = json.loads((run / 'result.json').read_text())
  assert result['iterations'] == 8 and result['complete']
