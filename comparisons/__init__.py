"""Comparison workloads from our performance reports, ported to JAX, each beside a
reference in the framework its report used. Not part of the trainer: not installed with
it, and it never imports them. `scripts/compare.py` runs them side by side and writes
COMPARISON.md; they need the `compare` extra (pip install -e '.[compare]').

Every workload has the same layout, and the dependencies point one way:

  <workload>/data.py       the inputs (generated, no downloads)
  <workload>/port.py       the JAX port                        (may import data)
  <workload>/reference.py  the reference it is checked against (may import port, data)
  <workload>/bench.py      agreement checks and timings, `run_for_report(quick) ->
                           (rows, details, markdown lines)`     (imports all three)

`measure.py` holds the timing and memory helpers they share.
"""

import importlib

NAMES = ('genesis_ops', 'gaussgan', 'pinn', 'deepaw')


def _loader(name):
  return lambda: importlib.import_module(f'comparisons.{name}.bench')


WORKLOADS = {name: _loader(name) for name in NAMES}
