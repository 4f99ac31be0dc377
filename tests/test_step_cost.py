"""scripts/step_cost.py: XLA's count of each stage's arithmetic, in forward passes. The
MCMC moves must cost one forward pass each (a loop's body is counted once, so the script
counts one move and multiplies), the refresh exactly one, and the local energy at least
its floor of 3N + 2 forward passes (the forward Laplacian cannot be cheaper than carrying
3N tangents and the Laplacian through the network), of which the determinants take a part."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'scripts'))
import step_cost  # noqa: E402


@pytest.fixture(scope='module')
def li_adam():
  return step_cost.count('Li', 'small', 'adam', batch=8, mcmc_steps=4)


def test_stages_against_their_floors(li_adam):
  r = li_adam
  f, stages = r['forward_flops'], r['stage_flops']
  assert r['electrons'] == 3 and r['floors'] == {'mcmc': 4, 'energy': 11, 'gradient': 3,
                                                 'optimizer': 0, 'refresh': 1}
  assert stages['refresh'] == f
  assert stages['mcmc'] / f == pytest.approx(4, rel=0.1)  # One forward pass per move.
  assert stages['energy'] / f >= r['floors']['energy']
  # The whole step is its stages (the optimizer's arithmetic included), to within the
  # bookkeeping between them.
  assert r['step_flops'] == pytest.approx(sum(stages.values()), rel=0.05)
  # The determinants' share of the Laplacian is a part of the energy's arithmetic.
  assert 0 < r['after_orbitals_flops'] < stages['energy']


def test_table_names_the_floor(li_adam, tmp_path):
  import artifacts
  path = str(tmp_path / 'cost.json')
  artifacts.append(path, {'rows': [li_adam]})
  text = step_cost.render(path)
  row = next(line for line in text.splitlines() if line.startswith('| Li (3) | small | adam |'))
  cells = [c.strip() for c in row.strip('|').split('|')]
  assert cells[3] == li_adam['laplacian'] == 'folx'  # What 'best' takes for 3 electrons.
  assert cells[5].endswith('(4)') and cells[6].endswith('(11)')  # MCMC and energy floors.
  after = li_adam['after_orbitals_flops'] / li_adam['forward_flops']
  assert float(cells[7]) == pytest.approx(after, abs=0.05)  # The determinants' share.
  assert cells[12] == str(sum(li_adam['floors'].values()))


@pytest.mark.jax_range  # FermiNet's count runs on the oldest JAX, in FermiNet's environment.
def test_counting_pmap_reports_a_products_arithmetic_and_changes_nothing(capsys):
  """FermiNet's computations are counted by wrapping jax.pmap: the wrapped function gives
  the same result, and reports XLA's count, 2 n^3 for an n x n matrix product."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  import ferminet_cost
  n = 32
  x = jnp.asarray(np.random.default_rng(0).normal(size=(1, n, n)), jnp.float32)

  def product(a):
    return a @ a

  np.testing.assert_array_equal(ferminet_cost.counting_pmap(product)(x), jax.pmap(product)(x))
  line = next(line for line in capsys.readouterr().out.splitlines()
              if line.startswith('FERMINET_COST'))
  assert '"name": "product"' in line
  assert float(line.split('"flops": ')[1].rstrip('}')) == pytest.approx(2 * n**3, rel=0.05)
  assert ferminet_cost.loop_passes_counted() in (1, 10)


@pytest.mark.parametrize('optimizer, passes', [('kfac', 1), ('adam', 1), ('kfac', 10)])
def test_ferminet_step_assembled_from_its_counts(monkeypatch, optimizer, passes):
  """FermiNet's step = its update + the forward pass its MCMC call starts with + 10 moves,
  whichever computation holds its MCMC and however many loop passes XLA counts."""
  forward, move, update, steps = 3.0, 3.5, 120.0, 10
  mcmc = forward + move * (1 if passes == 1 else steps)
  counts = {'forward': forward, 'mcmc': mcmc}
  counts.update({'_step': update} if optimizer == 'kfac' else {'step': mcmc + update})
  out = f'FERMINET_LOOP {{"counted": {passes}}}\n' + ''.join(
      f'FERMINET_COST {{"name": "{k}", "flops": {v}}}\n' for k, v in counts.items())
  seen = {}

  def run(cmd, **kwargs):
    seen['cmd'] = cmd
    return step_cost.subprocess.CompletedProcess(cmd, 0, out, '')

  monkeypatch.setattr(step_cost.subprocess, 'run', run)
  r = step_cost.ferminet_count('/fn', 'Ne', 'small', optimizer, 256, steps)
  assert r['move_flops'] == pytest.approx(move) and r['update_flops'] == pytest.approx(update)
  assert r['step_flops'] == pytest.approx(update + forward + steps * move)
  assert seen['cmd'][1].endswith('ferminet_cost.py')
  assert f'--config.optim.optimizer={optimizer}' in seen['cmd']
  assert '--config.mcmc.burn_in=0' in seen['cmd']
