"""DeepMind FermiNet as the reference our comparisons run beside us: the shared settings, the
command line for each system, and its per-step log line. FermiNet comes from
`bash ../shared/anchors/setup-ferminet.sh DIR` (DIR/venv/bin/ferminet, DIR/src)."""

import os
import re

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
}
# FermiNet's log line per step (its "exp. variance" is an exponentially weighted variance of
# the step energies, not the local-energy variance).
STEP_LINE = re.compile(r'Step (\d+): (-?[\d.]+) E_h, exp. variance=([\d.eE+-]+)')


def command(fn_dir: str, name: str, run_dir: str, keys: dict) -> list:
  """FermiNet's command line for system `name` with SHARED settings and `keys` on top."""
  _, config, system_keys = SYSTEMS[name]
  return [os.path.join(fn_dir, 'venv', 'bin', 'ferminet'), '--config',
          os.path.join(fn_dir, 'src', 'ferminet', 'configs', config),
          *[f'--config.{k}={v}' for k, v in {**system_keys, **SHARED, **keys}.items()],
          f'--config.log.save_path={run_dir}']


def ours(name: str, run_dir: str, keys: dict) -> list:
  """Our command-line arguments (after `python -m ferminet_fast.train`) for the same run."""
  return ['--config', SYSTEMS[name][0],
          *[f'--config.{k}={v}' for k, v in {**SHARED, **keys}.items()],
          f'--config.log.save_path={run_dir}']
