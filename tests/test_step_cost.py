"""scripts/step_cost.py: XLA's count of each stage's arithmetic, in forward passes. The
MCMC moves must cost one forward pass each (a loop's body is counted once, so the script
counts one move and multiplies), the refresh exactly one, and the local energy at least
its floor of 3N + 2 forward passes (the forward Laplacian cannot be cheaper than carrying
3N tangents and the Laplacian through the network), of which the determinants take a part."""

import pytest

from scripts import step_cost


@pytest.fixture(scope='module')
def li_adam():
  return step_cost.count('Li', 'small', 'adam', batch=8, mcmc_steps=4)


def test_stages_against_their_floors(li_adam):
  r = li_adam
  f, stages = r['forward_flops'], r['stage_flops']
  assert r['electrons'] == 3 and r['floors'] == {'mcmc': 4, 'energy': 11, 'gradient': 3,
                                                 'optimizer': 0, 'refresh': 1}
  assert stages['refresh'] == f
  assert stages['mcmc'] / f == pytest.approx(4, rel=0.1)  # One forward pass per move.
  assert stages['energy'] / f >= r['floors']['energy']
  # The whole step is its stages (the optimizer's arithmetic included), to within the
  # bookkeeping between them.
  assert r['step_flops'] == pytest.approx(sum(stages.values()), rel=0.05)
  # The determinants' share of the Laplacian is a part of the energy's arithmetic.
  assert 0 < r['after_orbitals_flops'] < stages['energy']


def test_table_names_the_floor(li_adam, tmp_path):
  from scripts import artifacts
  path = str(tmp_path / 'cost.json')
  artifacts.append(path, {'rows': [li_adam]})
  text = step_cost.render(path)
  row = next(line for line in text.splitlines() if line.startswith('| Li (3) | small | adam |'))
  cells = [c.strip() for c in row.strip('|').split('|')]
  assert cells[3] == li_adam['laplacian'] == 'folx'  # What 'best' takes for 3 electrons.
  assert cells[5].endswith('(4)') and cells[6].endswith('(11)')  # MCMC and energy floors.
  after = li_adam['after_orbitals_flops'] / li_adam['forward_flops']
  assert float(cells[7]) == pytest.approx(after, abs=0.05)  # The determinants' share.
  assert cells[12] == str(sum(li_adam['floors'].values()))


def test_a_count_with_other_settings_is_its_own_row(li_adam, tmp_path):
  from scripts import artifacts
  path = str(tmp_path / 'cost.json')
  other = {**li_adam, 'set': {'network.network_type': 'lapnet'}, 'step_flops': 1.0}
  artifacts.append(path, {'rows': [li_adam, other]})
  rows = [line for line in step_cost.render(path).splitlines() if line.startswith('| Li (3)')]
  assert [r.split('|')[2].strip() for r in rows] == ['small', 'small, network.network_type=lapnet']


def test_our_stages_beside_ferminets_make_our_whole_step(li_adam, tmp_path):
  """The stages compared with FermiNet's add up to our whole step, and a peer doing twice
  our arithmetic in every stage is rendered at a ratio of 0.50."""
  from scripts import artifacts
  ours = step_cost.comparable(li_adam)
  assert sum(ours[k] for k in step_cost.COMPARED) == pytest.approx(li_adam['step_flops'],
                                                                    rel=0.05)
  path = str(tmp_path / 'against.json')
  artifacts.append(path, {'rows': [{'system': 'Li', 'network': 'small', 'electrons': 3,
                                    'laplacian': 'folx', 'ours': ours,
                                    'ferminet': {k: 2 * v for k, v in ours.items()}}]})
  row = next(line for line in step_cost.render_against(path).splitlines()
             if line.startswith('| Li (3) | small |'))
  assert row.rstrip().endswith('| 0.50 |')


def test_a_failed_peer_count_keeps_the_rows_counted(li_adam, tmp_path, monkeypatch):
  """One system's FermiNet count failing ends the run with a message naming it, and the
  systems counted before and after it are still written."""
  import json
  def theirs(fn_dir, name, network, mcmc_steps):
    if name == 'He':
      raise step_cost.ProbeFailed("FermiNet's count of He (small) failed")
    return {k: 2 * v for k, v in step_cost.comparable(li_adam).items()}
  monkeypatch.setattr(step_cost, 'count', lambda *a, **k: li_adam)
  monkeypatch.setattr(step_cost, 'ferminet_count', theirs)
  monkeypatch.setattr(step_cost.reference, 'peer_versions', lambda fn_dir: {'jax': 'x'})
  path = str(tmp_path / 'against.json')
  with pytest.raises(SystemExit, match=r'failed for He \(small\); 2 counted and kept'):
    step_cost.against_ferminet('fn', ['Li', 'He', 'Be'], ['small'], 256, 10, path)
  with open(path) as f:
    runs = json.load(f)['runs']
  assert [r['system'] for r in runs[-1]['data']['rows']] == ['Li', 'Be']
