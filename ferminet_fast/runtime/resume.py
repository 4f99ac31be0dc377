"""Whether a run starts fresh or resumes, and from what: the run directory decided once
for all processes, and a checkpoint accepted only if it was made with settings that give
the state the same shapes."""

from typing import NamedTuple

from ferminet_fast import config
from ferminet_fast.environment import distributed
from ferminet_fast.errors import InputError
from ferminet_fast.runtime import checkpoint, rundir


class Source(NamedTuple):
  """Where a run's state comes from."""
  run_dir: str  # The run directory this run writes.
  resume: bool  # True: run_dir holds a checkpoint of this run, continued.
  restore_from: str  # Directory whose newest checkpoint is restored ('' for a fresh start).


def check_compatible(source_dir: str, cfg, what: str = 'config.log.save_path') -> None:
  """Raises InputError unless the run in source_dir (`what` names it) has the state shapes
  cfg would build."""
  saved = rundir.read_config(source_dir, what).to_dict()
  diffs = config.structural_differences(saved, cfg.to_dict())
  if diffs:
    raise InputError(f'the checkpoint in {source_dir!r} was made with a different '
                     f'{"; ".join(diffs)} (these fix the saved state\'s shapes); '
                     'use a new log.save_path or the original settings')


def check_restore(cfg) -> None:
  """InputError unless `log.restore_path` (if given) holds a checkpoint that fits `cfg`;
  not asked where `log.save_path` holds this run's own checkpoint, which a restart resumes
  instead (a resubmitted job whose restore_path has since been cleared still resumes)."""
  if cfg.log.restore_path and not rundir.resumes(cfg.log.save_path):
    if not checkpoint.has_checkpoint(cfg.log.restore_path):
      raise InputError(f'config.log.restore_path {cfg.log.restore_path!r} holds no checkpoint')
    check_compatible(cfg.log.restore_path, cfg, 'config.log.restore_path')


def decide(ctx: distributed.Context, cfg, name: str) -> Source:
  """Checks `log.restore_path`, prepares the run directory (process 0 decides, the others
  follow) and checks that what is resumed fits `cfg`. Raises InputError before anything
  is written when it does not."""
  check_restore(cfg)
  decided = None
  if ctx.is_main:
    try:
      decided = rundir.prepare(cfg.log.save_path, name, cfg.to_dict())
    except InputError as e:
      decided = e
  decided = ctx.broadcast(decided)
  if isinstance(decided, InputError):
    raise decided
  run_dir, resume = decided
  if resume:
    check_compatible(run_dir, cfg)
  return Source(run_dir, resume, run_dir if resume else cfg.log.restore_path)
