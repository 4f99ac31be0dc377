"""The plan: every choice, 'auto' and 'best' resolved once, recorded in resolved.json, and
taken from there by the stages after training (evaluation does not choose again)."""

import dataclasses
import json
import os

import pytest

from conftest import tiny_config
from ferminet_fast import evaluate, plan, train
from ferminet_fast.environment import packages
from ferminet_fast.errors import InputError
from ferminet_fast.physics import laplacians, systems
from ferminet_fast.runtime import cli, profiling

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_auto_is_resolved_once_recorded_and_reused(tmp_path, monkeypatch):
  run = tmp_path / 'run'
  train.train(tiny_config('He', **{'optim.laplacian': 'auto', 'optim.iterations': 5,
                                   'log.save_path': str(run)}), quiet=True)
  resolved = json.loads((run / plan.RESOLVED).read_text())
  timings = json.loads((run / 'timings.json').read_text())
  assert resolved['optim.laplacian'] in laplacians.METHODS
  assert resolved['optim.laplacian'] == timings['laplacian']
  assert resolved['optim.energy_chunk_size'] == timings['energy_chunk_size']
  assert set(timings['laplacian_auto_ms']) >= {resolved['optim.laplacian']}

  def no_second_choice(*args, **kwargs):
    raise AssertionError('the Laplacian was chosen again')

  monkeypatch.setattr(profiling, 'choose_laplacian', no_second_choice)
  evaluate.evaluate(str(run), steps=3, burn_in=1, quiet=True)
  # The plan a later stage resolves from the record is the one training ran.
  cfg = plan.settings(tiny_config('He', **{'optim.laplacian': 'auto'}), later_stage=True)
  again = plan.resolve(cfg, None, recorded=plan.recorded_of(str(run)))
  assert again.hamiltonian.laplacian.name == resolved['optim.laplacian']
  assert again.record()['optim.energy_chunk_size'] == resolved['optim.energy_chunk_size']
  # A run without its record is refused with one message, its files left as they were.
  (run / plan.RESOLVED).unlink()
  before = sorted(os.listdir(run))
  with pytest.raises(InputError, match='resolved.json'):
    evaluate.evaluate(str(run), steps=3, burn_in=1, quiet=True)
  assert sorted(os.listdir(run)) == before


def test_settings_keep_best_for_the_build_and_are_frozen():
  cfg = plan.settings(tiny_config('He', **{'optim.laplacian': 'best'}))
  assert cfg.optim.laplacian == 'best'  # The build resolves it, knowing system and device.
  with pytest.raises(AttributeError):  # Frozen: each module gets its block, unchanged.
    cfg.optim.laplacian = 'jacfwd'


def _config(name):
  return cli.load_config_file(os.path.join(REPO, 'configs', name))


def _system(name):
  return systems.make_system(_config(name).system)


@pytest.mark.skipif(not packages.installed('folx'), reason='needs the folx extra')
def test_best_keeps_the_sparse_forward_laplacian_for_large_molecules_on_a_cpu():
  """'best' is the method measured fastest for the kind of run: folx with per-electron
  sparsity for a molecule of 14 electrons or more on a CPU, the dense folx otherwise
  (smaller molecules, periodic systems, several states, GPUs)."""
  assert laplacians.SPARSE_PAYS_FROM == 14
  c4h4 = _system('c4h4.py')  # 28 e
  assert plan.best_laplacian(_system('c2h4.py'), 'cpu') is laplacians.FOLX_SPARSE  # 16 e
  assert plan.best_laplacian(c4h4, 'cpu') is laplacians.FOLX_SPARSE
  assert plan.best_laplacian(_system('n2.py'), 'cpu') is laplacians.FOLX_SPARSE  # 14 e
  assert plan.best_laplacian(_system('ne.py'), 'cpu') is laplacians.FOLX  # 10 e
  assert plan.best_laplacian(_system('lih_crystal.py'), 'cpu') is laplacians.FOLX  # periodic
  assert plan.best_laplacian(c4h4, 'gpu') is laplacians.FOLX
  assert plan.best_laplacian(dataclasses.replace(c4h4, states=2), 'cpu') is laplacians.FOLX
  cfg = _config('c4h4.py')
  cfg.optim.laplacian = 'jvp_loop'
  assert plan.laplacian_of(cfg, None, c4h4, None) == (laplacians.JVP_LOOP, None)
  dry = plan.dry_run(_config('c2h4.py'))
  assert 'laplacian: folx_sparse' in dry


def test_dmc_time_steps_follow_the_charge_the_electrons_see():
  """dmc.tau = 'auto': the time steps shrink as 1/Z of the largest charge the electrons
  see (the effective charge with an ECP), capped at He's, and scale as r_s^2 in the
  electron gas; --dry-run shows them."""
  assert plan.dmc_time_steps(_config('he.py').system) == (0.02, 0.01, 0.005)
  assert plan.dmc_time_steps(_config('h2.py').system) == (0.02, 0.01, 0.005)
  assert plan.dmc_time_steps(_config('ne.py').system) == (0.004, 0.002, 0.001)
  si = _config('si_ccecp.py')
  assert plan.dmc_time_steps(si.system) == (0.01, 0.005, 0.0025)  # Z - 10 core = 4.
  si.system.ecp = ''
  assert plan.dmc_time_steps(si.system)[0] == pytest.approx(0.04 / 14, rel=1e-3)
  gas = _config('heg.py')
  gas.system.rs = 5.0
  assert plan.dmc_time_steps(gas.system) == (0.5, 0.25, 0.125)
  assert 'tau: !!python/tuple\n  - 0.004\n  - 0.002\n  - 0.001' in plan.dry_run(_config('ne.py'))


@pytest.mark.parametrize('matmul, marked', [('highest', True), ('default', False)])
def test_matmul_precision_reaches_every_matrix_product_of_energy_and_gradient(matmul,
                                                                            marked):
  """JAX multiplies float32 matrices in TF32 on NVIDIA GPUs unless the program asks for
  full precision: with 'highest' every dot of the local energies and the gradient asks for
  it (a CPU ignores the request; the precision check on a GPU is scripts/precision.py)."""
  import jax
  import jax.numpy as jnp
  cfg = plan.settings(tiny_config('He', **{'matmul_precision': matmul}))
  system = plan.system_of(cfg)
  built = plan.build(cfg, jax.random.PRNGKey(0), system=system, time_auto=False)
  x = jnp.zeros((2, built.network.n_coords), built.network.dtype)
  text = jax.jit(built.parts.energy_grad).lower(built.state.params, x).as_text()
  dots = [line for line in text.splitlines() if 'dot_general' in line]
  assert dots
  highest = [line for line in dots if 'HIGHEST' in line]
  assert (len(highest) == len(dots)) if marked else not highest
