"""The per-step record of a run: stats.csv, the progress bar or progress lines, and
TensorBoard scalars."""

import time
from typing import Callable, Optional

import jax
import numpy as np

from ferminet_fast.runtime import rundir


class Recorder:
  """Turns each step's device statistics into a stats.csv row, one step behind the device
  (fetching step t's scalars after step t + 1 is queued never stalls the device), and
  shows progress: a bar (when `progress` and the output is a terminal) or a line every
  `print_every` steps, plus TensorBoard scalars into `tensorboard_dir` if given.

  `path` None (processes other than 0) keeps the history in memory and writes nothing.

  A step is bad when its update was rejected, a local energy was non-finite, or (with
  `blowup_factor` > 0) its variance exceeds `blowup_factor` times the median variance of
  the `blowup_window` steps recorded before it; `consecutive_bad` counts them in a row.
  """

  def __init__(self, path: Optional[str], print_every: int, say: Callable,
               resume_from: Optional[int], total: int = 0, progress: bool = False,
               tensorboard_dir: Optional[str] = None, blowup_factor: float = 0.0,
               blowup_window: int = 500, geometries: int = 1):
    self._blowup_factor, self._blowup_window = blowup_factor, blowup_window
    self._columns = rundir.stats_columns(geometries)
    self._writer = rundir.StatsWriter(path, resume_from, self._columns) if path else None
    rows = self._writer.kept_rows if self._writer else []
    self.history = {c: [rundir.stats_value(r, c) for r in rows] for c in self._columns}
    self._print_every, self._say = print_every, say
    self._pending = None
    self.consecutive_bad = 0  # Bad steps in a row (class docstring).
    self.bad_reason = ''  # What made the last bad step bad.
    self._t0 = self.last = time.perf_counter()
    self._first = None
    self._bar = None
    if progress and path:
      import tqdm
      self._bar = tqdm.tqdm(total=total, initial=resume_from or 0, disable=None, unit='step',
                            dynamic_ncols=True, smoothing=0.05)
      if self._bar.disable:  # Not a terminal (a batch job's log): progress lines instead.
        self._bar = None
      else:
        self._say = lambda *a: tqdm.tqdm.write(' '.join(map(str, a)))
    self._tb = None
    if tensorboard_dir and path:
      import tensorboardX
      self._tb = tensorboardX.SummaryWriter(tensorboard_dir)

  def say(self, *parts) -> None:
    """A message line; with the progress bar, printed above it (not into its line)."""
    self._say(*parts)

  def push(self, t: int, device_stats) -> None:
    if self._pending is not None:
      self._record(*self._pending)
    self._pending = (t, device_stats)
    if self._first is None:
      self._first = t

  def flush(self) -> None:
    """Records the pending step and flushes stats.csv, so that the file holds every step
    before a checkpoint that is about to be written (a resume then finds no gap)."""
    if self._pending is not None:
      self._record(*self._pending)
      self._pending = None
    if self._writer is not None:
      self._writer.flush()

  def finish(self) -> None:
    if self._pending is not None:
      self._record(*self._pending)
      self._pending = None
    for sink in (self._writer, self._bar, self._tb):
      if sink is not None:
        sink.close()

  def rewind(self, t: int) -> None:
    """Forgets the steps from `t` on (the run continues from step t)."""
    self._pending = None
    keep = sum(1 for s in self.history['step'] if s < t)
    for c in self._columns:
      del self.history[c][keep:]
    if self._writer is not None:
      self._writer.truncate(t)
    if self._bar is not None:
      self._bar.n = t
      self._bar.refresh()
    self.consecutive_bad = 0
    self.last = time.perf_counter()

  def _blown_up(self, variance: float) -> bool:
    """Whether `variance` (Ha^2) exceeds blowup_factor times the median of the recorded
    variances of the last blowup_window steps (False until that many are recorded)."""
    past = self.history['variance']
    if self._blowup_factor <= 0 or len(past) < self._blowup_window:
      return False
    return variance > self._blowup_factor * float(np.median(past[-self._blowup_window:]))

  def _record(self, t, device_stats):
    s = jax.device_get(device_stats)
    now = time.perf_counter()
    row = {'step': t, 'energy': float(s.energy), 'variance': float(s.variance),
           'pmove': float(s.pmove), 'move_width': float(s.width), 'lr': float(s.lr),
           'nonfinite': int(s.nonfinite), 'rejected': int(s.rejected),
           'step_time_ms': 1e3 * (now - self.last), 'grad_norm': float(s.grad_norm),
           'update_norm': float(s.update_norm), 'clipped': float(s.clipped),
           'fisher_step': float(s.fisher_step), 'model_step': float(s.model_step)}
    if s.energies is not None:
      row.update({f'energy_{g}': float(e) for g, e in enumerate(s.energies)})
    reason = ('update rejected' if row['rejected'] else
              'non-finite local energies' if row['nonfinite'] else
              f"variance {row['variance']:.3g} Ha^2, over optim.blowup_factor times its "
              'recent median' if self._blown_up(row['variance']) else '')
    self.consecutive_bad = self.consecutive_bad + 1 if reason else 0
    self.bad_reason = reason or self.bad_reason
    if row['rejected']:
      self._say(f'step {t + 1}: update rejected (it would make parameters non-finite); '
                f'{self.consecutive_bad} bad steps in a row')
    self.last = now
    for c in self._columns:
      self.history[c].append(row[c])
    if self._writer is not None:
      self._writer.write(row)
    if self._tb is not None:
      for c in ('energy', 'variance', 'pmove', 'move_width', 'lr', 'step_time_ms', 'grad_norm',
                'update_norm', 'clipped', 'fisher_step', 'model_step'):
        self._tb.add_scalar(c, row[c], t)
    if self._bar is not None:
      self._bar.update(1)
      if (t + 1) % 10 == 0:
        self._bar.set_postfix_str(f'E={row["energy"]:.5f} var={row["variance"]:.4f} '
                                  f'pmove={row["pmove"]:.2f}', refresh=False)
    elif self._print_every and (t + 1) % self._print_every == 0:
      rate = (t + 1 - self._first) / (now - self._t0)
      self._say(f'step {t + 1:6d}  E {row["energy"]:12.6f}  var {row["variance"]:9.5f}  '
                f'pmove {row["pmove"]:.2f}  width {row["move_width"]:.3f}  {rate:7.1f} it/s')
    if self._writer is not None and self._print_every and (t + 1) % self._print_every == 0:
      self._writer.flush()
