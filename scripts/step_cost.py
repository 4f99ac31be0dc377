"""The step's arithmetic by stage, counted by XLA, in forward passes of the network, beside
the floor of each stage: where a step's work goes, independently of the machine's timing
noise.

  python -m scripts.step_cost --systems Ne C2H4 --networks small standard
  python -m scripts.step_cost --systems Ne --optimizers adam kfac --json out.json
  python -m scripts.step_cost --systems Ne --networks small --set network.network_type=lapnet
  python -m scripts.step_cost --systems Ne C2H4 --networks standard --ferminet /tmp/fn

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
evaluated all at once (`optim.energy_chunk_size=0`, same arithmetic as in chunks). Results
are appended to benchmarks/step_cost.json and rendered into BENCHMARKS.md.

With --ferminet DIR (DeepMind FermiNet from `bash ../shared/anchors/setup-ferminet.sh DIR`),
both codes' KFAC steps are counted in one run, each at the comparison settings (FermiNet at
its best: its folx Laplacian), ours as above and FermiNet's by
scripts/ferminet_step_cost_probe.py in its own environment; the stages side by side in
GFLOP are appended to benchmarks/step_cost_against_ferminet.json.
"""

import argparse
import os

from scripts import artifacts
from scripts import ferminet_reference as reference

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

COST_JSON = os.path.join(REPO, 'benchmarks', 'step_cost.json')
AGAINST_JSON = os.path.join(REPO, 'benchmarks', 'step_cost_against_ferminet.json')
PROBE = os.path.join(HERE, 'ferminet_step_cost_probe.py')
STAGES = ('mcmc', 'energy', 'gradient', 'optimizer', 'refresh')


def floors(n_electrons: int, mcmc_steps: int) -> dict:
  """Each stage's floor in forward passes (module docstring)."""
  return {'mcmc': mcmc_steps, 'energy': 3 * n_electrons + 2, 'gradient': 3, 'optimizer': 0,
          'refresh': 1}


def flops(compiled) -> float:
  """XLA's count of floating-point operations of a compiled function."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost['flops'])


def _config(name: str, network: str, optimizer: str, batch: int, mcmc_steps: int,
            extra=None):
  from ferminet_fast.runtime import cli
  keys = {**reference.OUR_KEYS.get(name, {}), **reference.SHARED, **reference.NETWORKS[network],
          'batch_size': str(batch), 'mcmc.steps': str(mcmc_steps),
          'optim.optimizer': optimizer, 'optim.energy_chunk_size': '0',
          'distributed.cpu_devices': '1', 'pretrain.iterations': '0', **(extra or {})}
  return cli.resolve(['step_cost', '--config', os.path.join(REPO, reference.SYSTEMS[name][0]),
                      *[f'--config.{k}={v}' for k, v in keys.items()]])


def laplacian_after_orbitals(built, compiled) -> float:
  """Floating-point operations of the Laplacian (the step's method) of every walker's
  log|psi| less those of the network stopped at its orbitals (module docstring)."""
  import jax
  import jax.numpy as jnp

  laplacian = built.parts.laplacian
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


def count(name: str, network: str, optimizer: str, batch: int, mcmc_steps: int,
          extra=None) -> dict:
  """Floating-point operations of each stage of our step for one system, network and
  optimizer, in forward passes, with the floors; `extra`: further settings of ours
  ({key: value}, e.g. another network type at the widths of `network`)."""
  import jax
  from ferminet_fast.optimizers import optim
  from ferminet_fast import plan

  # Built once with one MCMC move per step (XLA counts a loop's body once), and its
  # settings as they are otherwise.
  extra = extra or {}
  cfg = plan.settings(_config(name, network, optimizer, batch, 1, extra))
  built = plan.build(cfg, jax.random.PRNGKey(0))
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
  key = (name, network, parts.laplacian.name, batch, tuple(sorted(extra.items())))
  if key not in _DETERMINANTS:
    _DETERMINANTS[key] = laplacian_after_orbitals(built, compiled)
  stages = {'mcmc': mcmc_steps * one_move, 'energy': energy, 'gradient': energy_grad - energy,
            'optimizer': update, 'refresh': forward}
  return {'system': name, 'electrons': n, 'network': network, 'optimizer': optimizer,
          'batch': batch, 'mcmc_steps': mcmc_steps, 'laplacian': parts.laplacian.name,
          'forward_flops': forward, 'stage_flops': stages,
          'after_orbitals_flops': _DETERMINANTS[key],
          'step_flops': step + (mcmc_steps - 1) * one_move,
          'floors': floors(n, mcmc_steps), 'set': extra}


def _newest(path: str, key) -> dict:
  """{key(row): (run, row)}: the newest row of each key in the artifact at `path`."""
  return {key(r): (run, r) for run in artifacts.read(path) for r in run.data['rows']}


def render(path: str = COST_JSON) -> str:
  """The newest count of each system, network and optimizer, in forward passes."""
  newest = _newest(path, lambda r: (r['system'], r['network'], r['optimizer'],
                                     tuple(sorted(r.get('set', {}).items()))))
  if not newest:
    return artifacts.provenance(path)
  lines = ['| system (N) | network | optimizer | Laplacian | GFLOP per forward | MCMC | energy | '
           'of which determinants | gradient | optimizer | refresh | step | floor | step / floor |',
           '|' + '---|' * 14]
  for run, r in newest.values():
    f, fl = r['forward_flops'], r['floors']
    cells = [f'{r["stage_flops"][k] / f:.1f} ({fl[k]})' for k in STAGES]
    det = r.get('after_orbitals_flops')  # Absent from rows counted before it was.
    cells.insert(STAGES.index('energy') + 1, '–' if det is None else f'{det / f:.1f}')
    floor = sum(fl.values())
    network = ', '.join([r['network']] + [f'{k}={v}' for k, v in r.get('set', {}).items()])
    lines.append(f'| {r["system"]} ({r["electrons"]}) | {network} | {r["optimizer"]} | '
                 f'{r["laplacian"]} | {f / 1e9:.3f} | ' + ' | '.join(cells)
                 + f' | {r["step_flops"] / f:.1f} | {floor} | {r["step_flops"] / f / floor:.2f} |')
  return '\n'.join(lines + ['', 'Each stage in forward passes of the network (its floor in '
                            'brackets), batch 256, counted by XLA; "of which determinants": '
                            'the Laplacian after the orbitals (– where not counted). '
                            + artifacts.provenance(path, [run for run, _ in newest.values()])])


class ProbeFailed(RuntimeError):
  """FermiNet's count of one system and network did not come back."""


def ferminet_count(fn_dir: str, name: str, network: str, mcmc_steps: int) -> dict:
  """FermiNet's KFAC step for one system and network, at the comparison settings and its
  best ones, counted by the probe in its environment: GFLOP of each stage as in
  `comparable`."""
  import json
  import subprocess
  import tempfile
  argv = reference.command(fn_dir, name, '-', {**reference.NETWORKS[network],
                                               'optim.optimizer': 'kfac',
                                               'mcmc.steps': '1'}, 'best')[1:-1]
  with tempfile.TemporaryDirectory() as work:
    out = os.path.join(work, 'count.json')
    done = subprocess.run([os.path.join(fn_dir, 'venv', 'bin', 'python'), PROBE, out, *argv],
                          env=reference.peer_env('best'), capture_output=True, text=True,
                          timeout=3600)
    if done.returncode:
      raise ProbeFailed(f'FermiNet\'s count of {name} ({network}) failed:\n'
                        f'{done.stderr[-3000:]}')
    with open(out) as f:
      probe = json.load(f)
  c = probe['flops']
  # KFAC's step is the last function FermiNet maps for the first time, over every walker.
  if probe['optimizer_name'] != '_step' or probe['walkers'] != int(reference.SHARED['batch_size']):
    raise ProbeFailed(f"FermiNet's count of {name} ({network}) caught "
                      f"{probe['optimizer_name']} over {probe['walkers']} walkers, not KFAC's "
                      'step over the batch')
  move = c['mcmc_call'] - c['forward']  # Its MCMC step starts with one log|psi|.
  return {'forward': c['forward'], 'mcmc': mcmc_steps * move, 'energy': c['energy'],
          'gradient, curvature and update': c['optimizer'] - c['energy'],
          'refresh': c['forward']}


def comparable(r: dict) -> dict:
  """Our count `r` (of `count`) in the stages of `ferminet_count`, flops."""
  s = r['stage_flops']
  return {'forward': r['forward_flops'], 'mcmc': s['mcmc'], 'energy': s['energy'],
          'gradient, curvature and update': s['gradient'] + s['optimizer'],
          'refresh': s['refresh']}


COMPARED = ('mcmc', 'energy', 'gradient, curvature and update', 'refresh')


def render_against(path: str = AGAINST_JSON) -> str:
  """Both codes' KFAC steps, stage by stage, in GFLOP: the newest count of each system and
  network."""
  newest = _newest(path, lambda r: (r['system'], r['network']))
  if not newest:
    return ('*Not yet counted: `python -m scripts.step_cost --ferminet DIR` counts both '
            'codes\' steps.*')
  lines = ['| system (N) | network | our Laplacian | GFLOP per forward, ours / FermiNet | '
           + ' | '.join(COMPARED) + ' | step | ours / FermiNet |', '|' + '---|' * 10]
  for run, r in newest.values():
    o, f = r['ours'], r['ferminet']
    g = lambda x: f'{x / 1e9:.3g}'  # noqa: E731  GFLOP to three digits.
    cells = [f'{g(o[k])} / {g(f[k])}' for k in COMPARED]
    so, sf = sum(o[k] for k in COMPARED), sum(f[k] for k in COMPARED)
    lines.append(f'| {r["system"]} ({r["electrons"]}) | {r["network"]} | {r["laplacian"]} | '
                 f'{g(o["forward"])} / {g(f["forward"])} | ' + ' | '.join(cells)
                 + f' | {g(so)} / {g(sf)} | {so / sf:.2f} |')
  moves = sorted({r.get('mcmc_steps', 10) for _, r in newest.values()})
  return '\n'.join(lines + ['', 'Each stage of the KFAC step in GFLOP, ours / DeepMind '
                            'FermiNet at its best settings (its folx Laplacian), batch 256, '
                            f'{"/".join(map(str, moves))} MCMC moves, counted by XLA '
                            '(LAPACK\'s inversions uncounted in both); FermiNet\'s refresh is '
                            'the log|ψ| its MCMC step computes first. '
                            + artifacts.provenance(path, [run for run, _ in newest.values()])])


def against_ferminet(fn_dir: str, systems: list, networks: list, batch: int,
                     mcmc_steps: int, path: str) -> None:
  """Both codes' KFAC steps counted in one run, appended to `path` with FermiNet's
  versions. A system whose FermiNet count fails is reported at the end; the rows counted
  are kept."""
  if batch != int(reference.SHARED['batch_size']):
    raise SystemExit('--ferminet counts at the comparison batch only')
  rows, failed = [], []
  for name in systems:
    for network in networks:
      ours = count(name, network, 'kfac', batch, mcmc_steps)
      try:
        theirs = ferminet_count(fn_dir, name, network, mcmc_steps)
      except ProbeFailed as e:
        print(e, flush=True)
        failed.append(f'{name} ({network})')
        continue
      rows.append({'system': name, 'network': network, 'electrons': ours['electrons'],
                   'laplacian': ours['laplacian'], 'mcmc_steps': mcmc_steps,
                   'ours': comparable(ours), 'ferminet': theirs})
      print(f'{name} {network}: step ours {sum(comparable(ours)[k] for k in COMPARED) / 1e9:.1f}'
            f', FermiNet {sum(theirs[k] for k in COMPARED) / 1e9:.1f} GFLOP', flush=True)
  if rows:
    peer = {**reference.peer_versions(fn_dir),
            'settings': reference.peer_settings_record('best')}
    artifacts.append(path, {'rows': rows}, artifacts.meta(peer=peer))
    print(render_against(path))
  if failed:
    raise SystemExit(f'FermiNet\'s count failed for {", ".join(failed)}; '
                     f'{len(rows)} counted and kept')


TABLES = {'step-cost-flops': ('BENCHMARKS.md', render),
          'step-cost-against-ferminet': ('BENCHMARKS.md', render_against)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--systems', nargs='*', default=['Ne', 'C2H4'],
                      choices=list(reference.SYSTEMS))
  parser.add_argument('--networks', nargs='*', default=['small', 'standard'],
                      choices=list(reference.NETWORKS))
  parser.add_argument('--optimizers', nargs='*', default=['adam', 'kfac'])
  parser.add_argument('--batch', type=int, default=int(reference.SHARED['batch_size']))
  parser.add_argument('--mcmc-steps', type=int, default=int(reference.SHARED['mcmc.steps']))
  parser.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE',
                      help='further settings of ours (e.g. network.network_type=lapnet)')
  parser.add_argument('--ferminet', metavar='DIR',
                      help="count FermiNet's KFAC step beside ours (its anchor's directory)")
  parser.add_argument('--json', default=None,
                      help='artifact (default: benchmarks/step_cost.json, or '
                           'step_cost_against_ferminet.json with --ferminet)')
  args = parser.parse_args()
  bad = [kv for kv in args.set if '=' not in kv or kv.startswith('=')]
  if bad:
    parser.error(f'--set {" ".join(bad)}: give KEY=VALUE (a config key of ours)')
  extra = dict(kv.split('=', 1) for kv in args.set)
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  if args.ferminet:
    if extra:
      parser.error('--ferminet counts the comparison settings: give no --set')
    against_ferminet(args.ferminet, args.systems, args.networks, args.batch, args.mcmc_steps,
                     args.json or AGAINST_JSON)
    return
  args.json = args.json or COST_JSON
  rows = []
  for name in args.systems:
    for network in args.networks:
      for optimizer in args.optimizers:
        r = count(name, network, optimizer, args.batch, args.mcmc_steps, extra)
        rows.append(r)
        f = r['forward_flops']
        print(f'{name} {network} {optimizer}: forward {f / 1e9:.3f} GFLOP; '
              + ', '.join(f'{k} {v / f:.1f}' for k, v in r['stage_flops'].items())
              + f'; of the energy, determinants {r["after_orbitals_flops"] / f:.1f}'
              + f'; step {r["step_flops"] / f:.1f} forward passes', flush=True)
  artifacts.append(args.json, {'rows': rows})
  print(render(args.json))


if __name__ == '__main__':
  main()
