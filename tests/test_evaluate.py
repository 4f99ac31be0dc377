"""Evaluation: frozen parameters, reblocked energy written to eval.json and agreeing with an
independent chain at the same parameters, clean errors."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, evaluate, plan, train
from ferminet_fast.physics import hamiltonian, laplacians, systems
from ferminet_fast.runtime import checkpoint
from ferminet_fast.vmc import stats


def metropolis_energies(network, system, params, x, width, moves, sweeps, key):
  """Mean local energy per sweep of `moves` Metropolis moves (Gaussian proposals of `width`,
  accepted with min(1, |psi'/psi|^2)) of walkers x (B, 3N) at fixed `params`: a chain of
  this test's own, with the local energies by jacfwd (evaluation's run uses 'best')."""
  log_psi = jax.vmap(network.log_psi, in_axes=(None, 0))
  local_energy = jax.vmap(hamiltonian.of(system, laplacians.JACFWD).local_energy(network.log_psi),
                          in_axes=(None, 0))

  @jax.jit
  def sweep(x, key):
    def move(i, carry):
      x, lp = carry
      k_move, k_accept = jax.random.split(jax.random.fold_in(key, i))
      y = x + width * jax.random.normal(k_move, x.shape, x.dtype)
      lp_y = log_psi(params, y)
      accept = jnp.log(jax.random.uniform(k_accept, lp.shape)) < 2 * (lp_y - lp)
      return jnp.where(accept[:, None], y, x), jnp.where(accept, lp_y, lp)

    x, _ = jax.lax.fori_loop(0, moves, move, (x, log_psi(params, x)))
    return x, jnp.mean(local_energy(params, x))

  energies = []
  for i in range(sweeps):
    x, e = sweep(x, jax.random.fold_in(key, i))
    energies.append(float(e))
  return np.asarray(energies)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """(run directory, config, train.Result): He trained for 300 steps of 256 walkers, long
  enough that the local energies' variance allows error bars of a few mHa."""
  path = tmp_path_factory.mktemp('evaluate') / 'run'
  cfg = tiny_config('He', **{'optim.iterations': 300, 'batch_size': 256,
                             'log.save_path': str(path)})
  return path, cfg, train.train(cfg, quiet=True)


def test_evaluation_freezes_parameters_and_reports(trained):
  path, _, trained = trained
  files_before = {f: os.path.getmtime(os.path.join(dp, f))
                  for dp, _, fs in os.walk(path / 'checkpoints') for f in fs}
  est = evaluate.evaluate(str(path), steps=60, burn_in=10, quiet=True)
  result = json.loads((path / 'eval.json').read_text())
  assert result['checkpoint_step'] == 300 and result['steps'] == 60
  assert np.isfinite(est.mean) and est.error > 0
  assert est.mean > -2.9037 - 5 * est.error  # Variational.
  # Same parameters as training's end: evaluation restores, never writes, the checkpoint.
  _, restored = checkpoint.restore_latest(str(path), trained.state)
  assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(restored.params),
                                                  jax.tree.leaves(trained.state.params)))
  assert files_before == {f: os.path.getmtime(os.path.join(dp, f))
                          for dp, _, fs in os.walk(path / 'checkpoints') for f in fs}
  # By default the parameters averaged over the last 3% of the updates
  # (optim.average_fraction): 9 of 300.
  assert result['parameters'] == 'average' and result['average_updates'] == pytest.approx(9)
  with pytest.raises(InputError, match="--parameters 'first' is not one of average, last"):
    evaluate.evaluate(str(path), steps=60, quiet=True, parameters='first')


def test_evaluation_of_the_last_parameters_is_unbiased(trained):
  """The evaluated energy of the last parameters agrees, within 4 combined reblocked
  standard errors, with that of an independent Metropolis chain at the same frozen
  parameters from training's last walkers. Both error bars must be small (combined under
  4 mHa) for this to mean something, so an evaluation biased by about 10 mHa or more (another
  distribution sampled, other parameters, a shifted energy) fails."""
  path, cfg, trained = trained
  est = evaluate.evaluate(str(path), steps=500, burn_in=10, quiet=True, parameters='last')
  assert json.loads((path / 'eval.json').read_text())['parameters'] == 'last'
  assert est.mean > -2.9037 - 5 * est.error  # Variational.

  system = systems.make_system(cfg.system)
  network = plan.network_of(cfg.network, system)
  walkers = trained.state.walkers
  energies = metropolis_energies(network, system, trained.state.params, walkers.x,
                                 float(walkers.width), cfg.mcmc.steps, 510,
                                 jax.random.PRNGKey(7))
  ref = stats.reblock(energies[10:])
  combined = np.hypot(est.error, ref.error)
  assert combined < 0.004, (est, ref)  # Tight enough for the comparison to mean something.
  assert abs(est.mean - ref.mean) < 4 * combined, (est, ref)


def test_evaluating_a_directory_without_checkpoint_is_an_error(tmp_path):
  with pytest.raises(InputError, match='holds no checkpoint'):
    evaluate.evaluate(str(tmp_path), steps=10, quiet=True)


def test_more_walkers_than_training_agree_with_smaller_errors(trained):
  """Evaluated with 4 times training's walkers (cycled from its last ones, decorrelated by
  the burn-in), the energy agrees with the evaluation of training's 256 within 4 combined
  errors, and its error bar is smaller, about half (1/sqrt(4)) for the same sweeps; fewer
  than one walker is refused."""
  path, _, _ = trained
  few = evaluate.evaluate(str(path), steps=200, burn_in=20, quiet=True)
  many = evaluate.evaluate(str(path), steps=200, burn_in=20, quiet=True, walkers=1024)
  assert json.loads((path / 'eval.json').read_text())['batch_size'] == 1024
  assert abs(many.mean - few.mean) < 4 * np.hypot(many.error, few.error), (few, many)
  assert many.error < 0.75 * few.error, (few, many)
  with pytest.raises(InputError, match='--walkers must be at least 1'):
    evaluate.evaluate(str(path), steps=10, quiet=True, walkers=0)


def test_the_summary_warns_where_the_error_bar_did_not_level_off():
  """An evaluation whose reblocking found no plateau (stats.Estimate.plateau) ends with a
  warning that its error bar is likely too small; one that found it does not."""
  from ferminet_fast.stages import evaluation
  result = {'checkpoint_step': 300, 'parameters': 'last', 'steps': 20, 'batch_size': 256,
            'energy': -2.9, 'error': 1e-3, 'tau': 4.0, 'exact_energy': None,
            'error_plateau': True}
  assert 'level off' not in evaluation.summary(result, 1)
  assert 'did not level off in 20 sweeps' in evaluation.summary(
      {**result, 'error_plateau': False}, 1)
