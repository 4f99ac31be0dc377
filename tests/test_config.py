"""Config: every shipped config loads and validates; bad values are named."""

import glob
import os

import pytest

from conftest import tiny_config
from ferminet_fast import InputError, config
from ferminet_fast.physics import systems
from ferminet_fast.run import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(REPO, 'configs', '*.py')))


# Shipped configs of molecules with no reference energy we can cite (benchmarks only).
WITHOUT_EXACT_ENERGY = ('c2h4.py',)


@pytest.mark.parametrize('path', CONFIGS, ids=os.path.basename)
def test_shipped_configs_are_valid(path):
  cfg = cli.load_config_file(path)
  config.validate(cfg)
  system = systems.make_system(cfg.system)
  assert (system.exact_energy is None) == (os.path.basename(path) in WITHOUT_EXACT_ENERGY)


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
    ('optim.energy_chunk_size', 'some', 'energy_chunk_size'),
    ('optim.energy_chunk_size', 2.5, 'energy_chunk_size'),
    ('network.network_type', 'transformer', 'network.network_type'),
    ('network.psiformer.heads', 0, 'psiformer.heads'),
    ('optim.spring.momentum', 1.0, 'spring.momentum'),
    ('pretrain.hf_fraction', 1.5, 'hf_fraction'),
    ('pretrain.iterations', -1, 'pretrain.iterations'),
    ('evaluation.steps', 0, 'evaluation.steps'),
    ('system.ecp', 3, 'system.ecp'),
    ('batch_size', None, 'batch_size cannot be None'),
    ('optim.kfac.damping', None, 'kfac.damping cannot be None'),
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
  monkeypatch.setattr(config, 'installed', lambda package: package != 'folx')
  with pytest.raises(InputError, match="pip install 'ferminet_fast\\[folx\\]'"):
    config.validate(tiny_config('He', **{'optim.laplacian': 'folx'}))


def test_the_names_in_the_config_are_the_pieces_implemented():
  from ferminet_fast.optimizers import optim
  from ferminet_fast.physics import hamiltonian
  from ferminet_fast.vmc import loss
  from ferminet_fast.wavefunction import networks
  assert set(config.LAPLACIANS) == set(hamiltonian.LAPLACIANS)
  assert set(config.OPTIMIZERS) == set(optim.OPTIMIZERS)
  assert set(config.ENVELOPES) == set(networks.ENVELOPES)
  assert set(config.JASTROWS) == set(networks.JASTROWS)
  assert set(config.CLIP_METHODS) == set(loss.CLIPPING)


def test_a_saved_config_reads_back_and_retired_keys_are_ignored():
  saved = tiny_config('Li', **{'network.ferminet.hidden_dims': ((8, 4),)}).to_dict()
  saved['debug']['inject_nan'] = 'params'  # A key of an earlier version.
  cfg = config.from_json(saved)
  assert cfg.system.atom == 'Li' and cfg.network.ferminet.hidden_dims == ((8, 4),)
  saved['optim']['learning_rate'] = 0.1
  with pytest.raises(InputError, match='optim.learning_rate'):
    config.from_json(saved)


def test_every_key_is_declared_with_its_meaning():
  described = config.describe()
  for key, setting in config.SETTINGS.items():
    assert f'{key} = ' in described and setting.doc.strip()
  assert config.freeze(config.default()).optim.laplacian in config.LAPLACIANS
