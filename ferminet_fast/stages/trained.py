"""A trained run, loaded the one way every stage after training loads it (evaluation, DMC,
the scripts that study a run): its settings from config.json, the network and step rebuilt
with what training resolved (resolved.json, plan.py), and its newest checkpoint
restored with the parameters asked for (the average of the last updates, or the last)."""

from typing import NamedTuple

import jax

from ferminet_fast import config, plan
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import optim
from ferminet_fast.runtime import checkpoint
from ferminet_fast.vmc import step

class TrainedRun(NamedTuple):
  """A run directory's trained state, rebuilt."""
  run_dir: str
  cfg: object  # The settings it was loaded with (frozen, plan.settings).
  built: plan.Built  # The system, network and step's parts, as training built them.
  state: step.TrainState  # Restored: parameters (as `parameters` says), optimizer, walkers.
  trained_step: int  # The checkpoint's step.
  parameters: str  # 'average' or 'last': the parameters taken.

  @classmethod
  def load(cls, run_dir: str, cfg, parameters: str = 'average',
           ctx=None) -> 'TrainedRun':
    """The run in `run_dir` with settings `cfg` (rundir.read_config, then plan.settings
    with later_stage=True, a later stage's own keys changed), walkers laid out over `ctx`
    (environment/distributed.py; default all devices). 'average' falls back to the last
    parameters where the checkpoint holds no average yet."""
    if parameters not in config.PARAMETERS:
      raise InputError(f'--parameters {parameters!r} is not one of '
                       f'{", ".join(config.PARAMETERS)}')
    if not checkpoint.has_checkpoint(run_dir):
      raise InputError(f'--run {run_dir!r} holds no checkpoint')
    built = plan.build(cfg, jax.random.PRNGKey(0), ctx, recorded=plan.recorded_of(run_dir),
                        system=plan.system_of(cfg), time_auto=False)
    found, state = checkpoint.restore_latest(run_dir, built.state,
                                             ('params', 'opt_state', 'walkers'))
    state, which = with_parameters(built.parts, state, parameters)
    return cls(run_dir, cfg, built, state, found, which)


def with_parameters(parts: step.Parts, state: step.TrainState,
                    which: str) -> tuple:
  """(state, 'average' or 'last'): the state with the parameters to evaluate, the walkers'
  log|psi| recomputed for them; 'average' is 'last' while the optimizer state holds no
  average of the parameters yet."""
  if which != 'average' or not int(optim.averaged_updates(state.opt_state)) > 0:
    return state, 'last'
  params = optim.averaged_params(state.opt_state, state.params)
  walkers = state.walkers._replace(log_psi=parts.walkers_log_psi(params, state.walkers.x))
  return state._replace(params=params, walkers=walkers), 'average'
