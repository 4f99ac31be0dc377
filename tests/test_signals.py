"""Stop signals: while active, SIGTERM/SIGUSR1/SIGINT only set a flag for the loop; the
previous handlers come back afterwards; a second SIGINT interrupts at once."""

import os
import signal

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
