"""scripts/startup.py: each case's outcome is told apart (finished, stalled and ended by the
watchdog, ended after SIGTERM, hung until killed), the runs see the machine's default CPU
devices, and the table has a row per case and a column per environment."""

from scripts import artifacts
from scripts import startup


def record(case, **kw):
  rec = {'case': case, 'exit_code': 0, 'wall_s': 14.2, 'devices': '2 x cpu', 'hung': False,
         'sigterm_at_s': None, 'finished': True, 'message': ''}
  rec.update(kw)
  return rec


def test_each_outcome_is_named_with_its_time():
  assert startup.outcome(record('ne')) == 'finished in 14 s'
  assert startup.outcome(record('ne', exit_code=None, hung=True, wall_s=600.3)) == (
      'hung: killed at 600 s')
  assert startup.outcome(record('ne', exit_code=4, wall_s=139.0)) == (
      'stalled: ended by the watchdog at 139 s (exit 4)')
  assert startup.outcome(record('ne', exit_code=75, wall_s=70.4, sigterm_at_s=45.1)) == (
      'SIGTERM at 45 s: ended at 70 s (exit 75)')
  assert startup.outcome(record('s', evaluate_exit_code=0, evaluate_wall_s=9.6,
                                evaluate_hung=False)) == 'finished in 14 s; evaluated in 10 s'
  assert 'evaluation hung' in startup.outcome(record('s', evaluate_exit_code=None,
                                                     evaluate_wall_s=600, evaluate_hung=True))


def test_the_runs_get_the_default_devices(monkeypatch):
  monkeypatch.setenv('XLA_FLAGS', '--xla_force_host_platform_device_count=1 --xla_foo=1')
  monkeypatch.setenv('JAX_NUM_CPU_DEVICES', '1')
  env = startup.default_devices_env()
  assert env['XLA_FLAGS'] == '--xla_foo=1' and 'JAX_NUM_CPU_DEVICES' not in env


def test_a_row_per_case_and_a_column_per_environment(tmp_path):
  path = str(tmp_path / 'startup.json')
  envs = [{'python': '3.11.7', 'jax': '0.10.2', 'jaxlib': '0.10.2', 'executable': 'a',
           'records': [record('ne', devices='1 x cpu'),
                       record('ne_two_devices', exit_code=4, wall_s=139.0)]},
          {'python': '3.12.1', 'jax': '0.12.0.1', 'jaxlib': '0.12.0.1', 'executable': 'b',
           'records': [record('ne')]}]
  artifacts.append(path, {'wall_s': 300.0, 'environments': envs, 'cases': ['ne']},
                   {'date': '2026-12-01', 'command': 'python -m scripts.startup'})
  text = startup.render(path)
  lines = text.splitlines()
  assert lines[0] == '| case | Python 3.11.7, jax 0.10.2 | Python 3.12.1, jax 0.12.0.1 |'
  assert len([line for line in lines if line.startswith('| ')]) == 1 + len(startup.CASES)
  ne = next(line for line in lines if line.startswith('| `configs/ne.py`'))
  assert 'finished in 14 s; 1 x cpu | finished in 14 s; 2 x cpu |' in ne
  two = next(line for line in lines if 'the fault provoked' in line)
  assert 'stalled: ended by the watchdog at 139 s (exit 4)' in two and two.endswith('– |')


def test_a_run_of_some_cases_replaces_only_theirs(tmp_path):
  path = str(tmp_path / 'startup.json')
  env = {'python': '3.12.1', 'jax': '0.12.0.1', 'jaxlib': '0.12.0.1', 'executable': 'b'}
  artifacts.append(path, {'wall_s': 300.0, 'environments': [
      dict(env, records=[record('ne'), record('s_psiformer', exit_code=3)])]}, {})
  artifacts.append(path, {'wall_s': 30.0, 'environments': [
      dict(env, records=[record('s_psiformer', wall_s=20.0)])]}, {})
  [e], runs = startup.newest_records(path)
  assert e['records']['s_psiformer']['exit_code'] == 0 and 'ne' in e['records']
  assert len(runs) == 2
