"""A trained run, loaded the one way every stage after training loads it (evaluation, DMC,
the scripts that study a run): its settings from config.json, the network and step rebuilt
with what training resolved (resolved.json, plan.py), and its newest checkpoint
restored with the parameters asked for (the average of the last updates, or the last)."""

from typing import Callable, NamedTuple, Optional

import jax
import numpy as np

from ferminet_fast import config, plan
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import optim
from ferminet_fast.runtime import checkpoint, rundir
from ferminet_fast.stages import relax
from ferminet_fast.vmc import mcmc, step

# Settings a run fine-tuned from another may change: where the nuclei are (one geometry or a
# set), and its labels. Every other setting that fixes the parameters' shapes must agree.
GEOMETRY_KEYS = ('system.molecule', 'system.units', 'system.geometries', 'system.scan.',
                 'system.relax', 'system.name', 'system.exact_energy')
FIELDS = ('params', 'opt_state', 'walkers')  # What a later stage restores.

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
           ctx=None, say: Callable = lambda *a: None) -> 'TrainedRun':
    """The run in `run_dir` with settings `cfg` (rundir.read_config, then plan.settings
    with later_stage=True, a later stage's own keys changed), walkers laid out over `ctx`
    (environment/distributed.py; default all devices). 'average' falls back to the last
    parameters where the checkpoint holds no average yet. A relaxed run (config.system.relax)
    is loaded with its nuclei where they were at the checkpoint (stages/relax.py), which
    `say` reports."""
    if parameters not in config.PARAMETERS:
      raise InputError(f'--parameters {parameters!r} is not one of '
                       f'{", ".join(config.PARAMETERS)}')
    if not checkpoint.has_checkpoint(run_dir):
      raise InputError(f'--run {run_dir!r} holds no checkpoint')
    system = plan.system_of(cfg)
    newest = checkpoint.saved_steps(run_dir)[-1]
    built, found, state = _restored(run_dir, cfg, system, ctx, newest, say)
    if cfg.system.relax and found != newest:
      # The newest checkpoint did not restore: the nuclei where the one that did had them.
      built, found, state = _restored(run_dir, cfg, system, ctx, found, say)
    state, which = with_parameters(built.parts, state, parameters)
    return cls(run_dir, cfg, built, state, found, which)


def _restored(run_dir: str, cfg, system, ctx, newest: int, say: Callable) -> tuple:
  """(built, step, state): the parts built for `system` (a relaxed run's nuclei where they
  were after `newest` steps) and the newest checkpoint of `run_dir` up to that step that
  restores."""
  if cfg.system.relax:
    system = relax.at_relaxed_geometry(run_dir, system, say, newest)
  built = plan.build(cfg, jax.random.PRNGKey(0), ctx, recorded=plan.recorded_of(run_dir),
                     system=system, time_auto=False)
  saved_batch = rundir.read_config(run_dir).batch_size
  if saved_batch == cfg.batch_size:
    found, state = checkpoint.restore_latest(run_dir, built.state, FIELDS, newest)
  else:  # Another number of walkers than training's (evaluate --walkers).
    found, state = restored_with_walkers_cycled(run_dir, built, saved_batch, newest)
  return built, found, state


def restored_with_walkers_cycled(run_dir: str, built: plan.Built, saved_batch: int,
                                 newest: Optional[int] = None) -> tuple:
  """(step, state): the newest checkpoint of `run_dir` (up to step `newest`), whose
  `saved_batch` walkers are cycled per geometry (mcmc.cycled) to `built`'s batch and laid
  out as its walkers are."""
  like = built.state.walkers
  on_host = mcmc.Walkers(np.zeros((saved_batch, *like.x.shape[1:]), like.x.dtype),
                         np.zeros((saved_batch,), like.log_psi.dtype),
                         np.zeros(like.width.shape, like.width.dtype))
  found, state = checkpoint.restore_latest(run_dir, built.state._replace(walkers=on_host),
                                           FIELDS, newest)
  g = built.system.geometry_count
  cycled = mcmc.cycled(jax.tree.map(np.asarray, state.walkers), g, like.x.shape[0] // g)
  placed = jax.tree.map(lambda a, b: jax.make_array_from_callback(b.shape, b.sharding,
                                                                   lambda i: a[i]),
                        cycled, like)
  return found, state._replace(walkers=placed)


def with_parameters(parts: step.Parts, state: step.TrainState,
                    which: str) -> tuple:
  """(state, 'average' or 'last'): the state with the parameters to evaluate, the walkers'
  log|psi| recomputed for them (in one compiled program, not operation by operation; also
  for the last parameters, as a step over a subset of geometries leaves the other
  geometries' walkers with those of earlier parameters); 'average' is 'last' while the
  optimizer state holds no average of the parameters yet."""
  if which == 'average' and int(optim.averaged_updates(state.opt_state)) > 0:
    params = optim.averaged_params(state.opt_state, state.params)
  else:
    params, which = state.params, 'last'
  walkers = state.walkers._replace(log_psi=jax.jit(parts.walkers_log_psi)(params,
                                                                          state.walkers.x))
  return state._replace(params=params, walkers=walkers), which


def check_fine_tune(cfg, system) -> None:
  """Raises InputError unless `cfg.log.fine_tune_from` is a trained run whose parameters fit
  the network of `cfg` for `system`: its settings that fix the parameters differ only in
  where the nuclei are (GEOMETRY_KEYS), with the same elements in the same order and the
  same electrons (nothing to check without one). Reads only its files."""
  source = cfg.log.fine_tune_from
  if not source:
    return
  saved = rundir.read_config(source, 'config.log.fine_tune_from')
  if not checkpoint.has_checkpoint(source):
    raise InputError(f'config.log.fine_tune_from {source!r} holds no checkpoint')
  diffs = [d for d in config.structural_differences(saved.to_dict(), cfg.to_dict())
           if not d.startswith(GEOMETRY_KEYS)]
  if diffs:
    raise InputError(f'config.log.fine_tune_from {source!r} was trained with a different '
                     f'{"; ".join(diffs)}: its parameters do not fit this network')
  other = plan.system_of(config.freeze(saved))
  if other.symbols != system.symbols or other.electrons != system.electrons:
    raise InputError(f'config.log.fine_tune_from {source!r} is {other.name} '
                     f'({", ".join(other.symbols)}; electrons {other.electrons}), not '
                     f'{system.name} ({", ".join(system.symbols)}; electrons '
                     f'{system.electrons}): only the positions of the nuclei may differ')


def fine_tuned(source: str, parts: step.Parts, state: step.TrainState,
               say: Callable = print) -> step.TrainState:
  """`state` with the parameters of the trained run `source` (their average where its
  checkpoint holds one) laid out like its own, its walkers' log|psi| for them; says which.
  check_fine_tune first."""
  cfg = plan.settings(rundir.read_config(source, 'config.log.fine_tune_from'),
                      later_stage=True)
  run = TrainedRun.load(source, cfg, 'average')
  params = jax.device_put(run.state.params, jax.tree.map(lambda a: a.sharding, state.params))
  walkers = state.walkers._replace(log_psi=jax.jit(parts.walkers_log_psi)(params,
                                                                          state.walkers.x))
  say(f'Fine-tuning the {"averaged" if run.parameters == "average" else "last"} parameters '
      f'of step {run.trained_step} of {source}')
  return state._replace(params=params, walkers=walkers)
