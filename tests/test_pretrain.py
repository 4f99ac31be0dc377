"""Hartree-Fock pretraining: the network's orbitals move toward the UHF orbitals; the
full-determinant target is block diagonal; without pyscf a run says so and goes on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast.physics import hartree_fock, systems
from ferminet_fast.vmc import mcmc, pretrain
from ferminet_fast.wavefunction import networks


def test_pretraining_reduces_orbital_mismatch():
  pytest.importorskip('pyscf')
  cfg = tiny_config('Li', **{'pretrain.iterations': 40, 'pretrain.lr': 3e-3})
  system = systems.make_system(cfg.system)
  network = networks.make_network(cfg.network, system)
  params = network.init(jax.random.PRNGKey(0))
  x = mcmc.init_positions(jax.random.PRNGKey(1), system, cfg.batch_size, 1.0, jnp.float32)
  new_params, new_x, losses = pretrain.pretrain(cfg.pretrain, cfg.mcmc, system, network, params, x,
                                                jax.random.PRNGKey(2), say=lambda *a: None)
  assert losses.shape == (40,) and np.all(np.isfinite(losses))
  assert losses[-10:].mean() < 0.5 * losses[:5].mean(), (losses[:5], losses[-10:])
  assert new_x.shape == x.shape and bool(jnp.all(jnp.isfinite(new_x)))

  # The same walkers, old and new parameters: the mismatch itself went down.
  hf = hartree_fock.hartree_fock(system, cfg.pretrain.basis, cfg.pretrain.restricted)
  assert hf.energy < -7.2  # UHF/STO-6G of Li is about -7.40 Ha.
  hf_orbitals = jax.vmap(hartree_fock.make_orbitals(hf, system))(new_x)
  targets = pretrain.target_blocks(hf_orbitals, cfg.network.full_det, system.n_electrons)

  def mismatch(p):
    blocks = jax.vmap(network.orbitals, in_axes=(None, 0))(p, new_x)
    return sum(float(jnp.mean(jnp.sum((b - t[:, None]) ** 2, axis=(1, 2, 3))))
               for b, t in zip(blocks, targets))

  assert mismatch(new_params) < 0.5 * mismatch(params)


def test_full_determinant_target_is_block_diagonal():
  up, down = jnp.ones((2, 2, 2)), 2 * jnp.ones((2, 1, 1))
  t_up, t_down = pretrain.target_blocks([up, down], full_det=True, n=3)
  assert t_up.shape == (2, 2, 3) and t_down.shape == (2, 1, 3)
  np.testing.assert_array_equal(t_up[:, :, :2], up)
  np.testing.assert_array_equal(t_up[:, :, 2], 0)
  np.testing.assert_array_equal(t_down[:, :, :2], 0)
  np.testing.assert_array_equal(t_down[:, :, 2:], down)


def test_without_pyscf_the_run_says_so_and_goes_on(monkeypatch):
  monkeypatch.setattr(pretrain, 'available', lambda: False)
  cfg = tiny_config('He', **{'pretrain.iterations': 10})
  said, state = [], object()
  assert pretrain.pretrain_state(cfg.pretrain, cfg.mcmc, None, None, None, state,
                                 said.append) is state  # Left as it was.
  assert said == ["Pretrain skipped: config.pretrain.iterations = 10 needs the optional "
                  "package pyscf (pip install 'ferminet_fast[pyscf]')"]
