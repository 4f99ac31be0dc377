"""scripts/pes_goals.py: the water geometry read back from relax.json's distances, each
goal judged from the recorded figures, and an empty artifact rendering as not measured."""

import math

import numpy as np
import pytest

from scripts import pes_goals


def final_of(r_angstrom: float, theta_degrees: float, error_bohr: float = 0.001) -> dict:
  """relax.json's 'final' block of water at bonds r and angle theta (stages/relax.py)."""
  r = r_angstrom * pes_goals.BOHR_PER_ANGSTROM
  hh = 2 * r * math.sin(math.radians(theta_degrees) / 2)
  pairs = (((0, 1), r), ((0, 2), r), ((1, 2), hh))
  return {'distances': [{'atoms': list(a), 'distance_bohr': d, 'error_bohr': error_bohr}
                        for a, d in pairs]}


def test_water_geometry_is_read_back_from_the_distances():
  """The molecule string of the start, its distances, and back: r and theta recovered."""
  positions = np.array([[float(c) for c in atom.split()[1:]]
                        for atom in pes_goals.water(*pes_goals.H2O_START).split(';')])
  oh = np.linalg.norm(positions[1] - positions[0])
  hh = np.linalg.norm(positions[2] - positions[1])
  assert oh == pytest.approx(pes_goals.H2O_START[0], abs=1e-7)
  w = pes_goals.water_geometry(final_of(oh, math.degrees(2 * math.asin(hh / (2 * oh)))))
  assert w['r'] == pytest.approx(pes_goals.H2O_START[0], abs=1e-7)
  assert w['theta'] == pytest.approx(pes_goals.H2O_START[1], abs=1e-5)
  assert 0 < w['r_error'] < 1e-3 and 0 < w['theta_error'] < 0.2


def water_entry(r, theta, converged=True):
  return {'row': 'h2o', 'train_s': 3000.0, 'relax': {
      'final': final_of(r, theta), 'converged': converged, 'moves': 30}}


def test_water_verdicts():
  assert pes_goals.verdict(water_entry(0.9590, 104.20)) == 'met'
  assert 'r 0.9650' in pes_goals.verdict(water_entry(0.9650, 104.52))
  assert 'theta 105.22' in pes_goals.verdict(water_entry(0.9572, 105.22))
  assert 'criterion was not met' in pes_goals.verdict(water_entry(0.9572, 104.52, False))


def surface_entry(surface_s, separate_s, reached=True, late=0):
  rung = {'iterations': 1000, 'energies': [-1.0, -1.1], 'errors': [1e-4, 1e-4]}
  return {'row': 'h2', 'tolerance_ha': 5e-4, 'goal_ratio': 0.25,
          'reference': {'name': 'ccsd/cc-pv[q5]z', 'energies': [-1.0002, -1.1001]},
          'surface': {'train_s': surface_s, 'reached': reached, 'rungs': [rung]},
          'separate': [{'train_s': separate_s / 2, 'reached': k >= late} for k in range(2)]}


def test_surface_verdicts():
  assert pes_goals.verdict(surface_entry(100.0, 400.0)) == 'met'
  assert 'time ratio 0.30 > 0.25' in pes_goals.verdict(surface_entry(120.0, 400.0))
  assert 'surface did not reach 0.5 mHa' in pes_goals.verdict(
      surface_entry(100.0, 400.0, reached=False))
  assert '1 separate runs did not reach it' in pes_goals.verdict(
      surface_entry(50.0, 400.0, late=1))
  line = pes_goals.row_line(surface_entry(100.0, 400.0))
  assert 'worst 0.20 mHa' in line and 'ratio 0.25' in line


def test_an_empty_artifact_renders_as_not_measured(tmp_path):
  assert pes_goals.render_table(str(tmp_path / 'none.json')).startswith('Not measured yet')


def test_the_path_summary_skips_the_newest_move_not_yet_measured():
  """relax.json's newest entry (the nuclei just moved) has no forces yet; the bonds and
  angles count every entry, the force statistics the measured ones."""
  def entry(r, theta, force=None):
    final = final_of(r, theta)['distances']
    rb = final[0]['distance_bohr']
    half = math.radians(theta) / 2
    h = [[rb * math.sin(half), 0, rb * math.cos(half)], [-rb * math.sin(half), 0,
                                                         rb * math.cos(half)]]
    e = {'step': 0, 'positions_bohr': [[0, 0, 0], *h], 'velocity_bohr': [[0, 0, 0]] * 3}
    if force is not None:
      e.update(forces_ha_per_bohr=[[force, 0, force]] * 3,
               force_errors_ha_per_bohr=[[force / 10, 0, force / 10]] * 3)
    return e

  summary = pes_goals.path_summary([entry(1.0, 110, 0.2), entry(0.95, 100)])
  assert summary['bond_range_angstrom'] == pytest.approx([0.95, 1.0])
  assert summary['angle_range_degrees'] == pytest.approx([100, 110])
  assert summary['force_median'] == pytest.approx(0.2)
  assert summary['force_error_median'] == pytest.approx(0.02)
