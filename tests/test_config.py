"""Config: every shipped config loads and validates; bad values are named."""

import glob
import os
import subprocess
import sys

import pytest
import yaml

from conftest import tiny_config
from ferminet_fast import InputError, config
from ferminet_fast.environment import packages
from ferminet_fast.physics import systems
from ferminet_fast.runtime import cli

pytestmark = pytest.mark.jax_range

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(REPO, 'configs', '*.py')))


# Shipped configs with no reference energy we can cite (benchmarks; the electron gas of
# 14 electrons, whose exact Gamma-point energy is not known; crystals and the hydrogen chain
# in a 3-D cell; sets of geometries, which have no single energy).
WITHOUT_EXACT_ENERGY = ('c2h4.py', 'c4h4.py', 'c6h6.py', 'h_chain.py', 'h2_layer.py', 'heg.py',
                        'heg_rs5.py', 'lih_crystal.py', 'h2_pes.py', 'lih_pes.py', 'n2_pes.py')


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
    ('dmc.tau', (0.01, float('inf')), 'finite time steps'),
])
def test_bad_values_are_named(key, value, message):
  with pytest.raises(InputError, match=message):
    config.validate(tiny_config('He', **{key: value}))


def test_a_scan_of_more_geometries_than_walkers_is_refused_before_it_is_made():
  scan = {'system.atom': '', 'system.molecule': 'H 0 0 0; H 0 0 1.4', 'system.scan.atoms': (0, 1),
          'system.scan.start': 1.0, 'system.scan.stop': 2.0, 'system.scan.points': 10**9}
  with pytest.raises(InputError, match='scan.points = 1000000000 exceeds config.batch_size'):
    config.validate(tiny_config('He', **scan))


def test_override_checker_names_the_missing_key():
  cfg = config.default()
  cli.check_overrides(['--config.mcmc.steps=3', '--noconfig.network.full_det'], cfg)
  with pytest.raises(InputError, match="config.mcmc has no 'stepz'"):
    cli.check_overrides(['--config.mcmc.stepz=3'], cfg)


def test_missing_optional_laplacian_package_is_named(monkeypatch):
  monkeypatch.setattr(packages, 'installed', lambda package: package != 'folx')
  with pytest.raises(InputError, match="pip install 'ferminet_fast\\[folx\\]'"):
    config.validate(tiny_config('He', **{'optim.laplacian': 'folx'}))


def test_a_saved_config_reads_back_and_unknown_keys_are_refused():
  """A saved config reads back; a key no longer declared is refused, one retired is dropped
  (dmc.ecp of configs from before dmc.ecp_moves: the new key takes its default)."""
  saved = tiny_config('Li', **{'network.ferminet.hidden_dims': ((8, 4),)}).to_dict()
  cfg = config.from_json(saved)
  assert cfg.system.atom == 'Li' and cfg.network.ferminet.hidden_dims == ((8, 4),)
  old = {**saved, 'dmc': {k: v for k, v in saved['dmc'].items() if k != 'ecp_moves'}}
  old['dmc']['ecp'] = 'locality'
  assert config.from_json(old).dmc.ecp_moves == config.default().dmc.ecp_moves
  saved['optim']['learning_rate'] = 0.1
  with pytest.raises(InputError, match='optim.learning_rate'):
    config.from_json(saved)


@pytest.mark.parametrize('saved,words', [
    ({'system': 5}, 'run/config.json: system holds 5, not a block of settings'),
    ({'batch_size': 'abc'}, "batch_size = 'abc' is not a value of its type .int."),
    ({'relax': {'patience': 3}}, None),
    ([], 'the file holds'),
])
def test_a_malformed_saved_config_is_named(saved, words):
  """A config.json that is not settings is named; one of an older version (its retired
  keys) reads back."""
  if words is None:
    assert config.from_json(saved).relax == config.default().relax
    return
  with pytest.raises(InputError, match=words):
    config.from_json(saved, 'run/config.json')


def _config_file(tmp_path, body):
  path = tmp_path / 'cfg.py'
  path.write_text('import numpy as np\nfrom ml_collections import config_dict\n'
                  'from ferminet_fast import config\n\ndef get_config():\n' + body)
  return str(path)


def test_a_config_file_that_does_not_start_from_the_defaults_is_refused(tmp_path):
  built = _config_file(tmp_path, '  cfg = config_dict.ConfigDict()\n  cfg.batch_size = 8\n'
                       '  return cfg\n')
  with pytest.raises(InputError, match='is missing: a config file starts from'):
    cli.resolve(['train', f'--config={built}'])
  extra = _config_file(tmp_path, '  cfg = config.default()\n  with cfg.unlocked():\n'
                       '    cfg.extra = 1\n  return cfg\n')
  with pytest.raises(InputError, match="unknown config key 'extra'"):
    cli.resolve(['train', f'--config={extra}'])


def test_numpy_values_of_a_config_file_are_taken_as_plain_ones(tmp_path):
  """A FermiNet-style config file's numpy lattice is the settings' tuples, as config.json
  stores them: a cell of volume 64 bohr^3."""
  path = _config_file(tmp_path, "  cfg = config.default()\n  cfg.system.atom = ''\n"
                      "  cfg.system.molecule = 'Li 0 0 0; H 2 2 2'\n"
                      '  cfg.system.lattice = np.eye(3) * 4.0\n'
                      "  cfg.network.envelope = 'auto'\n  return cfg\n")
  cfg = cli.resolve(['train', f'--config={path}'])
  assert cfg.system.lattice == ((4.0, 0.0, 0.0), (0.0, 4.0, 0.0), (0.0, 0.0, 4.0))
  assert systems.make_system(cfg.system).boundary.lattice.volume == pytest.approx(64.0)


def test_every_key_is_declared_with_its_meaning():
  described = config.describe()
  for key, setting in config.SETTINGS.items():
    assert f'{key} = ' in described and setting.doc.strip()


# Every value a key is limited to by its one_of check: each must pass the command line
# as written in --help-config.
ALLOWED = [(key, value) for key in config.SETTINGS
           for value in config.allowed_values(key) or ()]


def refusal(key, value):
  """The error with which the default config legitimately refuses an allowed value (it needs
  an optional package that is missing), or None if it must be accepted."""
  method = config.LAPLACIANS.get(value) if key == 'optim.laplacian' else None
  if method and not method.installed():
    return f'needs the optional package {method.package}'
  if key == 'network.envelope' and value != 'auto' and not config.ENVELOPES[value].molecule:
    return 'is for periodic systems'  # The default system is an atom.
  if key == 'system.periodic_dims' and value != 3:
    return 'needs a crystal'  # Likewise.
  return None


def test_the_keys_with_listed_values_are_found():
  keys = {key for key, _ in ALLOWED}
  assert {'precision', 'system.units', 'network.network_type', 'network.envelope',
          'network.jastrow', 'optim.optimizer', 'optim.laplacian', 'optim.clip_method',
          'distributed.initialize'} <= keys
  assert set(config.allowed_values('network.jastrow')) == set(config.JASTROWS)


@pytest.mark.parametrize('key,value', ALLOWED, ids=lambda x: str(x))
def test_every_allowed_value_passes_the_command_line(key, value):
  """--config.KEY=VALUE, with VALUE spelt as the declaration lists it, resolves to exactly
  that value (a string such as network.jastrow's 'none' stays a string)."""
  written = cli.NONE if value is None else str(value)
  expected = refusal(key, value)
  if expected:
    with pytest.raises(InputError, match=expected):
      cli.resolve(['train', f'--config.{key}={written}', '--dry-run'])
    return
  cfg = cli.resolve(['train', f'--config.{key}={written}', '--dry-run'])
  resolved = config._get(cfg, key)
  assert resolved == value and type(resolved) is type(value)


def test_none_is_taken_only_by_keys_that_allow_it(tmp_path):
  """`None` unsets a key whose default is None; a key that does not take None refuses it
  by name instead of failing to parse."""
  path = tmp_path / 'li.py'
  path.write_text('from ferminet_fast import config\n\n'
                  'def get_config():\n  c = config.default()\n  c.system.atom = "Li"\n'
                  '  c.system.exact_energy = -7.0\n  return c\n')
  assert cli.resolve(['train', '--config', str(path)]).system.exact_energy == -7.0
  cfg = cli.resolve(['train', '--config', str(path), '--config.system.exact_energy=None'])
  assert cfg.system.exact_energy is None
  for key in ('network.jastrow', 'batch_size'):
    with pytest.raises(InputError, match=f'config.{key} cannot be None'):
      cli.resolve(['train', f'--config.{key}=None'])


def test_a_key_that_lists_none_takes_it_and_keeps_its_strings(monkeypatch):
  """None among a key's allowed values makes `None` unset it, while 'none' stays text."""
  setting = config.SETTINGS['network.jastrow']
  monkeypatch.setitem(config.SETTINGS, 'network.jastrow',
                      setting._replace(check=config.one_of(None, *config.JASTROWS)))
  assert cli.resolve(['train', '--config.network.jastrow=None']).network.jastrow is None
  assert cli.resolve(['train', '--config.network.jastrow=none']).network.jastrow == 'none'


def test_the_entry_point_resolves_listed_values_like_resolve():
  """One real `python -m ferminet_fast.train --dry-run=true` (the documented flag with a
  value) with a non-default listed value of every such key: the printed config holds them,
  as `cli.resolve` gives them."""
  chosen = {}
  for key, value in ALLOWED:
    if key not in chosen and value != config.SETTINGS[key].default and not refusal(key, value):
      chosen[key] = value
  args = [f'--config.{key}={cli.NONE if v is None else v}' for key, v in chosen.items()]
  proc = subprocess.run([sys.executable, '-m', 'ferminet_fast.train', *args, '--dry-run=true'],
                        cwd=REPO, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  printed = yaml.full_load(proc.stdout)
  resolved = cli.resolve(['train', *args, '--dry-run'])
  for key, value in chosen.items():
    assert config._get(printed, key) == value == config._get(resolved, key), key
