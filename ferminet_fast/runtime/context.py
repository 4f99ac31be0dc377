"""The run a process takes part in: its directory, where it prints, its timings and its
devices, handed to the loop and the report as one object."""

import os
from typing import Any

from ferminet_fast.environment import distributed
from ferminet_fast.runtime import rundir


class Run:
  """One process's view of a run. Only process 0 prints and writes the run directory."""

  def __init__(self, run_dir: str, ctx: distributed.Context, quiet: bool = False):
    self.dir = run_dir
    self.ctx = ctx
    self.quiet = quiet or not ctx.is_main
    self.timings: dict = {}  # timings.json: start-up, compilation, stage timers, totals.

  def say(self, *parts: Any) -> None:
    if not self.quiet:
      print(*parts, flush=True)

  def write(self, name: str, obj: Any) -> None:
    """Writes `obj` as JSON to the run directory's file `name` (process 0 only)."""
    if self.ctx.is_main:
      rundir.write_json(os.path.join(self.dir, name), obj)

  def save_timings(self) -> None:
    self.write('timings.json', self.timings)
