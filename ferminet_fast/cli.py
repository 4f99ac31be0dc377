"""Command-line checks made before absl parses flags, so bad input gets one clear line.

ml_collections' config flag defers a missing file or a failing `get_config()` to
the first access and reports an unknown override key as a chained traceback; here
the same conditions are found first and reported as an InputError.
"""

import importlib.util
import os
import re
import sys
from typing import Sequence

from ml_collections import config_dict

from ferminet_fast import InputError


def config_path(argv: Sequence[str], default: str) -> str:
  """The --config file named in argv (either '--config=F' or '--config F'), else `default`."""
  for i, arg in enumerate(argv):
    m = re.match(r'^--?config(=(.*))?$', arg)
    if m:
      if m.group(1) is not None:
        return m.group(2)
      if i + 1 < len(argv):
        return argv[i + 1]
      raise InputError('--config needs a file path')
  return default


def load_config_file(path: str) -> config_dict.ConfigDict:
  """Runs `get_config()` of the file at `path`, turning every failure into an InputError."""
  if not os.path.isfile(path):
    raise InputError(f'--config: no such file {path!r}')
  try:
    spec = importlib.util.spec_from_file_location('_ferminet_fast_config_check', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  except Exception as e:  # A user's file: any error is theirs to see, in one line.
    raise InputError(f'--config {path}: the file failed to load: {type(e).__name__}: {e}') from None
  if not hasattr(module, 'get_config'):
    raise InputError(f'--config {path}: the file defines no get_config()')
  try:
    cfg = module.get_config()
  except Exception as e:
    raise InputError(f'--config {path}: get_config() failed: {type(e).__name__}: {e}') from None
  if not isinstance(cfg, config_dict.ConfigDict):
    raise InputError(f'--config {path}: get_config() returned {type(cfg).__name__}, '
                     'not a ConfigDict')
  return cfg


def check_overrides(argv: Sequence[str], cfg: config_dict.ConfigDict) -> None:
  """Every --config.a.b=VALUE must name an existing key (the config is locked)."""
  for arg in argv:
    m = re.match(r'^--?(no)?config\.([^=]+)', arg)
    if not m:
      continue
    node, walked = cfg, []
    for part in m.group(2).split('.'):
      if not isinstance(node, config_dict.ConfigDict) or part not in node:
        where = 'config' + ''.join('.' + w for w in walked)
        known = ', '.join(sorted(node.keys())) if isinstance(node, config_dict.ConfigDict) else ''
        raise InputError(f'unknown config key {m.group(2)!r}: {where} has no {part!r}'
                         + (f' (it has: {known})' if known else ''))
      node = node[part]
      walked.append(part)


def precheck(argv: Sequence[str], default_config: str) -> None:
  """Checks the config file and overrides; prints the problem and exits 2 if there is one."""
  try:
    cfg = load_config_file(config_path(argv[1:], default_config))
    check_overrides(argv[1:], cfg)
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
