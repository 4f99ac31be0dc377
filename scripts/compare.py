"""Side-by-side runner for the comparison workloads: each JAX port against its reference,
in this one process, on this machine; writes COMPARISON.md and a JSON of the details.

  python scripts/compare.py                      # every workload, full sizes
  python scripts/compare.py --only genesis_ops   # one of them
  python scripts/compare.py --quick              # small sizes (what the tests run)

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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from comparisons import WORKLOADS, measure  # noqa: E402


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


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--only', choices=sorted(WORKLOADS), action='append')
  p.add_argument('--quick', action='store_true', help='small sizes, a few seconds each')
  p.add_argument('--out', default=os.path.join(REPO, 'COMPARISON.md'))
  p.add_argument('--json', default=os.path.join(REPO, 'benchmarks', 'comparison.json'))
  args = p.parse_args()
  # Workloads not run now keep their earlier results (with their own provenance).
  saved = {}
  if os.path.exists(args.json):
    with open(args.json) as f:
      saved = json.load(f)
  command = ' '.join(['python scripts/compare.py', *sys.argv[1:]])
  ok = True
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
    saved[name] = {'command': command, 'date': datetime.date.today().isoformat(),
                   'machine': machine(), 'versions': versions(), 'wall_s': time.time() - t0,
                   'quick': args.quick, 'rows': [dataclasses.asdict(r) for r in rows],
                   'details': details, 'lines': lines}
    write(saved, args)
  print(f'wrote {args.out}')
  return 0 if ok else 1


def write(saved: dict, args) -> None:
  """COMPARISON.md and the JSON from every workload's latest results."""
  text = ['# Comparison workloads: JAX ports against their references', '',
          'Each JAX port and its reference ran in the same process, one after the other, on '
          'the machine named. Times are medians of repeated calls (outliers beyond 2.5 IQR '
          'dropped) unless the item says otherwise; JAX compilation is excluded and shown in '
          'its own column. Peak memory is the rise of the process RSS during the timed calls '
          '(– where not measured). Reproduce with the command given for each workload '
          '(`pip install -e \'.[compare]\'` first).', '']
  all_rows = []
  for name in sorted(saved):
    all_rows += [measure.Row(**r) for r in saved[name]['rows']]
  text += table(all_rows)
  for name in sorted(saved):
    w = saved[name]
    text += ['', f'## {name}', '',
             f'`{w["command"]}` on {w["machine"]}, {w["date"]}; {w["versions"]}; '
             f'{w["wall_s"]:.0f} s.', ''] + w['lines']
  with open(args.out, 'w') as f:
    f.write('\n'.join(text) + '\n')
  os.makedirs(os.path.dirname(args.json), exist_ok=True)
  with open(args.json, 'w') as f:
    json.dump(saved, f, indent=1, default=lambda o: getattr(o, '__dict__', str(o)))


if __name__ == '__main__':
  sys.exit(main())
