"""The run directory: resolved config, per-step statistics, timings and the result."""

import csv
import datetime
import json
import math
import os
from typing import Optional

from ferminet_fast.errors import InputError

CONFIG = 'config.json'  # The run's settings, as given (before 'auto' and 'best' resolve).
RUN_FILES = (CONFIG, 'stats.csv', 'timings.json', 'result.json')
STATS_COLUMNS = ('step', 'energy', 'variance', 'pmove', 'move_width', 'lr', 'nonfinite',
                 'rejected', 'step_time_ms', 'grad_norm', 'update_norm', 'clipped',
                 'fisher_step', 'model_step')
# Runs of older versions lack them.
LATER_COLUMNS = ('grad_norm', 'update_norm', 'clipped', 'fisher_step', 'model_step')


def stats_value(row: dict, column: str) -> float:
  """A stats.csv row's value of `column`: NaN for a LATER_COLUMNS one the row lacks (a
  run resumed from an older version), a KeyError for any other one missing."""
  if column in LATER_COLUMNS and not row.get(column):
    return math.nan
  return float(row[column])


def stats_columns(geometries: int = 1) -> tuple:
  """stats.csv's columns: STATS_COLUMNS, and over a set of geometries the mean local energy
  of each, energy_0 ... energy_{G-1} (Ha; `energy` is then their mean)."""
  return STATS_COLUMNS + (tuple(f'energy_{g}' for g in range(geometries)) if geometries > 1
                          else ())


def resumes(save_path: str) -> bool:
  """Whether `save_path` holds a run that `prepare` resumes: checkpoints with their
  config.json. Such a run continues its own checkpoint, whatever it was restored or
  fine-tuned from when it began."""
  from ferminet_fast.runtime import checkpoint  # Avoids importing orbax for a bad path.
  return (bool(save_path) and os.path.isdir(save_path) and
          os.path.exists(os.path.join(save_path, CONFIG)) and checkpoint.has_checkpoint(save_path))


def prepare(save_path: str, name: str, config: Optional[dict] = None) -> tuple:
  """Creates the run directory; returns (path, resume).

  A directory holding a run with a checkpoint is resumed (resume=True). A run of the same
  `config` stopped before its first checkpoint (so with nothing worth keeping: no
  checkpoint, no result) starts again there. One holding another run's files but no
  checkpoint, checkpoints without their config.json, or one that cannot be written, is
  refused (InputError) before anything is written, so an earlier run is never
  overwritten.
  """
  from ferminet_fast.runtime import checkpoint  # Avoids importing orbax for a bad path.
  if not save_path:
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    save_path = base = os.path.join('runs', f'{name}_{stamp}')
    i = 1
    while os.path.exists(save_path):
      save_path, i = f'{base}-{i}', i + 1
  if os.path.exists(save_path) and not os.path.isdir(save_path):
    raise InputError(f'config.log.save_path {save_path!r} exists and is not a directory')
  if os.path.isdir(save_path):
    found = [f for f in RUN_FILES if os.path.exists(os.path.join(save_path, f))]
    if resumes(save_path):
      if not os.access(save_path, os.W_OK):
        raise InputError(f'config.log.save_path {save_path!r} is not writable')
      return save_path, True
    if checkpoint.has_checkpoint(save_path):  # A new run's checkpoints would retire the old ones.
      raise InputError(f'config.log.save_path {save_path!r} holds checkpoints but no {CONFIG} '
                       '(another run\'s, which cannot be resumed without it); choose a new '
                       'path')
    if found and _interrupted_start(save_path, found, config):
      return save_path, False
    if found:
      raise InputError(f'config.log.save_path {save_path!r} holds another run\'s files '
                       f'({", ".join(found)}) and no checkpoint to resume; choose a new path')
  try:
    os.makedirs(save_path, exist_ok=True)
  except OSError as e:
    raise InputError(f'config.log.save_path {save_path!r} cannot be created: '
                     f'{e.strerror}') from None
  if not os.access(save_path, os.W_OK):
    raise InputError(f'config.log.save_path {save_path!r} is not writable')
  return save_path, False


def _interrupted_start(path: str, found: list, config: Optional[dict]) -> bool:
  """Whether `path` holds only the start of a run of `config` (killed before it saved)."""
  if config is None or 'result.json' in found or CONFIG not in found:
    return False
  try:
    saved = saved_config(path)
  except InputError:
    return False
  return saved == json.loads(json.dumps(config))


def saved_config(run_dir: str) -> dict:
  """The settings a run saved (its config.json) as written: the one reader of that file."""
  return read_object(os.path.join(run_dir, CONFIG))


def read_config(run_dir: str, what: str = '--run'):
  """The settings of the run in `run_dir`, a ConfigDict (unvalidated); InputError, naming
  the run as `what` names it, where `run_dir` is not a run directory."""
  from ferminet_fast import config as config_lib  # The settings' tables import JAX.
  if not os.path.isdir(run_dir):
    raise InputError(f'{what} {run_dir!r} is not a directory')
  if not os.path.exists(os.path.join(run_dir, CONFIG)):
    raise InputError(f'{what} {run_dir!r} holds no {CONFIG} (not a run directory)')
  return config_lib.from_json(saved_config(run_dir), os.path.join(run_dir, CONFIG))


def read_json(path: str) -> dict:
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise InputError(f'{path} cannot be read: {e}') from None


def read_object(path: str, fields: tuple = (), hint: str = '') -> dict:
  """A JSON file this package wrote, an object holding `fields`; InputError naming it where
  it is not (edited or cut short by hand), with `hint` (what to do) appended."""
  d = read_json(path)
  missing = [f for f in fields if not isinstance(d, dict) or f not in d]
  if not isinstance(d, dict) or missing:
    raise InputError(f'{path} is not as ferminet_fast writes it'
                     + (f' (no {", ".join(missing)})' if missing else '') + hint)
  return d


def _finite_or_none(x: float) -> Optional[float]:
  return x if math.isfinite(x) else None


def _strict(obj):
  """`obj` with each non-finite float as None: JSON has no NaN or infinity (strict readers,
  jq's and JavaScript's among them, refuse the tokens Python would write), and null says
  'no value', e.g. the error bar of a run too short to reblock."""
  if isinstance(obj, float):
    return _finite_or_none(obj)
  if isinstance(obj, dict):
    return {k: _strict(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [_strict(v) for v in obj]
  return obj


def write_json(path: str, obj) -> None:
  """Writes strict JSON atomically (temporary file, then rename): numbers that are not
  finite become null; other scalars (numpy, JAX) are written as floats."""
  tmp = path + '.tmp'
  try:
    with open(tmp, 'w') as f:
      json.dump(_strict(obj), f, indent=2, allow_nan=False,
                default=lambda o: _finite_or_none(float(o)))
      f.write('\n')
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


class StatsWriter:
  """Appends one CSV row per step, flushed so a crashed run keeps its history.

  With `resume_from`, rows of steps >= resume_from (written after the checkpoint being
  resumed) are dropped first, so the file has each step exactly once.
  """

  def __init__(self, path: str, resume_from: Optional[int] = None,
               columns: tuple = STATS_COLUMNS):
    self._path, self._file, self._columns = path, None, columns
    if resume_from is not None and os.path.exists(path):
      self.kept_rows = self.truncate(resume_from)
    else:
      self.kept_rows = self.truncate(0, read=False)

  def truncate(self, step: int, read: bool = True) -> list:
    """Keeps only the rows of steps < `step` (rewritten atomically), appends after them,
    and returns the kept rows (dicts of strings)."""
    if self._file is not None:
      self._file.close()
    rows = []
    if read:
      with open(self._path, newline='') as f:
        rows = [r for r in csv.DictReader(f) if int(r['step']) < step]
    tmp = self._path + '.tmp'
    with open(tmp, 'w', newline='') as f:
      writer = csv.DictWriter(f, self._columns)
      writer.writeheader()
      writer.writerows(rows)
    os.replace(tmp, self._path)
    self._file = open(self._path, 'a', newline='', buffering=1)  # Line-buffered: current.
    self._writer = csv.DictWriter(self._file, self._columns)
    return rows

  def write(self, row: dict) -> None:
    self._writer.writerow({c: row[c] for c in self._columns})

  def flush(self) -> None:
    self._file.flush()

  def close(self) -> None:
    self._file.close()
