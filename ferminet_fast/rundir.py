"""The run directory: resolved config, per-step statistics, timings and the result."""

import csv
import datetime
import json
import os
from typing import Optional

from ferminet_fast import InputError

RUN_FILES = ('config.json', 'stats.csv', 'timings.json', 'result.json')
STATS_COLUMNS = ('step', 'energy', 'variance', 'pmove', 'move_width', 'lr', 'step_time_ms')


def prepare(save_path: str, name: str) -> str:
  """Creates the run directory and returns its path.

  Refuses (InputError) a path that holds another run's files or cannot be written,
  before anything is written, so an earlier run is never overwritten.
  """
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
    if found:
      raise InputError(f'config.log.save_path {save_path!r} holds another run\'s files '
                       f'({", ".join(found)}); choose a new path')
  try:
    os.makedirs(save_path, exist_ok=True)
  except OSError as e:
    raise InputError(f'config.log.save_path {save_path!r} cannot be created: '
                     f'{e.strerror}') from None
  if not os.access(save_path, os.W_OK):
    raise InputError(f'config.log.save_path {save_path!r} is not writable')
  return save_path


def write_json(path: str, obj) -> None:
  """Writes JSON atomically (temporary file, then rename)."""
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(obj, f, indent=2, default=float)
    f.write('\n')
  os.replace(tmp, path)


class StatsWriter:
  """Appends one CSV row per step, flushed so a crashed run keeps its history."""

  def __init__(self, path: Optional[str]):
    self._file = open(path, 'w', newline='') if path else None
    if self._file:
      self._writer = csv.writer(self._file)
      self._writer.writerow(STATS_COLUMNS)

  def write(self, row: dict) -> None:
    if self._file:
      self._writer.writerow([row[c] for c in STATS_COLUMNS])

  def flush(self) -> None:
    if self._file:
      self._file.flush()

  def close(self) -> None:
    if self._file:
      self._file.close()
