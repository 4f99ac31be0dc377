"""DeepMind FermiNet as the reference our comparisons run beside us: the shared settings, the
command line for each system, and its per-step log line. FermiNet comes from
`bash ../shared/anchors/setup-ferminet.sh DIR` (DIR/venv/bin/ferminet, DIR/src)."""

import os
import re

from ferminet_fast.environment import cpu_devices


# Networks compared: 'small' is our CPU comparison size; 'standard' is FermiNet's default
# ((256, 32) x 4 layers, 16 determinants), the size its papers use.
NETWORKS = {
    'small': {'network.ferminet.hidden_dims': '((64, 8), (64, 8))', 'network.determinants': '2'},
    'standard': {'network.ferminet.hidden_dims': '((256, 32), (256, 32), (256, 32), (256, 32))',
                 'network.determinants': '16'},
}
# Settings both codes run with in every comparison (FermiNet's key names, which ours share);
# callers override the network and the batch through their `keys`.
SHARED = {'batch_size': '256', **NETWORKS['small'], 'mcmc.steps': '10'}
# name: (our config, FermiNet's config file, FermiNet's keys for the system).
SYSTEMS = {
    'He': ('configs/he.py', 'atom.py', {'system.atom': 'He'}),
    'Li': ('configs/li.py', 'atom.py', {'system.atom': 'Li'}),
    'Be': ('configs/be.py', 'atom.py', {'system.atom': 'Be'}),
    'Ne': ('configs/ne.py', 'atom.py', {'system.atom': 'Ne'}),
    'H2': ('configs/h2.py', 'diatomic.py', {'system.molecule_name': 'H2',
                                            'system.bond_length': '1.4', 'system.units': 'bohr'}),
    'LiH': ('configs/lih.py', 'diatomic.py', {'system.molecule_name': 'LiH',
                                              'system.bond_length': '3.015',
                                              'system.units': 'bohr'}),
    'N2': ('configs/n2.py', 'diatomic.py', {'system.molecule_name': 'N2',
                                            'system.bond_length': '2.068', 'system.units': 'bohr'}),
    'C2H4': ('configs/c2h4.py', 'c2h4.py', {}),  # The same geometry in both.
    # The 14-electron gas at r_s = 1, Gamma point, in both codes' own heg.py (full
    # determinant, plane-wave envelopes of the filled shells, no pretraining).
    'HEG': ('configs/heg.py', 'heg.py', {}),
    # Cyclobutadiene at its ground-state geometry (28 electrons), as in FermiNet's paper.
    'C4H4': ('configs/c4h4.py', 'organic.py', {'system.molecule_name': 'cycbut-ground'}),
    # Benzene (42 electrons) at the geometry of FermiNet's excited-state benzene config, run
    # there as a ground state with FermiNet's defaults for what that config changes (the
    # states, blocked MCMC moves, the bottleneck envelope, median clipping, NaN resets).
    'C6H6': ('configs/c6h6.py', 'excited/benzene.py', {
        'system.states': '0', 'mcmc.blocks': '1', 'network.envelope_type': 'isotropic',
        'optim.clip_median': 'False', 'optim.reset_if_nan': 'False'}),
    # Atoms of the size sweep (configs/he.py with the atom replaced in ours, OUR_KEYS).
    **{a: ('configs/he.py', 'atom.py', {'system.atom': a}) for a in ('B', 'C', 'N', 'O', 'F')},
}
# Our keys for a system whose config file is another system's (the atoms of the sweep).
OUR_KEYS = {a: {'system.atom': a} for a in ('B', 'C', 'N', 'O', 'F')}
# FermiNet's settings in a comparison. 'best': its fastest on a CPU machine, as ours runs —
# its folx forward Laplacian and the BLAS libraries held to one thread each (ours holds
# OpenBLAS to one thread itself, environment/blas_threads.py); 'split': 'best' with the
# cores split into JAX devices, one thread each, over which FermiNet's pmap splits the
# walkers (what ours does by default, environment/cpu_devices.py; FermiNet users get it
# from XLA_FLAGS); 'default': its defaults.
BLAS_ONE_THREAD = {'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1', 'OMP_NUM_THREADS': '1'}
PEER_SETTINGS = {
    'best': {'keys': {'optim.laplacian': 'folx'}, 'env': BLAS_ONE_THREAD},
    'split': {'keys': {'optim.laplacian': 'folx'}, 'env': BLAS_ONE_THREAD, 'split': True},
    'default': {'keys': {}, 'env': {}},
}


def split_devices(batch: int) -> int:
  """The CPU devices FermiNet's 'split' setting makes for `batch` walkers: as ours would."""
  return cpu_devices.count('auto', batch, cpu_devices.cores(), {}, False)


def describe(settings: str) -> str:
  """A setting of PEER_SETTINGS in words, for the tables."""
  return {'best': 'folx, one BLAS thread',
          'split': 'folx, one BLAS thread, the cores split into one-thread devices',
          'default': 'its defaults'}[settings]


def peer_env(settings: str, base=None, batch: int = int(SHARED['batch_size'])) -> dict:
  """The environment FermiNet runs in under `settings` (a name in PEER_SETTINGS) with
  `batch` walkers (which fixes the device count of 'split')."""
  env = {**(os.environ if base is None else base), **PEER_SETTINGS[settings]['env']}
  if PEER_SETTINGS[settings].get('split'):
    env['XLA_FLAGS'] = (f'{cpu_devices.FORCE_COUNT}={split_devices(batch)} '
                        f'{cpu_devices.ONE_THREAD_EACH}')
  return env


def peer_settings_record(settings: str, batch: int = int(SHARED['batch_size'])) -> dict:
  """What an artifact records of the peer's settings."""
  return {'name': settings, 'keys': PEER_SETTINGS[settings]['keys'],
          'env': peer_env(settings, {}, batch)}


# FermiNet's log line per step (its "exp. variance" is an exponentially weighted variance of
# the step energies, not the local-energy variance).
# A step's line; its energy and variance may be nan or inf (a walker's non-finite energy).
STEP_LINE = re.compile(r'Step (\d+): (-?(?:[\d.]+(?:[eE][+-]?\d+)?|nan|inf)) E_h, '
                       r'exp. variance=(-?(?:[\d.eE+-]+|nan|inf))')


def command(fn_dir: str, name: str, run_dir: str, keys: dict, settings: str = 'best') -> list:
  """FermiNet's command line for system `name` with SHARED settings, those of `settings`
  (a name in PEER_SETTINGS) and `keys` on top; run it in peer_env(settings)."""
  _, config, system_keys = SYSTEMS[name]
  chosen = PEER_SETTINGS[settings]['keys']
  return [os.path.join(fn_dir, 'venv', 'bin', 'ferminet'), '--config',
          os.path.join(fn_dir, 'src', 'ferminet', 'configs', config),
          *[f'--config.{k}={v}' for k, v in {**system_keys, **SHARED, **chosen, **keys}.items()],
          f'--config.log.save_path={run_dir}']


def peer_versions(fn_dir: str) -> dict:
  """The commit of FermiNet's source and the versions in its environment, as far as they
  can be read (what an artifact records of the peer)."""
  import subprocess
  out = {'name': 'DeepMind FermiNet', 'dir': fn_dir}
  src = os.path.join(fn_dir, 'src')
  try:
    # Without our GIT_* variables, which would make git read this repository instead.
    plain = {k: v for k, v in os.environ.items() if not k.startswith('GIT_')}
    top, commit = subprocess.run(['git', '-C', src, 'rev-parse', '--show-toplevel', 'HEAD'],
                                 env=plain, capture_output=True, text=True,
                                 timeout=30).stdout.split() or (None, None)
    # Only FermiNet's own checkout: not a repository that happens to enclose its source.
    out['commit'] = commit if top and os.path.realpath(top) == os.path.realpath(src) else None
    py = os.path.join(fn_dir, 'venv', 'bin', 'python')
    code = ('import importlib.metadata as m, platform, json; v = {"python": '
            'platform.python_version()}\nfor n in ("jax", "jaxlib", "flax", "optax", "folx", '
            '"pyscf", "kfac-jax"):\n  try: v[n] = m.version(n)\n  except Exception: pass\n'
            'print(json.dumps(v))')
    import json
    out['versions'] = json.loads(subprocess.run([py, '-c', code], capture_output=True,
                                                text=True, timeout=120).stdout)
  except (OSError, ValueError, subprocess.SubprocessError):
    out.setdefault('versions', None)
  return out


def ours(name: str, run_dir: str, keys: dict) -> list:
  """Our command-line arguments (after `python -m ferminet_fast.train`) for the same run."""
  return ['--config', SYSTEMS[name][0],
          *[f'--config.{k}={v}' for k, v in {**OUR_KEYS.get(name, {}), **SHARED,
                                               **keys}.items()],
          f'--config.log.save_path={run_dir}']
