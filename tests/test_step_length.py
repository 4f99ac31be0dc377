"""scripts/step_length.py: each update of a training with a checkpoint after every step is
measured at its own walkers, as the step itself recorded it, and at another step's; the
first-order length is the one a dense Jacobian of log|psi| gives."""

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
      assert all(s[w] > 0 for w in step_length.WAYS) and s['model_step'] > 0
    # The first-order length at update 5's own walkers from the dense Jacobian per walker.
    cfg = plan.settings(rundir.read_config(run), later_stage=True)
    loaded = trained.TrainedRun.load(run, cfg, 'last', distributed.context(cfg.batch_size))
    at = lambda t: checkpoint.restore_latest(run, loaded.built.state, ('params', 'walkers'), t)[1]
    old, new = at(4), at(5)
    flat, unravel = ravel_pytree(old.params)
    u = ravel_pytree(new.params)[0] - flat
    log_psi = lambda v, x: loaded.built.network.log_psi(unravel(v), x)
    jac = jax.vmap(jax.jacrev(log_psi), (None, 0))(flat, new.walkers.x)  # (B, P)
    assert steps[4]['first_order_own'] == pytest.approx(
        float(kfac.squared_length(jac @ u)), rel=1e-8)
  path = str(tmp_path / 'step_length.json')
  artifacts.append(path, {**data, 'label': 'He, tiny'})
  row = [line for line in step_length.render_table(path).splitlines() if line.startswith('| He')]
  assert row[0].split(' | ')[1] == '8 (1)'
  assert np.isfinite(data['summary']['other_over_own'])
