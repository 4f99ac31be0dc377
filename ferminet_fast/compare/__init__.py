"""Comparison workloads from our performance reports, ported to JAX, each beside a
reference in the framework its report used. `scripts/compare.py` runs them side by side
and writes COMPARISON.md. They need the `compare` extra; the trainer never imports them.

Each workload module offers `run_for_report(quick) -> (rows, details, markdown lines)`.
"""

import importlib

_MODULES = {
    'genesis_ops': 'ferminet_fast.compare.genesis_ops',
    'gaussgan': 'ferminet_fast.compare.gaussgan_bench',
    'pinn': 'ferminet_fast.compare.pinn_bench',
    'deepaw': 'ferminet_fast.compare.deepaw_bench',
}


def _loader(module):
  return lambda: importlib.import_module(module)


WORKLOADS = {name: _loader(module) for name, module in _MODULES.items()}
