"""scripts/race.py: FermiNet's per-step log lines are read, the reported energy is the mean of
the last 20% of steps, and ACCURACY.md keeps everything before the race section."""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'scripts'))
import race  # noqa: E402


def test_ferminet_log_line():
  line = ('I1123 10:07:01.123 140 train.py:1055] Step 00042: -128.1234 E_h, exp. '
          'variance=12.3456 E_h^2, pmove=0.53\n')
  m = race.reference.STEP_LINE.search(line)
  assert m and (m.group(1), float(m.group(2)), float(m.group(3))) == ('00042', -128.1234,
                                                                       12.3456)


def test_summary_is_mean_of_last_fifth():
  rng = np.random.default_rng(0)
  energy = np.concatenate([np.full(800, -120.0), -128.9 + 0.01 * rng.normal(size=200)])
  s = race.summary({'t': list(np.arange(1000.0)), 'energy': energy}, exact=-128.9376)
  assert s['steps'] == 1000 and s['first_step_s'] == 0.0
  assert abs(s['error_mha'] - 1e3 * (energy[800:].mean() + 128.9376)) < 1e-9
  assert 0.3 < s['stat_mha'] < 2.0  # 10 mHa noise over 200 steps: about 0.7 mHa.


def test_section_replaces_only_its_own_part(tmp_path, monkeypatch):
  path = tmp_path / 'ACCURACY.md'
  path.write_text('# Accuracy\n\ntable\n')
  monkeypatch.setattr(race, 'section', lambda: 'first\n')
  race.write_section(str(path))
  monkeypatch.setattr(race, 'section', lambda: 'second\n')
  race.write_section(str(path))
  assert path.read_text() == '# Accuracy\n\ntable\n' + race.MARKER + 'second\n'


def test_ferminet_evaluation_restores_its_last_checkpoint(tmp_path):
  """FermiNet's inference run (a stand-in executable here) is started on the run's
  checkpoints with the optimizer off, and its step energies are reblocked into an error."""
  fn_dir, run_dir = tmp_path / 'fn', tmp_path / 'run'
  (fn_dir / 'venv' / 'bin').mkdir(parents=True)
  run_dir.mkdir()
  for step in (120, 2693):
    (run_dir / f'qmcjax_ckpt_{step:06d}.npz').write_bytes(b'')
  fake = fn_dir / 'venv' / 'bin' / 'ferminet'
  fake.write_text(
      f'#!{sys.executable}\n'
      'import json, sys\n'
      'args = dict(a[len("--config."):].split("=", 1) for a in sys.argv[1:]\n'
      '            if a.startswith("--config."))\n'
      f'json.dump(args, open({str(tmp_path / "args.json")!r}, "w"))\n'
      'for i in range(int(args["optim.iterations"])):\n'
      '  e = -128.8 + (0.01 if i % 2 else -0.01)\n'
      '  print(f"Step {i:05d}: {e} E_h, exp. variance=1.0 E_h^2, pmove=0.5", file=sys.stderr)\n')
  fake.chmod(0o755)
  ev = race.evaluate_ferminet(str(fn_dir), 'Ne', str(run_dir), str(tmp_path / 'out'),
                              sweeps=64, burn_in=10, exact=-128.9376)
  args = json.loads((tmp_path / 'args.json').read_text())
  assert args['optim.optimizer'] == 'none' and args['log.restore_path'] == str(run_dir)
  assert args['mcmc.burn_in'] == '10' and args['system.atom'] == 'Ne'
  assert ev['checkpoint_step'] == 2693 and ev['sweeps'] == 64
  assert abs(ev['error_mha'] - 1e3 * (-128.8 + 128.9376)) < 1e-6
  assert 0 <= ev['stat_mha'] < 5
