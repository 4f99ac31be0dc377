"""The training command line: flags, checks made before absl parses them (so bad input
gets one clear line), and exit codes.

ml_collections' config flag defers a missing file or a failing `get_config()` to
the first access and reports an unknown override key as a chained traceback; here
the same conditions are found first and reported as an InputError.
"""

import contextlib
import functools
import importlib.util
import logging
import os
import re
import sys
from typing import Callable, Optional, Sequence

from ml_collections import config_dict

from ferminet_fast import config
from ferminet_fast.environment import signals
from ferminet_fast.errors import InputError, TrainingError

DEFAULT_CONFIG = config.__file__  # The defaults: a helium atom.
EXIT_INPUT = 2  # Bad input: nothing was written.
EXIT_FAILED = 3  # Training could not go on; the last good state is checkpointed.
EXIT_STALLED = 4  # A step stopped completing (runtime/watchdog.py); files are as they were.
EXIT_PREEMPTED = signals.EXIT_PREEMPTED  # Stopped by a signal (checkpointed): rerun to resume.
# How None is written on the command line, for keys that take it. Only this spelling: a
# key's declared string values (such as network.jastrow's 'none') are passed on as text.
NONE = 'None'


@contextlib.contextmanager
def exit_on_error():
  """Bad input: its one line on stderr and EXIT_INPUT; training that cannot go on: EXIT_FAILED.
  The exits every entry point (train, evaluate, plot) shares."""
  try:
    yield
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(EXIT_INPUT)
  except TrainingError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(EXIT_FAILED)


def stage_flags(argv: Sequence[str]):
  """The parsed absl flags of a stage run on a run directory (evaluate, dmc), library INFO
  chatter silenced; positional arguments are bad input (one line, EXIT_INPUT)."""
  from absl import flags, logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])}', file=sys.stderr)
    sys.exit(EXIT_INPUT)
  return flags.FLAGS


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
  """Every --config.a.b=VALUE must name an existing key (the config is locked), and only
  keys that take None (`config.nullable`) are given `None`."""
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
    if arg.partition('=')[2] == NONE and not config.nullable(m.group(2)):
      raise InputError(f'config.{m.group(2)} cannot be None (only keys whose default is None '
                       'or that list None among their values take it)')


# Keys of which a config holds one: the one given on the command line clears the other
# (a molecule given to a config file of an atom replaces the atom), unless both are given.
ALTERNATIVES = (('system.atom', 'system.molecule'), ('system.atom', 'system.geometries'))
# Keys that change the system a config file's exact energy belongs to: one of them given on
# the command line without system.exact_energy clears it (the error against the energy of
# another system would mislead; an atom's comes from the table again).
CHANGE_THE_SYSTEM = ('system.atom', 'system.molecule', 'system.units', 'system.charge',
                     'system.electrons', 'system.spin', 'system.ecp', 'system.lattice',
                     'system.cell', 'system.rs', 'system.supercell', 'system.twist',
                     'system.periodic_dims', 'system.geometries', 'system.scan.atoms',
                     'system.scan.cell', 'system.scan.start', 'system.scan.stop',
                     'system.scan.points')


def after_parsing(argv: Sequence[str]) -> tuple:
  """(argv for absl, {key: value} to set on the parsed config). `--config.KEY=None` for a
  key that takes None is taken out (absl would parse 'None' as a number and fail) and set
  afterwards; only that spelling, so a declared string such as 'none' stays text. Of
  ALTERNATIVES, the one not given is cleared when the other is; a key of CHANGE_THE_SYSTEM
  given clears the config file's exact energy unless that is given too."""
  kept, values, given = [], {}, set()
  for arg in argv:
    m = re.match(r'^--?config\.([^=]+)=(.*)$', arg)
    if m:
      given.add(m.group(1))
    if m and m.group(2) == NONE and config.nullable(m.group(1)):
      values[m.group(1)] = None
    else:
      kept.append(arg)
  for pair in ALTERNATIVES:
    for key, other in (pair, pair[::-1]):
      if key in given and other not in given:
        values[other] = ''
  if given & set(CHANGE_THE_SYSTEM) and 'system.exact_energy' not in given:
    values['system.exact_energy'] = None
  return kept, values


def set_values(cfg: config_dict.ConfigDict, values: dict) -> None:
  for key, value in values.items():
    *blocks, last = key.split('.')
    node = cfg
    for block in blocks:
      node = node[block]
    node[last] = value


HELP = ('-h', '--help', '--helpshort', '--helpfull')  # Each entry point's request for help.
# Flags of the training command besides --config and its overrides.
FLAGS = ('--dry-run', '--dry_run', '--help-config') + HELP
OPTIONS = '--config FILE, --config.KEY=VALUE, --dry-run, --help-config, --help'
BOOLEANS = ('true', 't', '1', 'false', 'f', '0')  # absl's spellings of a bool flag's value.


def training_usage() -> str:
  """What `python -m ferminet_fast.train --help` prints."""
  return '\n'.join([
      'usage: python -m ferminet_fast.train [--config FILE] [--config.KEY=VALUE ...] '
      '[--dry-run]',
      '',
      'Trains a wavefunction and writes its run directory (config.log.save_path); the same',
      'command run again resumes it from its newest checkpoint.',
      '',
      '  --config FILE       a settings file defining get_config() (default: the helium atom',
      '                      of ferminet_fast/config.py; configs/ holds the shipped systems)',
      '  --config.KEY=VALUE  one setting, e.g. --config.optim.iterations=5000',
      '                      (--config.KEY=None for keys that take None)',
      '  --dry-run           make the checks a run makes, print the resolved settings and exit',
      '                      without writing anything',
      '  --help-config       every setting: its meaning, unit, allowed values and default',
      '',
      f'Exit status: 0 done; {EXIT_INPUT} bad input (nothing written); {EXIT_FAILED} training '
      'could not go on',
      f'(its last good state checkpointed); {EXIT_STALLED} a step stopped completing; '
      f'{EXIT_PREEMPTED} stopped by a',
      'signal after a checkpoint (run the command again to resume).'])


def asks_for_help(argv: Sequence[str]) -> Optional[str]:
  """The help flag in argv (program name first), if any."""
  return next((a for a in argv[1:] if a in HELP), None)


def check_flags(argv: Sequence[str]) -> None:
  """Every flag in argv (program name first) is one the command takes: an unknown one is
  an InputError here rather than absl's fatal parse error."""
  for arg in argv[1:]:
    name = arg.split('=')[0]
    if (arg.startswith('-') and not re.match(r'^-?[0-9.]', arg[1:])
        and not re.match(r'^--?(no)?config(\.|$)', name) and name not in FLAGS):
      raise InputError(f'unknown flag {name} (options are {OPTIONS})')
    value = arg.partition('=')[2]
    if name in ('--dry-run', '--dry_run') and '=' in arg and value.lower() not in BOOLEANS:
      raise InputError(f'--dry-run takes no value, or true or false, not {value!r}')


def check(argv: Sequence[str], default_config: str) -> None:
  """Checks the flags, the config file and the overrides of argv (program name first);
  raises InputError."""
  check_flags(argv)
  cfg = load_config_file(config_path(argv[1:], default_config))
  check_overrides(argv[1:], cfg)
  parse(after_parsing(argv)[0], default_config)


def parse(argv: Sequence[str], default_config: str):
  """The config that absl parses from argv, in a flag registry of its own; a value of the
  wrong type (--config.batch_size=many) is an InputError, not absl's fatal error."""
  from absl import flags
  flag_values = flags.FlagValues()
  define_flags(flag_values, argv, default_config)
  try:
    flag_values(list(argv))
  except flags.Error as e:
    raise InputError(str(e).splitlines()[0]) from None
  return flag_values.config


def precheck(argv: Sequence[str], default_config: str) -> None:
  """Checks the config file and overrides; prints the problem and exits 2 if there is one."""
  try:
    check(argv, default_config)
  except InputError as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(EXIT_INPUT)


def absl_spelling(argv: Sequence[str]) -> list:
  """argv with '--dry-run' (also '--dry-run=VALUE') written as absl's flag name
  '--dry_run'."""
  return [('--dry_run' + a[len('--dry-run'):] if a == '--dry-run' or a.startswith('--dry-run=')
           else a) for a in argv]


def parse_stage_flags(argv: Sequence[str]) -> list:
  """absl's parsing of a stage's flags (evaluate, dmc: app.run's flags_parser), a flag it
  does not know or a value it refuses being bad input: one line, EXIT_INPUT, as for
  training (absl's own parser prints two and exits 1)."""
  from absl import app, flags
  if wanted := asks_for_help(argv):  # absl prints its help and exits 1; help is no error.
    app.usage(shorthelp=wanted != '--helpfull', writeto_stdout=True, exitcode=0)
  with exit_on_error():
    try:
      return flags.FLAGS(list(argv))
    except flags.Error as e:
      raise InputError(str(e).splitlines()[0]) from None


def define_flags(flag_values, argv: Optional[Sequence[str]] = None,
                 default_config: str = DEFAULT_CONFIG) -> None:
  """Defines --config and --dry_run in `flag_values` (absl's FlagValues); the config flag
  reads its --config.KEY overrides from `argv`, or from sys.argv when it is None."""
  from absl import flags
  from ml_collections import config_flags
  config_flags.DEFINE_config_file(
      'config', default_config,
      'Config file exposing get_config(); override keys with --config.KEY=VALUE.',
      flag_values=flag_values, sys_argv=None if argv is None else list(argv))
  flags.DEFINE_bool('dry_run', False, 'Print the resolved config and exit (also --dry-run).',
                    flag_values=flag_values)


def resolve(argv: Sequence[str]) -> config_dict.ConfigDict:
  """The validated config that the command line `argv` (program name first) gives, by the
  same steps as `run_training` but in a fresh flag registry, so that it can be called many
  times in one process. Raises InputError for bad input."""
  argv = absl_spelling(argv)
  check(argv, DEFAULT_CONFIG)
  argv, values = after_parsing(argv)
  cfg = parse(argv, DEFAULT_CONFIG)
  set_values(cfg, values)
  config.validate(cfg)
  return cfg


def _main(argv, train: Callable, dry_run: Callable, values=None) -> None:
  from absl import flags
  from absl import logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)  # Library INFO chatter stays out of the log.
  logging.getLogger('jax._src.xla_bridge').setLevel(logging.WARNING)  # No 'no TPU' notices.
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])} (options are {OPTIONS})',
          file=sys.stderr)
    sys.exit(EXIT_INPUT)
  cfg = flags.FLAGS.config
  set_values(cfg, values or {})
  with exit_on_error():
    if flags.FLAGS.dry_run:
      print(dry_run(cfg))
      return
    result = train(cfg, handle_signals=True)
  if result.stopped_by:
    sys.exit(EXIT_PREEMPTED)


def run_training(train: Callable, dry_run: Callable) -> None:
  """`train(cfg, handle_signals=True)` from the command line (--config FILE,
  --config.KEY=VALUE, --config.KEY=None for keys whose default is None, --dry-run, which
  prints `dry_run(cfg)`; --help-config lists every key; a molecule given replaces the
  config's atom and the other way round). Flags are defined here, not at import, so that
  importing the package registers nothing, and only after the arguments were checked."""
  from absl import app, flags
  if '--help-config' in sys.argv[1:]:
    print(config.describe())
    sys.exit(0)
  if asks_for_help(sys.argv):
    print(training_usage())
    sys.exit(0)
  sys.argv = absl_spelling(sys.argv)
  precheck(sys.argv, DEFAULT_CONFIG)
  sys.argv, values = after_parsing(sys.argv)
  define_flags(flags.FLAGS)
  app.run(functools.partial(_main, train=train, dry_run=dry_run, values=values))
