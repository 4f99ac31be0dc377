"""The GPU sitting: ms per training step of He, Ne, N2 and ethene at FermiNet's standard
network, batch 4096, with KFAC and Adam, with float32, TF32 and bfloat16 matrix products,
and the arithmetic rate each reaches against the chip's peak, all within a time budget.

  python -m scripts.benchmark --sitting gpu          # on a GPU machine, within 480 s
  python -m scripts.benchmark --sitting gpu --budget 300 --systems Ne --optimizers kfac
  python -m scripts.benchmark --sitting gpu --missing  # what earlier sittings lacked
  python -m scripts.benchmark --sitting gpu --tiny   # the same path on a CPU, tiny sizes

Each measurement builds the step through the package's build path (plan.build, then
vmc.step.compile_step, as training does) on one device, with 10 MCMC moves per step, no
pretraining and no burn-in: the sitting measures the step, and the energies are those of a
fresh network's first steps, every variant's from the same parameters, walkers and random
keys. The step is compiled with JAX's default matmul precision set to the variant's dot
algorithm (PRECISIONS); a few warm-up steps run, then the timed steps are dispatched back
to back and timed to the end of the last (`block_until_ready`). Kept per measurement: the
build and compile times (s), ms per step, the mean local energy over the timed steps (Ha;
each variant's beside float32's in the table, so that a change of the energies shows),
XLA's count of the step's floating-point operations (`Compiled.cost_analysis()`, the MCMC
loop's moves each counted: `step_flops`; factorisations in library calls, such as the
determinants' LU and KFAC's Cholesky factors, are not counted) and the rate it gives (TFLOP/s)
against the chip's float32 peak (PEAKS; None on a device not listed).

Measurements run in priority order (`order`): float32, the trainer's own products, with
KFAC and then Adam at every system, then TF32 likewise, then bfloat16. Each runs in a process
of its own (`run_one`), which holds the device alone and is stopped at the end of the
budget or after twice the time expected of it (`allowed_s`): a measurement whose compilation
outlasts that is recorded as cut, with the stage it reached, the others still get their
turn, and the sitting still writes its artifact. A measurement is started only
when the time spent so far plus its expected time (`expected_s`) stays within `--budget`
seconds; the others are recorded as skipped. The run is written as an artifact (scripts/artifacts.py, with the
machine, versions and commit) to benchmarks/gpu_sitting_<device kind>_<date>.json, or
with `--tiny` (batch 8, a small network, 2 steps, He: a check of the path on a CPU) to the
temporary directory; its table, each variant from the newest sitting of the device kind
and sizes that measured it, is rendered into BENCHMARKS.md by scripts/benchmark_tables.py.
With `--missing`, a sitting measures only what no earlier one alike did: sittings too short
for the whole table add up to it.
"""

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple, Optional

from scripts import artifacts
from scripts import benchmark_tables as tables
from scripts import ferminet_reference as reference
from scripts import step_cost

SYSTEMS = ('He', 'Ne', 'N2', 'C2H4')
OPTIMIZERS = ('kfac', 'adam')
# Matrix-product variants: what JAX's default matmul precision is set to while the step
# compiles. float32 is the trainer's own setting (matmul_precision = 'highest'); the others
# name dot algorithms, not the levels 'tensorfloat32' and 'bfloat16', which JAX maps to the
# coarse levels HIGH and DEFAULT whose products each device picks (DEFAULT gives TF32, not
# bfloat16, on NVIDIA GPUs since Ampere). A CPU has no TF32 products (that variant fails
# there, and is recorded as failed) and runs the bfloat16 algorithm of a plain product in
# float32 (JAX's lowering says so): on a CPU only the path is checked.
PRECISIONS = {'float32': 'highest', 'tf32': 'TF32_TF32_F32', 'bf16': 'BF16_BF16_F32'}
# Peak TFLOP/s of one chip, by the first name that JAX's device_kind contains: float32 on
# the CUDA cores, TF32 and bfloat16 on the tensor cores, dense (the datasheets quote the
# tensor figures with 2:4 sparsity, twice these). From NVIDIA's H100 Tensor Core GPU
# datasheet (SXM5, PCIe, NVL), H200 Tensor Core GPU datasheet (SXM, NVL: the H100's chip
# with more memory; GH200's GPU is the same) and A100 Tensor Core GPU datasheet (SXM4 and
# PCIe alike).
PEAKS = (
    ('H200 NVL', {'float32': 60.0, 'tf32': 417.5, 'bf16': 835.5}),
    ('H100 NVL', {'float32': 60.0, 'tf32': 417.5, 'bf16': 835.5}),
    ('H100 PCIe', {'float32': 51.0, 'tf32': 378.0, 'bf16': 756.5}),
    ('H200', {'float32': 67.0, 'tf32': 494.5, 'bf16': 989.5}),
    ('H100', {'float32': 67.0, 'tf32': 494.5, 'bf16': 989.5}),
    ('A100', {'float32': 19.5, 'tf32': 156.0, 'bf16': 312.0}),
)
# --tiny checks the path, not the speed: its programs compile without LLVM's optimisation of
# the generated code, as the tests' do (XLA's own passes still run), which takes most of
# the compilation time off on a CPU.
FAST_COMPILE = '--xla_backend_optimization_level=0'
NOT_MEASURED = ('pretraining: none, and no MCMC burn-in (the sitting measures step time; '
                'the energies are those of a fresh network\'s first steps)')


class Sizes(NamedTuple):
  """What one measurement runs: walkers, network keys, MCMC moves per step, steps."""
  batch: int
  network: dict  # Config keys of the network.
  mcmc_steps: int
  warmup: int  # Steps run before the timed ones (first-run allocations).
  steps: int  # Steps timed.


STANDARD = Sizes(4096, reference.NETWORKS['standard'], int(reference.SHARED['mcmc.steps']), 3, 20)
TINY = Sizes(8, {'network.ferminet.hidden_dims': '((8, 4), (8, 4))',
                 'network.determinants': '1'}, 2, 1, 2)


def peaks(device_kind: str) -> Optional[dict]:
  """The chip's peak TFLOP/s by precision (PEAKS), or None for a device not listed."""
  return next((p for name, p in PEAKS if name in device_kind), None)


def order(systems, optimizers, precisions) -> list:
  """[(system, optimizer, precision)] in priority order: per precision (as given), each
  optimizer (as given) at every system (as given)."""
  return [(s, o, p) for p in precisions for o in optimizers for s in systems]


def expected_s(done: list, system: str) -> float:
  """Seconds a measurement of `system` is expected to take: the longest of the same system
  so far (a variant stopped at its limit counts: the next is likely as slow), else the
  longest measured of another so far scaled by the electrons (a larger system compiles and
  steps longer), else 0 (the first one always starts)."""
  same = [r['wall_s'] for r in done if r['system'] == system]
  if same:
    return max(same)
  measured = [r for r in done if r.get('status', 'measured') == 'measured']
  if not measured:
    return 0.0
  longest = max(measured, key=lambda r: r['wall_s'])
  n = tables.ELECTRONS
  return longest['wall_s'] * max(1.0, n[system] / n[longest['system']])


def _config(name: str, optimizer: str, sizes: Sizes):
  """The validated settings of one measurement: the shipped config of `name` with `sizes`,
  the local energies of all walkers at once (so that XLA counts them all)."""
  from ferminet_fast import plan
  from ferminet_fast.runtime import cli
  keys = {**reference.OUR_KEYS.get(name, {}), **sizes.network, 'batch_size': str(sizes.batch),
          'mcmc.steps': str(sizes.mcmc_steps), 'optim.optimizer': optimizer,
          'optim.energy_chunk_size': '0', 'pretrain.iterations': '0'}
  return plan.settings(cli.resolve([
      'sitting', '--config', os.path.join(artifacts.REPO, reference.SYSTEMS[name][0]),
      *[f'--config.{k}={v}' for k, v in keys.items()]]))


def one_device():
  """The device context of the first device alone: the peak compares with one chip's."""
  import jax
  import numpy as np
  from jax.sharding import Mesh
  from ferminet_fast.environment import distributed
  return distributed.Context(Mesh(np.asarray(jax.devices()[:1]), (distributed.AXIS,)), 0, 1)


def step_flops(compiled, mcmc_steps: int) -> tuple:
  """(XLA's count of one step's floating-point operations, whether the MCMC moves stayed a
  loop): XLA counts a loop's body once, so while the sweep stays a loop the step's count
  gets the other mcmc_steps - 1 moves from the sweep compiled alone (one move and the width
  adaptation); an unrolled sweep is counted whole already."""
  looped = 'while(' in compiled.mcmc.as_text()
  moves = mcmc_steps - 1 if looped else 0
  return step_cost.flops(compiled.train_step) + moves * step_cost.flops(compiled.mcmc), looped


def timed_steps(compiled, state, sizes: Sizes) -> dict:
  """Runs `sizes.warmup` steps, then times `sizes.steps` dispatched back to back to the end
  of the last: ms per step and the mean local energy (Ha) over the timed steps."""
  import jax
  import numpy as np
  for _ in range(sizes.warmup):
    state, _ = compiled.train_step(state)
  jax.block_until_ready(state)
  energies, nonfinite = [], []
  start = time.perf_counter()
  for _ in range(sizes.steps):
    state, stats = compiled.train_step(state)
    energies.append(stats.energy)
    nonfinite.append(stats.nonfinite)
  jax.block_until_ready(state)
  ms = 1e3 * (time.perf_counter() - start) / sizes.steps
  energies = [float(e) for e in np.asarray(jax.device_get(energies))]
  return {'ms_per_step': ms, 'energy': float(np.mean(energies)), 'energies': energies,
          'nonfinite': int(np.sum(jax.device_get(nonfinite)))}


# The prefix of a measurement's progress lines on its error output: the last one names the
# stage that a measurement stopped at the deadline had reached.
PROGRESS = 'sitting stage: '


def _progress(stage: str) -> None:
  print(PROGRESS + stage, file=sys.stderr, flush=True)


def measure(name: str, optimizer: str, precision: str, sizes: Sizes,
            peak: Optional[dict]) -> dict:
  """One system, optimizer and matrix-product precision: built, compiled, stepped and
  counted (module docstring)."""
  import jax
  from ferminet_fast import plan
  from ferminet_fast.vmc import step
  start = time.perf_counter()
  _progress('building')
  built = plan.build(_config(name, optimizer, sizes), jax.random.PRNGKey(0), one_device())
  build_s = time.perf_counter() - start
  _progress(f'compiling (built in {build_s:.0f} s)')
  with jax.default_matmul_precision(PRECISIONS[precision]):
    compiled = step.compile_step(built.parts, built.state)
  _progress(f'stepping (compiled in {compiled.compile_s:.0f} s)')
  flops, looped = step_flops(compiled, sizes.mcmc_steps)
  out = timed_steps(compiled, built.state, sizes)
  tflops = flops / out['ms_per_step'] / 1e9
  return {'build_s': build_s, 'compile_s': compiled.compile_s, **out,
          'flops_per_step': flops, 'mcmc_loop_counted_once': looped, 'tflops': tflops,
          'percent_of_float32_peak': 100 * tflops / peak['float32'] if peak else None,
          'laplacian': built.parts.laplacian.name,
          'wall_s': time.perf_counter() - start}


# A measurement may take at most OVERRUN times what was expected of it (`expected_s`, where
# anything was), and never less than MIN_ALLOWED_S: one compilation far slower than its
# kind's, as XLA's can be on a GPU, is stopped and the measurements after it get their turn.
OVERRUN = 2.0
MIN_ALLOWED_S = 120.0


def allowed_s(left_s: float, expect_s: float) -> float:
  """Seconds a measurement may run: what is left of the budget, and at most OVERRUN times
  the time expected of it but not under MIN_ALLOWED_S (none expected: all that is left)."""
  return min(left_s, max(MIN_ALLOWED_S, OVERRUN * expect_s)) if expect_s else left_s


def device_facts(tiny: bool) -> dict:
  """The platform, kind and count of this process's devices, and the first one's peaks.
  Run in a child process (`probe`), so that the sitting's own process never holds the
  device that its measurements need."""
  if tiny:
    from ferminet_fast.environment import xla_flags
    xla_flags.request(FAST_COMPILE)  # Before JAX's backend starts.
  import jax
  device = jax.devices()[0]
  return {'platform': device.platform, 'kind': device.device_kind,
          'count': len(jax.devices()), 'peaks': peaks(device.device_kind)}


def _child(args: list, timeout_s: float) -> tuple:
  """Runs `python -m scripts.sitting --child ARGS` from the repository, in a process group
  of its own, for at most `timeout_s` seconds (then the group is killed, any compiler it
  started too): (its JSON answer, or None if it gave none; the last progress line it
  printed; the last line of its error output and its exit status; whether it was stopped).
  """
  with tempfile.TemporaryDirectory() as tmp:
    answer = os.path.join(tmp, 'answer.json')
    cmd = [sys.executable, '-m', 'scripts.sitting', '--child', *args, '--answer', answer]
    with subprocess.Popen(cmd, cwd=artifacts.REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors='replace',
                          start_new_session=True) as proc:
      try:
        _, err = proc.communicate(timeout=timeout_s)
        cut = False
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        cut = True
    lines = [line.strip() for line in (err or '').splitlines() if line.strip()]
    progress = [line[len(PROGRESS):] for line in lines if line.startswith(PROGRESS)]
    last = f'{(lines or ["no error output"])[-1]} (exit status {proc.returncode})'
    result = None
    if not cut and proc.returncode == 0:
      try:
        with open(answer) as f:
          result = json.load(f)
      except (OSError, ValueError) as e:
        last = f'no answer: {type(e).__name__}: {e}'
    return result, (progress or ['started'])[-1], last, cut


def probe(tiny: bool, timeout_s: float) -> dict:
  """device_facts, listed by a child process within `timeout_s` seconds (RuntimeError if
  it could not list them)."""
  facts, _, last, cut = _child(['probe', *(['--tiny'] if tiny else [])], timeout_s)
  if facts is None or 'error' in facts:
    reason = f'not within {timeout_s:.0f} s' if cut else (facts or {}).get('error', last)
    raise RuntimeError(f'the devices could not be listed: {reason}')
  return facts


def run_one(name: str, optimizer: str, precision: str, tiny: bool, timeout_s: float) -> dict:
  """One measurement (`measure`) in a child process stopped after `timeout_s` seconds: its
  fields and status 'measured', or status 'failed' (with the error) or 'cut' (with the
  stage it reached)."""
  began = time.perf_counter()
  result, stage, last, cut = _child(
      ['measure', name, optimizer, precision, *(['--tiny'] if tiny else [])], timeout_s)
  wall = time.perf_counter() - began
  if cut:
    return {'status': 'cut', 'wall_s': wall, 'reason': f'stopped {wall:.0f} s after it '
            f'started, at its {timeout_s:.0f} s limit, {stage}'}
  if result is None or 'error' in result:
    return {'status': 'failed', 'wall_s': wall,
            'reason': (result['error'] if result else last)[:300]}
  return {**result, 'status': 'measured', 'wall_s': wall}


def sitting(systems, optimizers, precisions, tiny: bool, budget_s: float,
            started: float, say=print, measured_before=frozenset()) -> list:
  """The rows of a sitting, in priority order: each measured, failed (its error's last
  line), cut (stopped at its limit, `allowed_s`) or skipped (over the budget), with its wall
  time; the variants (system, optimizer, precision) in `measured_before` left out.
  `started`: time.monotonic() when the sitting began (its imports count against the
  budget)."""
  rows, done = [], []
  for name, opt, prec in order(systems, optimizers, precisions):
    if (name, opt, prec) in measured_before:
      continue
    row = {'system': name, 'optimizer': opt, 'precision': prec}
    spent, expect = time.monotonic() - started, expected_s(done, name)
    if spent + expect > budget_s:
      rows.append({**row, 'status': 'skipped', 'reason': f'{spent:.0f} s spent, about '
                   f'{expect:.0f} s expected, budget {budget_s:.0f} s'})
      say(f'{name} {opt} {prec}: skipped ({rows[-1]["reason"]})', flush=True)
      continue
    row.update(run_one(name, opt, prec, tiny, allowed_s(budget_s - spent, expect)))
    done.append(row)
    if row['status'] == 'measured':
      say(f'{name} {opt} {prec}: {row["ms_per_step"]:.2f} ms per step, compile '
          f'{row["compile_s"]:.1f} s, {row["tflops"]:.3f} TFLOP/s, mean energy '
          f'{row["energy"]:.4f} Ha', flush=True)
    else:
      say(f'{name} {opt} {prec}: {row["status"]} ({row["reason"]})', flush=True)
    rows.append(row)
  return rows


def record(rows: list, sizes: Sizes, facts: dict, budget_s: float, elapsed_s: float,
           tiny: bool) -> dict:
  """The artifact's data of a sitting: its rows, sizes, device (`facts` of `device_facts`:
  the first of `count`, the one measured) and its peaks, the budget and the time it took
  (s)."""
  return {'sitting': 'gpu', 'tiny': tiny,
          'device': {'platform': facts['platform'], 'kind': facts['kind'],
                     'count': facts['count'], 'used': 1},
          'peaks_tflops': facts['peaks'], 'sizes': sizes._asdict(),
          'precisions': PRECISIONS, 'budget_s': budget_s, 'elapsed_s': elapsed_s,
          'not_measured': NOT_MEASURED, 'rows': rows}


def default_path(device_kind: str, tiny: bool) -> str:
  """benchmarks/gpu_sitting_<device kind>_<date>.json; a tiny run's in the temporary
  directory, away from the measured artifacts."""
  kind = re.sub(r'[^a-z0-9]+', '_', device_kind.lower()).strip('_') or 'unknown'
  date = datetime.datetime.now(datetime.timezone.utc).date()  # As the meta block's date.
  name = f'gpu_sitting_{"tiny_" if tiny else ""}{kind}_{date}.json'
  return os.path.join(tempfile.gettempdir() if tiny else artifacts.BENCHMARKS, name)


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog='python -m scripts.benchmark --sitting gpu',
                              description=__doc__.split('\n\n')[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--sitting', choices=['gpu'], default='gpu', help='the sitting to run')
  p.add_argument('--budget', type=float, default=480.0, metavar='S',
                 help='start no measurement that would end after S seconds (default 480)')
  p.add_argument('--tiny', action='store_true',
                 help='batch 8, network ((8, 4), (8, 4)), 1 determinant, 2 MCMC moves, 1 + 2 '
                 'steps, He: the path checked on a CPU')
  p.add_argument('--systems', nargs='*', choices=list(reference.SYSTEMS),
                 help=f'in priority order (default {" ".join(SYSTEMS)}; with --tiny, He)')
  p.add_argument('--optimizers', nargs='*', default=list(OPTIMIZERS),
                 choices=list(OPTIMIZERS), help='in priority order')
  p.add_argument('--precisions', nargs='*', default=list(PRECISIONS),
                 choices=list(PRECISIONS), help='in priority order (matrix products)')
  p.add_argument('--missing', action='store_true',
                 help='measure only what no earlier sitting of this device kind and these '
                 'sizes measured (in the artifacts of --json, or benchmarks/gpu_sitting_*.json)')
  p.add_argument('--json', help='the artifact to append the run to (default '
                 'benchmarks/gpu_sitting_<device kind>_<date>.json)')
  return p


def child(argv: list) -> None:
  """A child process's work (`_child`): `probe` (device_facts) or `measure SYSTEM OPTIMIZER
  PRECISION`, answered as JSON in the file after --answer."""
  p = argparse.ArgumentParser(prog='python -m scripts.sitting --child')
  p.add_argument('what', choices=['probe', 'measure'])
  p.add_argument('args', nargs='*')
  p.add_argument('--tiny', action='store_true')
  p.add_argument('--answer', required=True)
  a = p.parse_args(argv)
  try:
    facts = device_facts(a.tiny)
    if a.what == 'probe':
      answer = facts
    else:
      name, optimizer, precision = a.args
      answer = measure(name, optimizer, precision, TINY if a.tiny else STANDARD,
                       facts['peaks'])
  except Exception as e:  # noqa: BLE001  Unsupported products, out of memory, any other
    # failure of one variant: answered with its first line, and the sitting goes on.
    answer = {'error': f'{type(e).__name__}: {(str(e).strip().splitlines() or [""])[0]}'}
  with open(a.answer, 'w') as f:
    json.dump(answer, f)


def main(argv=None) -> Optional[str]:
  """Runs the sitting, appends it to its artifact and prints its table; returns the path
  (None in a child process, `child`)."""
  started = time.monotonic()
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv[:1] == ['--child']:
    return child(argv[1:])
  p = parser()
  args = p.parse_args(argv)
  facts = probe(args.tiny, min(300.0, args.budget))
  if facts['platform'] == 'cpu' and not args.tiny:
    p.error('no GPU here: the sitting measures a GPU (--tiny checks the path on a CPU)')
  sizes = TINY if args.tiny else STANDARD
  systems = args.systems or (['He'] if args.tiny else list(SYSTEMS))
  run_meta = artifacts.meta()
  before = frozenset()
  if args.missing:  # What earlier sittings alike measured (benchmark_tables.sitting_runs).
    like = {'device': {'kind': facts['kind']}, 'sizes': json.loads(json.dumps(
        sizes._asdict())), 'tiny': args.tiny}
    before = frozenset(key for key, (_, row) in tables.sitting_variants(
        tables.sitting_runs(args.json, like)).items() if row['status'] == 'measured')
  rows = sitting(systems, args.optimizers, args.precisions, args.tiny, args.budget, started,
                 measured_before=before)
  path = args.json or default_path(facts['kind'], args.tiny)
  artifacts.append(path, record(rows, sizes, facts, args.budget,
                                time.monotonic() - started, args.tiny), run_meta)
  print(tables.render_sitting(path))
  print(f'\nwritten to {path}')
  return path


if __name__ == '__main__':
  main()
