"""Checkpoints of the whole training state (parameters, optimizer state, walkers, move
width, PRNG key, step) with orbax: written asynchronously and atomically, the last K kept.

Orbax writes each checkpoint into a temporary directory and renames it when complete, so
a run killed mid-write leaves no checkpoint that looks finished; one that still fails to
restore is skipped with a warning in favour of the one before it. One that records another
tree of arrays than today's state (written by an earlier, incompatible version) is refused.
"""

import json
import os
import shutil
import time
import warnings
from typing import Optional, Sequence

import jax
import orbax.checkpoint as ocp

from ferminet_fast.errors import InputError

SUBDIR = 'checkpoints'
TRASH = 'retired'  # Inside SUBDIR: checkpoints renamed here are being deleted.
ITEM = 'default'  # The directory of a checkpoint's one item (orbax's name for it).
EMPTY = ('None', 'Dict', 'List', 'Tuple', 'NamedTuple')  # Orbax's types of empty nodes.


def directory(run_dir: str) -> str:
  return os.path.abspath(os.path.join(run_dir, SUBDIR))


def saved_steps(run_dir: str) -> list:
  """The steps of the checkpoints in run_dir, ascending ([] without any)."""
  d = directory(run_dir)
  return sorted(int(name) for name in os.listdir(d) if name.isdigit()) if os.path.isdir(d) else []


def has_checkpoint(run_dir: str) -> bool:
  return bool(saved_steps(run_dir))


class Checkpointer:
  """Saves every `every_steps` steps and/or `every_minutes` minutes, keeping the last `keep`."""

  def __init__(self, run_dir: str, keep: int, every_steps: int, every_minutes: float):
    # Old checkpoints are retired by an atomic rename into TRASH and only then deleted
    # (orbax deletes file by file: a kill mid-way would leave a step directory that looks
    # like a checkpoint but is half gone).
    self._trash = os.path.join(directory(run_dir), TRASH)
    self._empty_trash()
    self._manager = ocp.CheckpointManager(
        directory(run_dir),
        options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True,
                                             todelete_subdir=TRASH))
    self._every_steps, self._every_s = every_steps, 60.0 * every_minutes
    self._last_time = time.monotonic()
    self.last_saved: Optional[int] = None

  def due_by_steps(self, step: int) -> bool:
    return bool(self._every_steps and step % self._every_steps == 0)

  def steps_to_due(self, step: int) -> int:
    """Steps from `step` to the next one due by steps (0: none is ever due by steps)."""
    return self._every_steps - step % self._every_steps if self._every_steps else 0

  def due_by_time(self) -> bool:
    return bool(self._every_s and time.monotonic() - self._last_time >= self._every_s)

  def save(self, step: int, state) -> None:
    """Saves `state` (called by every process with the same step). Orbax copies the arrays
    to host memory before returning (so the next step may donate them) and writes the
    files in the background."""
    if step == self.last_saved:
      return
    self._empty_trash()
    self._manager.save(step, args=ocp.args.StandardSave(state))
    self._last_time = time.monotonic()
    self.last_saved = step

  def close(self) -> None:
    """Waits for pending writes."""
    self._manager.wait_until_finished()
    self._manager.close()
    self._empty_trash()

  def _empty_trash(self) -> None:
    """Deletes retired checkpoints (a rename may be adding one meanwhile: what cannot be
    deleted now is deleted next time)."""
    if os.path.isdir(self._trash):
      for name in os.listdir(self._trash):
        shutil.rmtree(os.path.join(self._trash, name), ignore_errors=True)


def restore_latest(run_dir: str, like, fields: Optional[Sequence[str]] = None,
                   newest: Optional[int] = None) -> tuple:
  """(step, state) from the newest checkpoint of run_dir that restores, shaped and laid
  out over devices like `like` (a state of the same config, on this run's devices; the
  saved device count does not matter). With `fields` (names of the state's fields, e.g.
  ('params', 'walkers')) only those are read and the rest is kept from `like`. With
  `newest`, checkpoints of later steps are not tried.

  A checkpoint that fails to restore is skipped with a warning in favour of the one before
  it (damaged). One whose saved tree of arrays is not `like`'s (written by an earlier,
  incompatible version) is refused with an InputError, its files left as they are; so is
  a run directory none of whose checkpoints restores."""

  def restore_args(target):
    if fields is None:
      return ocp.args.StandardRestore(jax.tree.map(ocp.utils.to_shape_dtype_struct, target))
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct,
                            {f: getattr(target, f) for f in fields})
    return ocp.args.PyTreeRestore(
        item=abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
        partial_restore=True)

  def restore(step):
    state = manager.restore(step, args=restore_args(like))
    if fields is None:
      return state
    # A partial restore leaves what the checkpoint lacks as shapes: a different layout.
    missing = [jax.tree_util.keystr(path) for path, leaf in
               jax.tree_util.tree_leaves_with_path(state)
               if isinstance(leaf, jax.ShapeDtypeStruct)]
    if missing:
      raise ValueError(f'the checkpoint holds no {missing[0]} (and {len(missing) - 1} more)')
    return like._replace(**state)

  manager = ocp.CheckpointManager(directory(run_dir))
  try:
    for step in sorted((t for t in manager.all_steps() if newest is None or t <= newest),
                       reverse=True):
      try:
        state = restore(step)
      except Exception as e:
        differences = _layout_differences(run_dir, step, like, fields)
        if differences:
          raise InputError(
              f'the checkpoint of step {step} in {directory(run_dir)} was written by an '
              f'earlier, incompatible version of ferminet_fast ({differences}); it cannot be '
              'resumed or evaluated by this one. Its files are left as they are: start a new '
              'run in another directory, or use the version that wrote it') from None
        # A damaged checkpoint: fall back to the one before.
        warnings.warn(f'checkpoint {step} in {directory(run_dir)} cannot be restored '
                      f'({type(e).__name__}: {str(e).splitlines()[0][:200]}); trying an older one')
        continue
      return step, state
  finally:
    manager.close()
  raise InputError(f'no checkpoint in {directory(run_dir)} can be restored')


def _layout_differences(run_dir: str, step: int, like, fields: Optional[Sequence[str]]) -> str:
  """How the tree of arrays saved at `step` differs from `like`'s (its `fields` only), in
  words; '' when it does not, or when the saved tree cannot be read (a damaged checkpoint).
  Read from the tree's description that orbax writes beside the arrays, without the arrays."""
  try:
    with open(os.path.join(directory(run_dir), str(step), ITEM, '_METADATA')) as f:
      entries = json.load(f)['tree_metadata'].values()
    saved = {tuple(str(k['key']) for k in e['key_metadata']) for e in entries
             if e['value_metadata']['value_type'] not in EMPTY}
  except Exception:  # Unreadable: damaged.
    return ''
  wanted = _paths({f: getattr(like, f) for f in (fields or like._fields)})
  if fields is not None:
    saved = {path for path in saved if path[0] in fields}
  said = []
  for paths, what, why in ((sorted(wanted - saved), 'lacks', ''),
                           (sorted(saved - wanted), 'holds', ' unknown to this version')):
    if paths:
      more = f' and {len(paths) - 1} more' if len(paths) > 1 else ''
      said.append(f'its state {what} {".".join(paths[0])}{more}{why}')
  return '; '.join(said)


def _paths(tree) -> set:
  """The path of each array of `tree` as a tuple of names, as orbax records it (a named
  tuple's fields and a dict's keys by name, a sequence's items by index)."""
  def name(key):
    for attr in ('key', 'name', 'idx'):
      if hasattr(key, attr):
        return str(getattr(key, attr))
    return str(key)
  return {tuple(name(k) for k in path) for path, _ in jax.tree_util.tree_leaves_with_path(tree)}
