"""Excited-states table: trains and evaluates the several-state configs (NES-VMC) and renders
ACCURACY.md's excited-states tables from the artifact it writes (scripts/render_docs.py).

  python -m scripts.accuracy_states                 # every row -> benchmarks/accuracy_states.json
  python -m scripts.accuracy_states --rows he h2    # a subset (a run of its own in the artifact)
  python -m scripts.accuracy_states --at-once       # the rows side by side (e.g. on one GPU)

Each row is two fresh processes, as a user runs them:
  python -m ferminet_fast.train --config configs/<system>_states.py [settings] --config.log.save_path=DIR
  python -m ferminet_fast.evaluate --run DIR [--steps S]
Recorded per row: what evaluate writes for the states (eval.json's `states`: the energies,
<S^2>, excitation energies and oscillator strengths from the ground state, with jackknife
errors), the wall time of both processes and the machine. The references are published
values (cited below) or closed forms computed here; the table takes each row's latest
measurement. With --at-once the rows run side by side, each its own pair of processes (small
networks leave a GPU mostly idle alone); the wall times are then those of a shared machine,
and each row records how many ran at once.
"""

import argparse
import os

from scripts import accuracy
from scripts import artifacts
from scripts.artifacts import num, pm, signed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

JSON = os.path.join(REPO, 'benchmarks', 'accuracy_states.json')

# Atomic units of the Li 2p-lifetime reference (CODATA 2018).
C_AU = 137.035999084  # speed of light
SECOND_AU = 1.0 / 2.4188843265857e-17  # atomic units of time per second
CM1_PER_HA = 219474.6313632  # wavenumber of one hartree (cm^-1)


def hydrogen_lyman_alpha() -> float:
  """f(1s -> 2p) of hydrogen, summed over the 2p components: 2^13 / 3^9 (closed form from
  |<1s|z|2p_0>|^2 = 2^15 / 3^10 bohr^2 and the excitation 3/8 Ha; Bethe & Salpeter, Quantum
  Mechanics of One- and Two-Electron Atoms (1957), 0.4162)."""
  return 2.0 ** 13 / 3.0 ** 9


def lithium_2s_2p() -> float:
  """f(2s -> 2p) of Li summed over the 2p multiplet, from the measured 2p lifetime
  tau = 27.102 ns (McAlexander, Abraham and Hulet, Phys. Rev. A 54, R5 (1996)) and the 2s-2p
  interval 14903.9 cm^-1 (NIST ASD): f = (g_2p / g_2s) c^3 / (2 tau dE^2) in atomic units."""
  tau, de = 27.102e-9 * SECOND_AU, 14903.9 / CM1_PER_HA
  return 6.0 / 2.0 * C_AU ** 3 / (2.0 * tau * de * de)


# Published non-relativistic energies (Ha). He: G. W. F. Drake, Springer Handbook of Atomic,
# Molecular, and Optical Physics (2006), ch. 11. Li: Chakravorty et al., Phys. Rev. A 47,
# 3649 (1993). H2 at R = 1.4 bohr (Born-Oppenheimer): W. Kolos and L. Wolniewicz, J. Chem.
# Phys. 43, 2429 (1965).
HE = [('1¹S', -2.903724377), ('2³S (M_s = 0)', -2.175229378), ('2¹S', -2.145974046),
      ('2³P (M_s = 0, one M_L)', -2.133164191)]
LI_2S, LI_2P = ('2²S', -7.47806032), ('2²P', -7.41015653)
H2 = [('X ¹Σg⁺', -1.174475), ('b ³Σu⁺ (M_s = 0)', -0.78418)]

# name: (label, config, training settings, evaluation arguments, [(state, reference Ha)],
#        goal as (what, mHa) with what 'energy' (every state) or 'excitation' (every
#        excitation energy from state 0) or None, summed oscillator strength reference or
#        None and its source).
ROWS = {
    'he': ('He, 4 states', 'configs/he_states.py', [], [], HE, ('energy', 2.0), None),
    'h': ('H, 5 states: 1s and n = 2', 'configs/h_states.py', ['--config.optim.iterations=20000'],
          ['--steps=4000'], [('1s', -0.5)] + [('n = 2', -0.125)] * 4, None,
          (hydrogen_lyman_alpha(), 'Lyman α, 2¹³/3⁹')),
    'li': ('Li, 2 states', 'configs/li_states.py', [], [], [LI_2S, LI_2P],
           ('excitation', 2.0), None),
    'li4': ('Li, 4 states: 2²S and the three 2²P', 'configs/li_states.py',
            ['--config.system.states=4'], [], [LI_2S] + [LI_2P] * 3, None,
            (lithium_2s_2p(), 'measured 2p lifetime')),
    'h2': ('H2 at R = 1.4 bohr, 2 states', 'configs/h2_states.py', [], [], H2,
           ('excitation', 3.0), None),
}


def run_row(name: str, runs_dir: str, overrides: list) -> dict:
  label, config, settings, eval_args, refs, goal, f_ref = ROWS[name]
  ev, cfg, timings, train_s, eval_s = accuracy.train_and_evaluate(
      accuracy.new_run_dir(runs_dir, name), config, settings + overrides, eval_args)
  return {'row': name, 'system': label, 'config': config, 'settings': settings + overrides,
          'evaluate': eval_args, 'iterations': ev['checkpoint_step'], 'sweeps': ev['steps'],
          'optimizer': cfg['optim']['optimizer'], 'states': ev['states'],
          'references': [list(r) for r in refs], 'goal': list(goal) if goal else None,
          'f_sum_reference': list(f_ref) if f_ref else None, 'train_s': train_s,
          'eval_s': eval_s, 'machine': timings['machine'], 'versions': timings['versions']}


def verdict(errors_mha: list, goal: float) -> str:
  return '**met**' if all(abs(e) <= goal for e in errors_mha) else '**missed**'


def state_lines(r: dict) -> list:
  """Rows of the per-state table for one measurement."""
  s, refs = r['states'], r['references']
  e0_ref = refs[0][1]
  out = []
  for i, (state, ref) in enumerate(refs):
    e, de = s['energy']['value'][i], s['energy']['error'][i]
    s2 = pm(s['s2']['value'][i], s['s2']['error'][i], 3)
    if i:
      x, dx = s['excitation_energy']['value'][i - 1], s['excitation_energy']['error'][i - 1]
      exc = (f'{num(ref - e0_ref)}; {pm(x, dx)} ({signed(1e3 * (x - ref + e0_ref), 1e3 * dx)} '
             'mHa)')
    else:
      exc = '–'
    out.append(f'| {r["system"] if i == 0 else ""} | {state} | {num(ref)} | {pm(e, de)} | '
               f'{signed(1e3 * (e - ref), 1e3 * de)} | {s2} | {exc} |')
  return out


def goal_errors(r: dict) -> list:
  """[(error, its standard error)] in mHa of what the row's goal judges: every state's
  energy ('energy') or every excitation energy from state 0 ('excitation')."""
  s, refs = r['states'], r['references']
  if r['goal'][0] == 'energy':
    return [(1e3 * (e - ref), 1e3 * de) for e, de, (_, ref) in
            zip(s['energy']['value'], s['energy']['error'], refs)]
  return [(1e3 * (x - ref + refs[0][1]), 1e3 * dx) for x, dx, (_, ref) in
          zip(s['excitation_energy']['value'], s['excitation_energy']['error'], refs[1:])]


def summary_line(r: dict) -> str:
  """The run's goal, summed oscillator strength and cost in one row."""
  s = r['states']
  goal = '–'
  if r['goal']:
    what, mha = r['goal']
    errs = [e for e, _ in goal_errors(r)]
    goal = (f'{"every state" if what == "energy" else "excitation energy"} within {mha:g} '
            f'mHa: {verdict(errs, mha)}')
  f = '–'
  if r['f_sum_reference']:
    ref, why = r['f_sum_reference']
    v, e = s['oscillator_strength_sum']['value'][0], s['oscillator_strength_sum']['error'][0]
    f = (f'{pm(v, e, 4)} against {ref:.4f} ({why}): {100 * (v / ref - 1):+.1f}%, '
         f'{(v - ref) / e:+.1f} σ').replace('-', '−')
  training = f'{r["iterations"]} steps, {r["optimizer"]}'
  if r['settings']:
    training += ' (' + ' '.join(f'`{o}`' for o in r['settings']) + ')'
  return (f'| {r["system"]} | {training}; {r["sweeps"]} sweeps | {goal} | {f} | '
          f'{accuracy.wall_cell(r)} |')


def latest(path: str = JSON) -> list:
  """(run, row) of each row's latest measurement, in the order of ROWS."""
  return artifacts.newest_rows(path, ROWS)


def render(path: str = JSON) -> str:
  rows = latest(path)
  if not rows:
    return f'*No runs in `{os.path.relpath(path, REPO)}` yet.*'
  lines = ['| system | state | reference (Ha) | ours (Ha) | error (mHa) | ⟨S²⟩ | excitation '
           'from state 0 (Ha): reference; ours (error) |', '|' + '---|' * 7]
  for _, r in rows:
    lines += state_lines(r)
  lines += ['', '| system | training; evaluation | goal | oscillator strengths from state 0, '
            'summed | wall (train + evaluate) |', '|' + '---|' * 5]
  lines += [summary_line(r) for _, r in rows]
  return '\n'.join(lines + ['', artifacts.provenance(path, [run for run, _ in rows])])


TABLES = {'accuracy-states': ('ACCURACY.md', render)}  # For scripts/render_docs.py.


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--rows', nargs='+', default=list(ROWS), choices=list(ROWS))
  p.add_argument('--json', default=JSON, help='the artifact to append to')
  p.add_argument('--runs-dir', default='', help='keep the run directories here')
  p.add_argument('--at-once', action='store_true', help='run the rows side by side')
  args, overrides = p.parse_known_args()  # --config.KEY=VALUE: passed to every training.
  if any(not o.startswith('--config.') for o in overrides):
    p.error(f'unrecognized arguments: {" ".join(overrides)}')
  accuracy.run_rows(args.rows, lambda name, where: run_row(name, where, overrides), args.json,
                    args.at_once, args.runs_dir)
  print(render(args.json))


if __name__ == '__main__':
  main()
