"""Side-by-side runner for the comparison workloads: each JAX port against its reference,
in this one process, on this machine; appends the results to an artifact
(benchmarks/comparison.json, scripts/artifacts.py) and renders COMPARISON.md's table from it
(render(); `python -m scripts.render_docs`).

  python -m scripts.compare                      # every workload, full sizes
  python -m scripts.compare --only genesis_ops   # one of them
  python -m scripts.compare --quick              # small sizes (what the tests run)

Needs the `compare` extra (PyTorch CPU, scikit-learn, SciPy). Times exclude JAX's
compilation, which is reported in its own column.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
import traceback

from comparisons import WORKLOADS, measure
from scripts import artifacts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JSON = os.path.join(REPO, 'benchmarks', 'comparison.json')


def machine() -> str:
  import jax
  cpu = platform.processor()
  try:
    with open('/proc/cpuinfo') as f:
      cpu = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
  except (OSError, StopIteration):
    pass
  return (f'{jax.devices()[0].platform.upper()} ({jax.devices()[0].device_kind}); '
          f'{cpu}, {os.cpu_count()} cores')


def versions() -> str:
  import jax
  import numpy
  out = [f'jax {jax.__version__}', f'numpy {numpy.__version__}']
  for name in ('torch', 'scipy', 'sklearn'):
    try:
      out.append(f'{name} {__import__(name).__version__}')
    except ImportError:
      pass
  return ', '.join(out)


def mb(x):
  return '–' if x is None else f'{x:.0f}'


def table(rows) -> list:
  lines = ['| workload | item | size | reference | reference time | JAX time | JAX compile | '
           'speed-up | peak MiB ref / JAX | agreement | note |',
           '|---|---|---|---|---|---|---|---|---|---|---|']
  for r in rows:
    compile_s = '–' if r.compile_s is None else f'{r.compile_s:.2f} s'
    lines.append(f'| {r.workload} | {r.item} | {r.size} | {r.reference} | {measure.fmt_ms(r.ref_ms)} '
                 f'| {measure.fmt_ms(r.jax_ms)} | {compile_s} | {r.speedup:.2f}x '
                 f'| {mb(r.ref_peak_mb)} / {mb(r.jax_peak_mb)} '
                 f'| {"ok" if r.agrees else "**DIFFERS**"}: {r.agreement} | {r.note} |')
  return lines


def latest_workloads(path: str = JSON) -> dict:
  """{workload: (run, its results)} from the newest run that measured each workload."""
  out = {}
  for run in artifacts.read(path):
    for name, w in run.data.items():
      out[name] = (run, w)
  return dict(sorted(out.items()))


def render(path: str = JSON) -> str:
  """COMPARISON.md's table and each workload's section, from the artifact."""
  saved = latest_workloads(path)
  text = []
  for name, (_, w) in saved.items():
    text += table([measure.Row(**r) for r in w['rows']])[2 * bool(text):]
  for name, (run, w) in saved.items():
    text += ['', f'## {name}', '',
             f'`{artifacts.runnable(w["command"])}` on {w["machine"]}, {w["date"]}; '
             f'{w["versions"]}; {w["wall_s"]:.0f} s.', ''] + w['lines']
  runs = []
  for run, _ in saved.values():
    if not any(run is r for r in runs):
      runs.append(run)
  return '\n'.join(text + ['', artifacts.provenance(path, runs)])


TABLES = {'comparison': ('COMPARISON.md', render)}  # Rendered by scripts/render_docs.py.


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--only', choices=sorted(WORKLOADS), action='append')
  p.add_argument('--quick', action='store_true', help='small sizes, a few seconds each')
  p.add_argument('--json', default=JSON)
  p.add_argument('--render', action='store_true',
                 help='rewrite COMPARISON.md from the artifact afterwards')
  args = p.parse_args()
  command = ' '.join(['python -m scripts.compare', *sys.argv[1:]])
  run_meta, ok = artifacts.meta(), True
  for name in args.only or sorted(WORKLOADS):
    print(f'== {name}', flush=True)
    t0 = time.time()
    try:
      rows, details, lines = WORKLOADS[name]().run_for_report(args.quick)
    except Exception:  # One workload failing must not lose the others' results.
      traceback.print_exc()
      ok = False
      continue
    for r in rows:
      print(f'  {r.item} [{r.size}]: ref {measure.fmt_ms(r.ref_ms)}, JAX {measure.fmt_ms(r.jax_ms)} '
            f'({r.speedup:.2f}x), {"agrees" if r.agrees else "DIFFERS"}', flush=True)
      ok = ok and r.agrees
    result = {'command': command, 'date': datetime.date.today().isoformat(),
              'machine': machine(), 'versions': versions(), 'wall_s': time.time() - t0,
              'quick': args.quick, 'rows': [dataclasses.asdict(r) for r in rows],
              'details': details, 'lines': lines}
    artifacts.append(args.json, json.loads(json.dumps(
        {name: result}, default=lambda o: getattr(o, '__dict__', str(o)))), run_meta)
  if args.render:
    from scripts import render_docs
    render_docs.main([])
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
