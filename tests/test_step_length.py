"""scripts/step_length.py: each update of a KFAC training with a checkpoint after every step
is measured at its own walkers, as the step itself recorded it, and at another step's; the
Fisher lengths, whole and in blocks, are those a dense Jacobian of log|psi| gives, and
KFAC's averaged statistics give no more than the damped model the step recorded."""

from flax import traverse_util
import jax
from jax.flatten_util import ravel_pytree
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import plan, train
from ferminet_fast.environment import distributed
from ferminet_fast.optimizers import kfac
from ferminet_fast.runtime import checkpoint, rundir
from ferminet_fast.stages import trained
from scripts import artifacts
from scripts import step_length


def test_each_update_is_measured_at_its_own_and_at_other_walkers(tmp_path):
  run = str(tmp_path / 'he')
  train.train(tiny_config('He', **{'optim.optimizer': 'kfac', 'optim.iterations': 8,
                                   'batch_size': 16, 'precision': 'float64',
                                   'log.save_path': run, 'log.save_every': 1,
                                   'log.keep_checkpoints': 100}), quiet=True)
  with jax.enable_x64():
    data = step_length.measure(run, offset=3)
    steps = data['steps']
    assert [s['step'] for s in steps] == list(range(1, 9))
    assert [s['other_walkers_step'] for s in steps] == [4, 5, 6, 7, 8, 3, 4, 5]
    for s in steps:  # Recomputed from the checkpoints: what the step recorded.
      assert s['realised_own'] == pytest.approx(s['fisher_step'], rel=1e-6)
      # Damping only lengthens the model: lr^2 <F_d^-1 g, g> = u^T F_d u > u^T F~ u for the
      # damped F_d (pi-adjusted: F~ plus positive semi-definite terms plus damping I).
      assert 0 < s['kfac_ema'] < s['model_step']
      assert all(s[f'{w}_{n}'] > 0 for w in step_length.WAYS for n in step_length.SETS)
    # The first-order length at update 5's own walkers from the dense Jacobian per walker.
    cfg = plan.settings(rundir.read_config(run), later_stage=True)
    loaded = trained.TrainedRun.load(run, cfg, 'last', distributed.context(cfg.batch_size))
    at = lambda t: checkpoint.restore_latest(run, loaded.built.state, ('params', 'walkers'), t)[1]
    old, new = at(4), at(5)
    flat, unravel = ravel_pytree(old.params)
    u = ravel_pytree(new.params)[0] - flat
    log_psi = lambda v, x: loaded.built.network.log_psi(unravel(v), x)
    jac = jax.vmap(jax.jacrev(log_psi), (None, 0))(flat, new.walkers.x)  # (B, P)
    jac, u = np.asarray(jac), np.asarray(u)
    assert steps[4]['first_order_own'] == pytest.approx(
        float(kfac.squared_length(jax.numpy.asarray(jac @ u))), rel=1e-8)
    assert steps[4]['whole_own'] == pytest.approx(2 * np.mean((jac @ u)**2), rel=1e-8)
    # Blocks: each dense layer's kernel and bias, and the other parameters together.
    _, layers = kfac.make_statistics(loaded.built.network, old.params,
                                     loaded.built.network.n_coords)
    names = [k for k, _ in sorted(traverse_util.flatten_dict(old.params['params']).items())]
    sizes = [v.size for _, v in sorted(traverse_util.flatten_dict(old.params['params']).items())]
    owner = np.repeat([next((i for i, p in enumerate(layers) if k[:-1] == p), -1)
                       for k in names], sizes)  # Each entry of u's block (-1: the rest).
    blocks = sum(2 * np.mean((jac @ np.where(owner == b, u, 0.0))**2)
                 for b in range(-1, len(layers)))
    assert steps[4]['blocks_own'] == pytest.approx(blocks, rel=1e-8)
    rest = 2 * np.mean((jac @ np.where(owner == -1, u, 0.0))**2)
    assert steps[4]['blocks_rest_own'] == pytest.approx(rest, rel=1e-8)
    # KFAC's diagonal there: 2 mean_i of each parameter's (J_ik u_k)^2, summed.
    diagonal = 2 * np.mean(np.sum((jac * np.where(owner == -1, u, 0.0))**2, axis=1))
    assert steps[4]['kfac_batch_rest_own'] == pytest.approx(diagonal, rel=1e-8)
    # After the first update KFAC's average holds that update's statistics alone: those
    # of the parameters before it at its own walkers.
    assert steps[0]['kfac_ema'] == pytest.approx(steps[0]['kfac_batch_own'], rel=1e-8)
    # The other factorings of the same blocks give the same updates other lengths.
    for other in step_length.OTHERS:
      assert all(s[f'{other}_own'] > 0 for s in steps)
      assert steps[4][f'{other}_own'] != pytest.approx(steps[4]['kfac_batch_own'], rel=1e-3)
  path = str(tmp_path / 'step_length.json')
  artifacts.append(path, {**data, 'label': 'He, tiny'})
  rows = [line for line in step_length.render_table(path).splitlines()
          if line.startswith('| He')]
  assert len(rows) == 2 and rows[0].split(' | ')[1] == '8 (1)'
  assert all(len(row.split(' | ')) == 12 for row in rows)
  assert float(rows[0].split(' | ')[3].split()[0]) < 1  # KFAC's averaged, undamped.
