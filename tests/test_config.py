"""Config: every shipped config loads and validates; bad values are named."""

import glob
import os

import pytest

from conftest import tiny_config
from ferminet_fast import InputError, cli, config, systems

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(REPO, 'configs', '*.py')))


@pytest.mark.parametrize('path', CONFIGS, ids=os.path.basename)
def test_shipped_configs_are_valid(path):
  cfg = cli.load_config_file(path)
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert system.exact_energy is not None


def test_config_is_locked():
  cfg = config.default()
  with pytest.raises(AttributeError):
    cfg.optim.learning_rate = 0.1


@pytest.mark.parametrize('key,value,message', [
    ('precision', 'float16', 'precision'),
    ('network.envelope', 'spherical', 'network.envelope'),
    ('network.ferminet.hidden_dims', ((32, 0),), 'hidden_dims'),
    ('network.ferminet.hidden_dims', (), 'hidden_dims'),
    ('mcmc.target_pmove', 1.5, 'target_pmove'),
    ('mcmc.move_width', 0.0, 'move_width'),
    ('optim.lr.rate', -1.0, 'optim.lr.rate'),
    ('optim.clip_method', 'winsorize', 'clip_method'),
    ('optim.laplacian', 'hessian', 'optim.laplacian'),
    ('optim.energy_chunk_size', -1, 'energy_chunk_size'),
    ('network.network_type', 'transformer', 'network.network_type'),
    ('network.psiformer.heads', 0, 'psiformer.heads'),
    ('optim.spring.momentum', 1.0, 'spring.momentum'),
    ('pretrain.hf_fraction', 1.5, 'hf_fraction'),
    ('pretrain.iterations', -1, 'pretrain.iterations'),
    ('evaluation.steps', 0, 'evaluation.steps'),
])
def test_bad_values_are_named(key, value, message):
  with pytest.raises(InputError, match=message):
    config.validate(tiny_config('He', **{key: value}))


def test_override_checker_names_the_missing_key():
  cfg = config.default()
  cli.check_overrides(['--config.mcmc.steps=3', '--noconfig.network.full_det'], cfg)
  with pytest.raises(InputError, match="config.mcmc has no 'stepz'"):
    cli.check_overrides(['--config.mcmc.stepz=3'], cfg)


def test_missing_optional_laplacian_package_is_named(monkeypatch):
  from ferminet_fast import hamiltonian
  monkeypatch.setattr(hamiltonian, 'available_laplacians', lambda: ['jacfwd', 'jvp_loop'])
  with pytest.raises(InputError, match="pip install 'ferminet_fast\\[folx\\]'"):
    config.validate(tiny_config('He', **{'optim.laplacian': 'folx'}))
