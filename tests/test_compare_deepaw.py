"""DeePAW workload: the synthetic data is right, the JAX port equals the e3nn/PyTorch
reference on the same weights, the density is invariant under rotations of the
structure, and the CHGCAR it writes reads back with ASE."""

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('torch')
pytest.importorskip('e3nn')
pytest.importorskip('e3nn_jax')

from comparisons.deepaw import bench as deepaw_bench, data as deepaw_data, port as deepaw_port  # noqa: E402


def test_hfo2_density_integrates_to_the_valence_charge():
  s = deepaw_data.hfo2()
  assert len(s.numbers) == 12 and sorted(set(s.numbers)) == [8, 72]
  rho = deepaw_data.density(s, deepaw_data.probe_grid(s, (32, 32, 32)))
  volume = abs(np.linalg.det(s.cell))
  assert abs(rho.mean() * volume - 88.0) < 0.05
  assert 0.01 < rho.min() and rho.max() < 20


def test_graphs_cover_every_neighbour_within_the_cutoff():
  s = deepaw_data.hfo2()
  g = deepaw_data.atom_graph(s)
  d = np.linalg.norm(g.vec, axis=1)
  assert d.max() <= deepaw_data.CUTOFF and d.min() > 1.5
  # Brute force over a 5x5x5 block of images: the same number of neighbours per atom.
  shifts = np.stack(np.meshgrid(*[np.arange(-2, 3)] * 3, indexing='ij'), -1).reshape(-1, 3) @ s.cell
  for i, x in enumerate(s.positions):
    dist = np.linalg.norm(x - (s.positions[None] + shifts[:, None]).reshape(-1, 3), axis=1)
    assert np.sum((dist > 1e-8) & (dist <= deepaw_data.CUTOFF)) == np.sum(g.dst == i)


def test_jax_port_equals_the_e3nn_reference():
  result = deepaw_bench.inference(8, 2, (4, 4, 4), 32)
  assert result['max_abs_diff'] <= 1e-4 * result['max_abs_density']


def test_density_is_invariant_under_rotation():
  spec = deepaw_port.model_spec(8, 2)
  params = deepaw_port.init_params(spec, 0)
  s = deepaw_data.hfo2(rattle=0.1)
  rng = np.random.default_rng(1)
  q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
  rotated = deepaw_data.Structure(s.cell @ q.T, s.positions @ q.T, s.numbers)
  frac = rng.uniform(size=(40, 3))

  def predict(structure):
    a = deepaw_data.atom_graph(structure)
    atoms = deepaw_port.atom_features(spec, params, jnp.asarray(structure.numbers), jnp.asarray(a.src),
                                 jnp.asarray(a.dst), jnp.asarray(a.vec, jnp.float32))
    g = deepaw_data.ProbeGraphBuilder(structure).edges(frac @ structure.cell)
    return np.asarray(deepaw_port.density(spec, params, atoms, jnp.asarray(g.src), jnp.asarray(g.dst),
                                     jnp.asarray(g.vec, jnp.float32), len(frac)))

  a, b = predict(s), predict(rotated)
  assert np.abs(a).max() > 1e-7  # Not trivially zero.
  np.testing.assert_allclose(a, b, atol=1e-5 * np.abs(a).max() + 1e-9)


def test_training_lowers_the_error_and_chgcar_reads_back(tmp_path):
  pytest.importorskip('ase')
  from ase.calculators.vasp import VaspChargeDensity
  result = deepaw_bench.train(mul=8, lmax=1, steps=20, probes=32, grid=(6, 6, 6))
  assert result['last_loss'] < result['first_loss']
  path = tmp_path / 'CHGCAR'
  deepaw_data.write_chgcar(str(path), result['structure'], result['rho'])
  back = VaspChargeDensity(str(path)).chg[0]
  np.testing.assert_allclose(back, result['rho'], rtol=1e-9, atol=1e-12)
