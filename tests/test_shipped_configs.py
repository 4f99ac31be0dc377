"""Every shipped config of the sizes where a start-up can hang (ten electrons and more, an
effective core potential, the electron gas, the crystals) trains a few steps through the
command line with its default devices and settings, only the step counts cut: the CPU
split into devices that the machine and this jaxlib give, its batch, network, Laplacian
and pretraining. A hang fails the test instead of stalling the suite: the watchdog ends a
sleeping process (watchdog.idle_s) and the test's own timeout ends anything else.

README's test command starts every one of them. The faulty-jaxlib environment of CI starts
one of each kind of start-up (ONE_OF_EACH_KIND: an atom, a set of geometries pretrained at
each, the electron gas, a crystal pretrained on pyscf.pbc's orbitals, an atom with an ECP);
the others, marked same_start_up, go through the same pieces at other sizes. The newest
and oldest JAX of the supported range start one molecule and one periodic system, what of
a start-up depends on JAX: ne.py (the default CPU devices, KFAC, Hartree-Fock pretraining,
an atom's network and Laplacian) and heg.py (the electron gas: Ewald sums, plane-wave
envelopes, a full determinant)."""

import glob
import os
import subprocess
import sys

import pytest

from ferminet_fast.runtime import cli
from ferminet_fast.physics import systems
from scripts.startup import default_devices_env  # The machine's default CPU devices.


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 900


def _at_risk(path: str) -> bool:
  cfg = cli.load_config_file(path)
  system = systems.make_system(cfg.system)
  return system.n_electrons >= 10 or system.periodic or bool(cfg.system.ecp)


CONFIGS = [p for p in sorted(glob.glob(os.path.join(REPO, 'configs', '*.py'))) if _at_risk(p)]
# The start-ups that run again with the newest and the oldest JAX (setup.cfg's jax_range).
ACROSS_JAX = {'ne.py', 'heg.py'}
# The start-ups of the faulty-jaxlib environment (the others are marked same_start_up).
ONE_OF_EACH_KIND = {'ne.py', 'n2_pes.py', 'heg.py', 'h_chain.py', 'si_ccecp.py'}


def _marks(name: str) -> list:
  return ([pytest.mark.jax_range] if name in ACROSS_JAX else []) + (
      [] if name in ONE_OF_EACH_KIND else [pytest.mark.same_start_up])


@pytest.mark.jax_range
def test_the_configs_at_risk_are_the_large_ones():
  names = {os.path.basename(p) for p in CONFIGS}
  assert {'ne.py', 'n2.py', 'heg.py', 'lih_crystal.py', 'si_ccecp.py'} <= names
  assert not names & {'he.py', 'li.py', 'h2.py'}
  assert ACROSS_JAX <= ONE_OF_EACH_KIND <= names


@pytest.mark.parametrize('path', [pytest.param(p, marks=_marks(os.path.basename(p)))
                                  for p in CONFIGS], ids=os.path.basename)
def test_a_shipped_config_starts_and_trains_with_its_default_devices(path, tmp_path):
  cfg = cli.load_config_file(path)
  cmd = [sys.executable, '-m', 'ferminet_fast.train', '--config', path,
         '--config.optim.iterations=3', '--config.mcmc.burn_in=20',
         '--config.log.progress=False', '--config.watchdog.idle_s=60',
         f'--config.log.save_path={tmp_path / "run"}']
  if cfg.pretrain.iterations:
    cmd.append('--config.pretrain.iterations=3')
  try:
    proc = subprocess.run(cmd, cwd=REPO, env=default_devices_env(), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f'{os.path.basename(path)} did not finish in {TIMEOUT_S} s: '
                f'{(e.stdout or b"")[-2000:]!r}')
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert 'Devices ' in proc.stdout and 'Trained steps 0-3' in proc.stdout, proc.stdout[-2000:]
