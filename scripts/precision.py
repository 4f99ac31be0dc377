"""How far float32 arithmetic moves the local energy: the same parameters and walkers
evaluated in float64 and in float32, the float32 matrix products at the device's default
precision (on NVIDIA GPUs since Ampere, JAX multiplies float32 matrices in TF32, about
three decimal digits, unless told otherwise) and at 'highest' (true float32).

  python -m scripts.precision --system Ne --networks small standard --walkers 1024
  python -m scripts.precision --run-dir RUN     # a trained run's parameters and walkers

Reported per network and precision, against float64 in mHa: the mean difference of the
local energies (a bias of the energy estimate), its standard error, and the median, 90th
percentile and largest difference per walker; beside them the spread of the local energies
themselves (the statistical noise a bias competes with). Appended to an artifact
(scripts/artifacts.py; default benchmarks/precision.json) with the machine and devices.
"""

import argparse
import ast
import os

import numpy as np

from scripts import artifacts
from scripts import ferminet_reference as reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRECISION_JSON = os.path.join(REPO, 'benchmarks', 'precision.json')
MATMUL = ('default', 'highest')  # float32 matrix-product precisions compared with float64.


def _config(args, network: str):
  from ferminet_fast import config
  from ferminet_fast.runtime import cli
  cfg = config.default()
  cfg.system.atom = args.system
  cli.set_values(cfg, {k: ast.literal_eval(v) for k, v in reference.NETWORKS[network].items()})
  cfg.batch_size = args.walkers
  cfg.precision = 'float64'
  return cfg


def differences(e32: np.ndarray, e64: np.ndarray) -> dict:
  """Statistics of float32 local energies `e32` against float64 ones `e64` (B,) Ha, in
  mHa, over walkers where both are finite."""
  ok = np.isfinite(e32) & np.isfinite(e64)
  d = 1e3 * (e32[ok] - e64[ok])
  return {'walkers': int(ok.sum()), 'nonfinite': int((~ok).sum()),
          'bias_mha': float(d.mean()), 'bias_se_mha': float(d.std(ddof=1) / np.sqrt(d.size)),
          'median_abs_mha': float(np.median(np.abs(d))),
          'p90_abs_mha': float(np.percentile(np.abs(d), 90)),
          'max_abs_mha': float(np.abs(d).max()),
          'local_energy_std_mha': float(1e3 * e64[ok].std(ddof=1)),
          'energy_se_mha': float(1e3 * e64[ok].std(ddof=1) / np.sqrt(d.size))}


def measure(cfg, burn_in: int, run_dir=None) -> dict:
  """Local energies of one batch in float64 and float32 (both matrix precisions): the
  parameters and walkers of `run_dir`'s newest checkpoint, else fresh parameters and
  walkers after `burn_in` MCMC sweeps."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast import plan
  from ferminet_fast.runtime import checkpoint
  key = jax.random.PRNGKey(0)
  built = plan.build(cfg, key, time_auto=False)
  state = built.state
  trained_steps = 0
  if run_dir:
    trained_steps, state = checkpoint.restore_latest(run_dir, state)
  mcmc_step = jax.jit(built.parts.mcmc_step)
  for _ in range(0 if run_dir else burn_in):
    state, _ = mcmc_step(state)
  e64 = jax.jit(built.parts.energy)(state.params, state.walkers.x)[1].local_energy
  network32 = plan.network_of(cfg.network, built.system, jnp.float32)
  parts32 = plan.make_parts(cfg, built.system, network32, built.parts.laplacian,
                             built.parts.chunk_size)
  cast = lambda t: jax.tree_util.tree_map(
      lambda a: a.astype(jnp.float32) if jnp.issubdtype(a.dtype, jnp.floating) else a, t)
  params32, x32 = cast(state.params), cast(state.walkers.x)
  out = {'laplacian': built.parts.laplacian.name, 'energy_float64_ha': float(jnp.nanmean(e64)),
         'trained_steps': int(trained_steps),
         'hidden_dims': [list(h) for h in cfg.network.ferminet.hidden_dims],
         'determinants': cfg.network.determinants}
  for matmul in MATMUL:
    with jax.default_matmul_precision(matmul):  # Over the global setting of the plan.
      e32 = jax.jit(parts32.energy)(params32, x32)[1].local_energy
    out[matmul] = differences(np.asarray(e32, np.float64), np.asarray(e64, np.float64))
  return out


def _signed(x: float) -> str:
  text = f'{x:+.3f}'
  return f'{0.0:+.3f}' if float(text) == 0 else text


def render(path: str = PRECISION_JSON) -> str:
  """The table of every run in the artifact: float32 against float64 per network and
  matrix precision, on the run's device."""
  lines = ['| device | system, network (walkers) | float32 matrix products | mean difference '
           '(mHa) | abs. difference median / p90 / max (mHa) | local-energy spread (mHa) |',
           '|' + '---|' * 6]
  runs = artifacts.read(path)
  for run in runs:
    m = run.meta.get('machine') or {}
    device = ', '.join(m.get('gpus') or []) or f'{m.get("cpu", "?")} (CPU)'
    for r in run.data['rows']:
      for matmul in MATMUL:
        d = r[matmul]
        lines.append(
            f'| {device} | {r["system"]}, {r["network"]} ({d["walkers"]}) | {matmul} | '
            f'{_signed(d["bias_mha"])} ± {d["bias_se_mha"]:.3f} | {d["median_abs_mha"]:.3f} / '
            f'{d["p90_abs_mha"]:.3f} / {d["max_abs_mha"]:.3f} | '
            f'{d["local_energy_std_mha"]:.0f} |')
  return '\n'.join(lines + ['', artifacts.provenance(path, runs)])


TABLES = {'precision-float32': ('BENCHMARKS.md', render)}  # For scripts/render_docs.py.


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--system', default='Ne', help='atom symbol')
  parser.add_argument('--networks', nargs='*', default=['small', 'standard'],
                      choices=list(reference.NETWORKS))
  parser.add_argument('--walkers', type=int, default=1024)
  parser.add_argument('--burn-in', type=int, default=50, help='MCMC sweeps before measuring')
  parser.add_argument('--run-dir', help="a trained run: its settings, parameters, walkers")
  parser.add_argument('--json', default=PRECISION_JSON, help='artifact to append to')
  args = parser.parse_args()

  import jax
  jax.config.update('jax_enable_x64', True)
  from ferminet_fast.runtime import rundir
  run_meta = artifacts.meta(devices=[str(d) for d in jax.devices()])
  rows = []
  if args.run_dir:
    cfg = rundir.read_config(args.run_dir)
    cfg.precision = 'float64'
    runs = [('run ' + os.path.basename(os.path.normpath(args.run_dir)), cfg)]
  else:
    runs = [(n, _config(args, n)) for n in args.networks]
  for label, cfg in runs:
    r = measure(cfg, args.burn_in, args.run_dir)
    rows.append({'system': cfg.system.atom, 'network': label, 'walkers': cfg.batch_size, **r})
    for matmul in MATMUL:
      d = r[matmul]
      print(f'{label} float32 ({matmul}) - float64: mean difference {d["bias_mha"]:+.3f} +- '
            f'{d["bias_se_mha"]:.3f} mHa, |diff| median {d["median_abs_mha"]:.3f}, p90 '
            f'{d["p90_abs_mha"]:.3f}, max {d["max_abs_mha"]:.3f} mHa; local-energy std '
            f'{d["local_energy_std_mha"]:.0f} mHa', flush=True)
  artifacts.append(args.json, {'rows': rows, 'burn_in': args.burn_in}, run_meta)


if __name__ == '__main__':
  main()
