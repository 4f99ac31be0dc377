"""The step's arithmetic by stage, counted by XLA, in forward passes of the network, beside
the floor of each stage: where a step's work goes, independently of the machine's timing
noise.

  python scripts/step_cost.py --systems Ne C2H4 --networks small standard
  python scripts/step_cost.py --systems Ne --optimizers adam kfac --json out.json
  python scripts/step_cost.py --systems Ne C2H4 --networks small --ferminet /tmp/fn

For each system, network and optimizer, our step is built through the entry points' build
path (the comparison settings of scripts/ferminet_reference.py: batch 256, 10 MCMC moves)
on one CPU device, and each stage is compiled on its own and asked for XLA's count of
floating-point operations (`Compiled.cost_analysis()`):

  forward      log|psi| of every walker: the unit of cost
  MCMC         one Metropolis move (a proposal's forward pass and the accept step) times
               the moves per step (XLA counts a loop's body once, so one move is counted)
  energy       the local energies of every walker (kinetic energy through the Laplacian
               method, potential) with the clipped-energy bookkeeping
  gradient     energy + gradient, less energy: the VMC gradient (a forward and a backward
               pass of log|psi|, or KFAC's fused pass with its curvature statistics)
  optimizer    the update (matrix inversions in LAPACK calls are not counted by XLA)
  step         the whole compiled step (with one MCMC move, plus the other moves)

and, inside the energy, the part of the Laplacian that the determinants take: the Laplacian
(by the same method) of log|psi| less that of the network stopped at its orbitals (the sum
of the orbital matrices' entries: the same layers and envelopes, no determinant), both of
every walker. What is left after the orbitals (the determinants, their signed log-sum and a
Jastrow factor if any) is counted there.

The floors are those of a step that wastes nothing: one forward pass per MCMC move; 3N + 2
forward passes for the local energy of N electrons (the forward Laplacian carries the value,
3N first derivatives and the Laplacian through every dense layer); 3 for the gradient (a
forward and a backward pass); 1 to refresh log|psi| after the update. The energies are
evaluated all at once (`optim.energy_chunk_size=0`, same arithmetic as in chunks).

`--ferminet DIR` (DeepMind FermiNet from ../shared/anchors/setup-ferminet.sh DIR) also counts
FermiNet's step at the same settings, at its best (folx) on one device, through
scripts/ferminet_cost.py run in FermiNet's own environment: its forward pass, one MCMC move,
its update (local energy, gradient, KFAC's curvature and the update in one computation) and
the whole step, each in its own forward passes, beside ours. Results are appended to
benchmarks/step_cost.json and rendered into BENCHMARKS.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import artifacts  # noqa: E402
from ferminet_cost import flops  # noqa: E402
import ferminet_reference as reference  # noqa: E402

COST_JSON = os.path.join(REPO, 'benchmarks', 'step_cost.json')
STAGES = ('mcmc', 'energy', 'gradient', 'optimizer', 'refresh')


def floors(n_electrons: int, mcmc_steps: int) -> dict:
  """Each stage's floor in forward passes (module docstring)."""
  return {'mcmc': mcmc_steps, 'energy': 3 * n_electrons + 2, 'gradient': 3, 'optimizer': 0,
          'refresh': 1}


def _config(name: str, network: str, optimizer: str, batch: int, mcmc_steps: int):
  from ferminet_fast.run import cli
  keys = {**reference.OUR_KEYS.get(name, {}), **reference.SHARED, **reference.NETWORKS[network],
          'batch_size': str(batch), 'mcmc.steps': str(mcmc_steps),
          'optim.optimizer': optimizer, 'optim.energy_chunk_size': '0',
          'distributed.cpu_devices': '1', 'pretrain.iterations': '0'}
  return cli.resolve(['step_cost', '--config', os.path.join(REPO, reference.SYSTEMS[name][0]),
                      *[f'--config.{k}={v}' for k, v in keys.items()]])


def laplacian_after_orbitals(built, compiled) -> float:
  """Floating-point operations of the Laplacian (the step's method) of every walker's
  log|psi| less those of the network stopped at its orbitals (module docstring)."""
  import jax
  import jax.numpy as jnp
  from ferminet_fast.physics import hamiltonian

  laplacian = hamiltonian.LAPLACIANS[built.parts.laplacian]
  x = built.state.walkers.x.reshape(-1, 3 * built.system.n_electrons)

  def orbitals_summed(params, y):
    return sum(jnp.sum(block) for block in built.network.orbitals(params, y))

  def of_every_walker(f):
    return compiled(lambda p, y: jax.vmap(lambda z: laplacian(lambda w: f(p, w))(z)[0])(y),
                    built.state.params, x)

  return of_every_walker(built.network.log_psi) - of_every_walker(orbitals_summed)


# The determinants' count by (system, network, Laplacian, batch): it does not depend on the
# optimizer, so it is compiled once per process.
_DETERMINANTS: dict = {}


def count(name: str, network: str, optimizer: str, batch: int, mcmc_steps: int) -> dict:
  """Floating-point operations of each stage of our step for one system, network and
  optimizer, in forward passes, with the floors."""
  import jax
  from ferminet_fast.optimizers import optim
  from ferminet_fast.run import build

  # Built once with one MCMC move per step (XLA counts a loop's body once), and its
  # settings as they are otherwise.
  cfg = build.settings(_config(name, network, optimizer, batch, 1))
  built = build.build(cfg, jax.random.PRNGKey(0))
  parts, state = built.parts, built.state
  params, x = state.params, state.walkers.x

  def compiled(fn, *args):
    return flops(jax.jit(fn).lower(*args).compile())

  (_, aux), grads, curvature = jax.eval_shape(parts.energy_grad, params, x)
  forward = compiled(parts.batch_log_psi, params, x)
  one_move = compiled(lambda s: parts.mcmc_step(s)[0].walkers.x, state)
  energy = compiled(lambda p, y: parts.energy(p, y)[0], params, x)
  energy_grad = compiled(parts.energy_grad, params, x)
  samples = optim.Samples(x, state.key, aux.centred, curvature)
  update = compiled(parts.update, params, state.opt_state, grads, samples)
  step = compiled(parts.train_step, state)
  n = built.system.n_electrons
  key = (name, network, parts.laplacian, batch)
  if key not in _DETERMINANTS:
    _DETERMINANTS[key] = laplacian_after_orbitals(built, compiled)
  stages = {'mcmc': mcmc_steps * one_move, 'energy': energy, 'gradient': energy_grad - energy,
            'optimizer': update, 'refresh': forward}
  return {'system': name, 'electrons': n, 'network': network, 'optimizer': optimizer,
          'batch': batch, 'mcmc_steps': mcmc_steps, 'laplacian': parts.laplacian,
          'forward_flops': forward, 'stage_flops': stages,
          'after_orbitals_flops': _DETERMINANTS[key],
          'step_flops': step + (mcmc_steps - 1) * one_move,
          'floors': floors(n, mcmc_steps)}


def ferminet_count(fn_dir: str, name: str, network: str, optimizer: str, batch: int,
                   mcmc_steps: int) -> dict:
  """DeepMind FermiNet's step at the same settings (at its best: folx, one device), counted
  by XLA through scripts/ferminet_cost.py in FermiNet's own environment: its forward pass,
  one MCMC move (its MCMC call less the forward pass it starts with, over the passes of the
  loop that XLA counts), its update (energy, gradient, KFAC's curvature and the update) and
  the step: update + the forward pass + `mcmc_steps` moves. GFLOP per device of one."""
  keys = {**reference.NETWORKS[network], 'batch_size': str(batch),
          'mcmc.steps': str(mcmc_steps), 'optim.optimizer': optimizer,
          'optim.iterations': '1', 'pretrain.iterations': '0', 'mcmc.burn_in': '0'}
  with tempfile.TemporaryDirectory() as tmp:
    cmd = reference.command(fn_dir, name, os.path.join(tmp, 'run'), keys, 'best')
    cmd = [os.path.join(fn_dir, 'venv', 'bin', 'python'), os.path.join(HERE, 'ferminet_cost.py'),
           *cmd[1:]]
    env = {**reference.peer_env('best', batch=batch), 'JAX_PLATFORMS': 'cpu'}
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
  if proc.returncode:
    raise RuntimeError(f'FermiNet\'s count failed ({name}, {network}, {optimizer}):\n'
                       + proc.stderr[-3000:])
  counts, passes = {}, None
  for line in proc.stdout.splitlines():
    kind, _, body = line.partition(' ')
    if kind == 'FERMINET_COST':
      d = json.loads(body)
      counts.setdefault(d['name'], d['flops'])  # A name's first computation: the training's.
    elif kind == 'FERMINET_LOOP':
      passes = json.loads(body)['counted']
  forward, mcmc = counts['forward'], counts['mcmc']
  counted = 1 if passes == 1 else mcmc_steps  # Passes of the MCMC loop in XLA's count.
  move = (mcmc - forward) / counted
  update = counts['_step'] if optimizer == 'kfac' else counts['step'] - mcmc
  return {'forward_flops': forward, 'move_flops': move, 'update_flops': update,
          'loop_passes_counted': passes, 'step_flops': update + forward + mcmc_steps * move}


def render_against_ferminet(path: str = COST_JSON) -> str:
  """The newest count of ours beside FermiNet's, per system, network and optimizer."""
  newest = {}
  for run in artifacts.read(path):
    for r in run.data['rows']:
      if r.get('ferminet'):
        newest[(r['system'], r['network'], r['optimizer'])] = (run, r)
  if not newest:
    return 'Not counted yet: python scripts/step_cost.py --ferminet DIR'
  lines = ['| system (N) | network | optimizer | GFLOP per forward, ours / FermiNet | MCMC move | '
           'energy, gradient and update | step | step (GFLOP) | ours / FermiNet, arithmetic |',
           '|' + '---|' * 9]
  for run, r in newest.values():
    fn, f = r['ferminet'], r['forward_flops']
    g = fn['forward_flops']
    ours_update = sum(r['stage_flops'][k] for k in ('energy', 'gradient', 'optimizer'))
    ours_move = r['stage_flops']['mcmc'] / r['mcmc_steps']
    pair = lambda a, b: f'{a:.1f} / {b:.1f}'  # noqa: E731
    lines.append(
        f'| {r["system"]} ({r["electrons"]}) | {r["network"]} | {r["optimizer"]} | '
        f'{f / 1e9:.3f} / {g / 1e9:.3f} | {pair(ours_move / f, fn["move_flops"] / g)} | '
        f'{pair(ours_update / f, fn["update_flops"] / g)} | '
        f'{pair(r["step_flops"] / f, fn["step_flops"] / g)} | '
        f'{r["step_flops"] / 1e9:.1f} / {fn["step_flops"] / 1e9:.1f} | '
        f'**{r["step_flops"] / fn["step_flops"]:.2f}** |')
  return '\n'.join(lines + ['', 'Each code\'s stages in its own forward passes (ours / '
                            'FermiNet\'s), batch 256, one CPU device, 10 MCMC moves, FermiNet at '
                            'its best settings (folx), counted by XLA; inversions in LAPACK calls '
                            'are counted by neither. '
                            + artifacts.provenance(path, [run for run, _ in newest.values()])])


def render(path: str = COST_JSON) -> str:
  """The newest count of each system, network and optimizer, in forward passes."""
  runs = artifacts.read(path)
  if not runs:
    return artifacts.provenance(path)
  newest = {}
  for run in runs:
    for r in run.data['rows']:
      newest[(r['system'], r['network'], r['optimizer'])] = (run, r)
  lines = ['| system (N) | network | optimizer | Laplacian | GFLOP per forward | MCMC | energy | '
           'of which determinants | gradient | optimizer | refresh | step | floor | step / floor |',
           '|' + '---|' * 14]
  for run, r in newest.values():
    f, fl = r['forward_flops'], r['floors']
    cells = [f'{r["stage_flops"][k] / f:.1f} ({fl[k]})' for k in STAGES]
    det = r.get('after_orbitals_flops')  # Absent from rows counted before it was.
    cells.insert(STAGES.index('energy') + 1, '–' if det is None else f'{det / f:.1f}')
    floor = sum(fl.values())
    lines.append(f'| {r["system"]} ({r["electrons"]}) | {r["network"]} | {r["optimizer"]} | '
                 f'{r["laplacian"]} | {f / 1e9:.3f} | ' + ' | '.join(cells)
                 + f' | {r["step_flops"] / f:.1f} | {floor} | {r["step_flops"] / f / floor:.2f} |')
  return '\n'.join(lines + ['', 'Each stage in forward passes of the network (its floor in '
                            'brackets), batch 256, counted by XLA; "of which determinants": '
                            'the Laplacian after the orbitals (– where not counted). '
                            + artifacts.provenance(path, [run for run, _ in newest.values()])])


TABLES = {'step-cost-flops': ('BENCHMARKS.md', render),
          'step-cost-against-ferminet': ('BENCHMARKS.md', render_against_ferminet)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--systems', nargs='*', default=['Ne', 'C2H4'],
                      choices=list(reference.SYSTEMS))
  parser.add_argument('--networks', nargs='*', default=['small', 'standard'],
                      choices=list(reference.NETWORKS))
  parser.add_argument('--optimizers', nargs='*', default=['adam', 'kfac'])
  parser.add_argument('--batch', type=int, default=int(reference.SHARED['batch_size']))
  parser.add_argument('--mcmc-steps', type=int, default=int(reference.SHARED['mcmc.steps']))
  parser.add_argument('--json', default=COST_JSON)
  parser.add_argument('--ferminet', metavar='DIR',
                      help='also count DeepMind FermiNet\'s step (../shared/anchors/'
                      'setup-ferminet.sh DIR) at the same settings')
  args = parser.parse_args()
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  rows = []
  for name in args.systems:
    for network in args.networks:
      for optimizer in args.optimizers:
        r = count(name, network, optimizer, args.batch, args.mcmc_steps)
        if args.ferminet:
          r['ferminet'] = ferminet_count(args.ferminet, name, network, optimizer, args.batch,
                                         args.mcmc_steps)
        rows.append(r)
        f = r['forward_flops']
        print(f'{name} {network} {optimizer}: forward {f / 1e9:.3f} GFLOP; '
              + ', '.join(f'{k} {v / f:.1f}' for k, v in r['stage_flops'].items())
              + f'; of the energy, determinants {r["after_orbitals_flops"] / f:.1f}'
              + f'; step {r["step_flops"] / f:.1f} forward passes', flush=True)
  peer = reference.peer_versions(args.ferminet) if args.ferminet else None
  artifacts.append(args.json, {'rows': rows}, artifacts.meta(peer))
  print(render(args.json))
  if args.ferminet:
    print(render_against_ferminet(args.json))


if __name__ == '__main__':
  main()
