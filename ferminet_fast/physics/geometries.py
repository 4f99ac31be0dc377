"""Where the nuclei are: one geometry read from text or an .xyz file, and a set of
geometries of one system (a list, a multi-frame .xyz file, a scan of one interatomic
distance, or a scan of a periodic system's cell), over which one network can be trained (a
potential energy surface, an equation of state).

The element table and the readers live here so that physics/systems.py, which builds the
System, imports this module and not the other way round.
"""

import re
from typing import List, NamedTuple, Optional, Tuple

import numpy as np

from ferminet_fast.errors import InputError

BOHR_PER_ANGSTROM = 1.0 / 0.529177210903
UNITS = {'bohr': 1.0, 'angstrom': BOHR_PER_ANGSTROM}  # Bohr per unit.

# Element symbols by atomic number, H to Kr.
ELEMENTS = ('H', 'He', 'Li', 'Be', 'B', 'C', 'N', 'O', 'F', 'Ne',
            'Na', 'Mg', 'Al', 'Si', 'P', 'S', 'Cl', 'Ar',
            'K', 'Ca', 'Sc', 'Ti', 'V', 'Cr', 'Mn', 'Fe', 'Co', 'Ni', 'Cu', 'Zn',
            'Ga', 'Ge', 'As', 'Se', 'Br', 'Kr')

# Two nuclei of a set's geometry closer than this (bohr) are refused: the energy there is
# dominated by their repulsion and the network's features are singular.
MIN_DISTANCE = 0.1


class Surface(NamedTuple):
  """A set of geometries of one system: the same nuclei (elements, order) at each.
  `coordinate` and `label` describe a scan; a list of geometries has None and ''. A scan
  of a periodic system's cell (`scan.cell`) has the factor of each geometry's cell against
  the first's in `scales`, and its nuclei scaled alike."""
  positions: np.ndarray  # (G, M, 3) bohr, in the order of System.charges.
  coordinate: Optional[np.ndarray] = None  # (G,) the scanned coordinate, bohr.
  label: str = ''  # What the coordinate is, e.g. 'R(Li0-H1) / bohr'.
  scales: Optional[np.ndarray] = None  # (G,) a scan of the cell: its factors, the first 1.


def atomic_number(symbol: str, where: str) -> int:
  if symbol not in ELEMENTS:
    close = [e for e in ELEMENTS if e.lower() == symbol.lower()]
    hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(ELEMENTS)})"
    raise InputError(f'{where}: unknown element symbol {symbol!r}{hint}')
  return ELEMENTS.index(symbol) + 1


def parse_molecule(text: str, units: str, where: str = 'config.system.molecule') -> tuple:
  """Parses 'H 0 0 0; H 0 0 1.4' (entries split by ';' or newlines) into symbols and
  positions (M, 3), bohr. `where` names the setting in messages."""
  symbols, coords = [], []
  for entry in [e.strip() for e in re.split(r'[;\n]', text) if e.strip()]:
    fields = entry.replace(',', ' ').split()
    if len(fields) != 4:
      raise InputError(f"{where}: entry {entry!r} is not 'SYMBOL x y z'")
    atomic_number(fields[0], where)
    try:
      xyz = [float(v) for v in fields[1:]]
    except ValueError:
      raise InputError(f'{where}: coordinates of {entry!r} are not numbers') from None
    if not np.all(np.isfinite(xyz)):
      raise InputError(f'{where}: coordinates of {entry!r} are not finite')
    symbols.append(fields[0])
    coords.append(xyz)
  if not symbols:
    raise InputError(f'{where} is empty')
  positions = np.asarray(coords, dtype=np.float64) * UNITS[units]
  for a in range(len(symbols)):
    for b in range(a):
      if np.linalg.norm(positions[a] - positions[b]) < 1e-3:
        raise InputError(f'{where}: nuclei {b + 1} ({symbols[b]}) and {a + 1} '
                         f'({symbols[a]}) are at the same position')
  return tuple(symbols), positions


def read_frames(path: str, where: str, first_only: bool = False) -> List[tuple]:
  """[(symbols, positions (M, 3) bohr)] of each frame of an .xyz file, frames one after
  another: the atom count, a comment line, then one 'SYMBOL x y z' line per atom in
  angstrom (the format's unit; extra columns ignored, blank lines skipped). `first_only`
  reads the first frame and ignores what follows it."""
  try:
    with open(path) as f:
      lines = f.read().splitlines()
  except OSError as e:
    raise InputError(f'{where} cannot be read: {e.strerror}') from None
  except UnicodeDecodeError:
    raise InputError(f'{where} is not a text file (an .xyz file of atoms)') from None
  frames, i = [], 0
  while True:
    while i < len(lines) and not lines[i].strip():
      i += 1
    if i == len(lines) or (first_only and frames):
      break
    frame = f' frame {len(frames)}' if not first_only else ''
    try:
      count = int(lines[i].split()[0])
    except (IndexError, ValueError):
      which = 'the first line' if i == 0 else f'line {i + 1}'
      raise InputError(f'{where}{frame}: {which} must be the number of atoms'
                       + (' (does the frame before hold as many atom lines as it says?)'
                          if frames else '')) from None
    atoms, i = [], i + 2  # After the comment line.
    while i < len(lines) and len(atoms) < max(count, 0):
      if lines[i].strip():
        atoms.append(lines[i].split()[:4])
      i += 1
    if count <= 0 or len(atoms) < count:
      raise InputError(f'{where}{frame}: says {count} atoms but has {len(atoms)} atom lines')
    frames.append(parse_molecule('; '.join(' '.join(a) for a in atoms), 'angstrom',
                                 f'{where}{frame}'))
  if not frames:
    raise InputError(f'{where}: the file holds no geometry (the first line must be the '
                     'number of atoms)')
  return frames


def geometries_problem(v) -> Optional[str]:
  """What is wrong with a value of `system.geometries`, or None (its setting's check)."""
  if v == '' or (isinstance(v, str) and v.strip().lower().endswith('.xyz')):
    return None
  if isinstance(v, (tuple, list)) and not v:
    return "holds no geometry: give one or more (or '' for none)"
  if isinstance(v, (tuple, list)) and all(isinstance(e, str) for e in v):
    return None
  return ("must be '' (none), the path of an .xyz file of one or more frames, or a tuple "
          "of molecule strings 'SYMBOL x y z; ...'")


def pair_problem(v) -> Optional[str]:
  """What is wrong with a value of `system.scan.atoms`, or None (its setting's check)."""
  if isinstance(v, (tuple, list)) and not v:
    return None
  if (isinstance(v, (tuple, list)) and len(v) == 2 and v[0] != v[1] and
      all(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in v)):
    return None
  return 'must be () (no scan) or a pair (i, j) of two different atom indices, from 0'


def given(sys_cfg) -> bool:
  """Whether the `system` settings ask for a set of geometries (a list, a file or a scan)."""
  return bool(sys_cfg.geometries) or bool(sys_cfg.scan.atoms) or bool(sys_cfg.scan.cell)


def check(sys_cfg, periodic: bool) -> None:
  """The combinations of the `system` settings that a set of geometries refuses; `periodic`:
  whether they describe a periodic system. Before anything is read."""
  scan = sys_cfg.scan
  for key, value, problem in (('geometries', sys_cfg.geometries, geometries_problem),
                              ('scan.atoms', scan.atoms, pair_problem)):
    if problem(value):
      raise InputError(f'config.system.{key} {problem(value)}, got {value!r}')
  for key in ('points', 'start', 'stop'):
    if not scan.atoms and not scan.cell and scan[key]:
      raise InputError(f'config.system.scan.{key} = {scan[key]!r} is given but '
                       'config.system.scan.atoms is () and scan.cell False (no scan): set the '
                       'pair of atoms whose distance is scanned, or scan.cell = True')
  if not given(sys_cfg):
    return
  if sys_cfg.geometries and (scan.atoms or scan.cell):
    raise InputError('config.system.geometries and config.system.scan are both given: give '
                     'one set of geometries (clear the other: geometries = \'\', or scan.atoms '
                     '= () and scan.cell = False)')
  if scan.atoms and scan.cell:
    raise InputError(f'config.system.scan: atoms = {tuple(scan.atoms)} and cell = True ask for '
                     'two scans; a scan is of one distance or of the cell (clear the other)')
  key = 'config.system.' + ('geometries' if sys_cfg.geometries else 'scan')
  if periodic and not scan.cell:
    raise InputError(f'{key}: the geometries of a periodic system (config.system.lattice or '
                     'config.system.rs) are scanned with its cell (config.system.scan.cell = '
                     'True); other sets are for molecules')
  if scan.cell and not periodic:
    raise InputError('config.system.scan.cell = True scans a periodic system\'s cell; this '
                     'system has none (set config.system.lattice or config.system.rs)')
  if sys_cfg.states > 1:
    raise InputError(f'{key}: a set of geometries is not supported with several states '
                     f'(config.system.states = {sys_cfg.states}; use 1)')
  if sys_cfg.atom:
    raise InputError(f'{key}: config.system.atom = {sys_cfg.atom!r} is a single atom, which '
                     "has no geometry to vary (set atom = '' and give the nuclei)")
  if scan.atoms or scan.cell:
    if scan.atoms and not sys_cfg.molecule:
      raise InputError('config.system.scan needs config.system.molecule, the geometry whose '
                       'distance it scans')
    what = 'the cell' if scan.cell else f'atoms {tuple(scan.atoms)}'
    needs = ('the factor of its cell it' if scan.cell else
             'the distance it') + ' {end}s at, > 0' + ('' if scan.cell else
                                                       ' (in config.system.units)')
    if scan.points < 1:
      raise InputError(f'config.system.scan.points = {scan.points}: the scan is empty; give '
                       'the number of geometries, >= 1')
    for end in ('start', 'stop'):
      if scan[end] is None or scan[end] <= 0:
        raise InputError(f'config.system.scan.{end} = {scan[end]!r}: the scan of {what} '
                         f'needs {needs.format(end=end)}')
    if scan.points > 1 and scan.start == scan.stop:
      raise InputError(f'config.system.scan: start = stop = {scan.start} gives the same '
                       f'geometry {scan.points} times')


def read(sys_cfg, base: Optional[tuple]) -> Tuple[tuple, Surface]:
  """(symbols, Surface) of the set of geometries the `system` settings ask for (`given`);
  `base` is (symbols, positions bohr) of `molecule`, or None when it is empty. Each
  geometry is checked: the same elements in the same order, no two nuclei closer than
  MIN_DISTANCE."""
  if sys_cfg.scan.atoms:
    symbols, surface = surface_of_scan(base, sys_cfg.scan, sys_cfg.units)
    where = 'config.system.scan'
  else:
    symbols, surface = listed(sys_cfg.geometries, sys_cfg.units)
    where = 'config.system.geometries'
    if base is not None and base[0] != symbols:
      raise InputError(f'{where}: its geometries hold {_formula(symbols)} but '
                       f'config.system.molecule holds {_formula(base[0])} (the same elements '
                       'in the same order are needed)')
    if len(symbols) < 2:
      raise InputError(f'{where}: one nucleus ({symbols[0]}) has no geometry to vary')
  check_distances(symbols, surface.positions, where)
  return symbols, surface


def listed(setting, units: str) -> Tuple[tuple, Surface]:
  """(symbols, Surface) of `system.geometries`: molecule strings in `units`, or the path
  of a multi-frame .xyz file (angstrom)."""
  where = 'config.system.geometries'
  problem = geometries_problem(setting)
  if problem or not setting:
    raise InputError(f'{where} {problem or "is empty"}, got {setting!r}')
  if isinstance(setting, str):
    frames = read_frames(setting.strip(), f'{where} {setting.strip()!r}')
    wheres = [f'{where} {setting.strip()!r} frame {g}' for g in range(len(frames))]
  else:
    wheres = [f'{where}[{g}]' for g in range(len(setting))]
    frames = [parse_molecule(text, units, w) for text, w in zip(setting, wheres)]
  symbols = frames[0][0]
  for (s, _), w in zip(frames, wheres):
    if s != symbols:
      raise InputError(f'{w} holds {_formula(s)} but {wheres[0]} holds {_formula(symbols)}: '
                       'every geometry holds the same elements in the same order')
  return symbols, Surface(np.stack([p for _, p in frames]))


def surface_of_scan(base: tuple, scan_cfg, units: str) -> Tuple[tuple, Surface]:
  """(symbols, Surface) of the scan of one distance: atom j of `base` moves along the axis
  from atom i to atom j, so that |R_j - R_i| takes `points` values evenly spaced from
  `start` to `stop` (both in `units`, both included); the other atoms stay."""
  symbols, positions = base
  pair = tuple(scan_cfg.atoms)
  if any(a >= len(symbols) for a in pair):
    raise InputError(f'config.system.scan.atoms = {pair}: config.system.molecule has '
                     f'{len(symbols)} nuclei (indices 0..{len(symbols) - 1})')
  i, j = pair
  axis = positions[j] - positions[i]
  axis = axis / np.linalg.norm(axis)
  distances = np.linspace(scan_cfg.start, scan_cfg.stop, scan_cfg.points) * UNITS[units]
  stack = np.repeat(positions[None], len(distances), axis=0)
  stack[:, j] = positions[i] + distances[:, None] * axis
  label = f'R({symbols[i]}{i}-{symbols[j]}{j}) / bohr'
  return symbols, Surface(stack, distances, label)


def surface_of_cell_scan(positions: np.ndarray, scan_cfg, coordinate: float,
                         label: str) -> Surface:
  """The Surface of a scan of a periodic system's cell whose first geometry has its nuclei
  at `positions` (M, 3) bohr: the cell and the nuclei of geometry g scaled by f_g / f_0, the
  `points` factors f evenly spaced from `start` to `stop`; the coordinate of g is
  `coordinate` f_g / f_0 (described by `label`)."""
  factors = np.linspace(scan_cfg.start, scan_cfg.stop, scan_cfg.points)
  scales = factors / factors[0]
  return Surface(np.asarray(positions)[None] * scales[:, None, None], coordinate * scales,
                 label, scales)


def check_distances(symbols: tuple, positions: np.ndarray, where: str) -> None:
  """Refuses a geometry of `positions` (G, M, 3) bohr with two nuclei closer than
  MIN_DISTANCE, naming the pair and the geometry."""
  for g, r in enumerate(positions):
    distance = np.linalg.norm(r[:, None] - r[None], axis=-1) + np.diag(np.full(len(r), np.inf))
    a, b = np.unravel_index(np.argmin(distance), distance.shape)
    if distance[a, b] < MIN_DISTANCE:
      a, b = sorted((int(a), int(b)))
      raise InputError(f'{where}: in geometry {g}, nuclei {a} ({symbols[a]}) and {b} '
                       f'({symbols[b]}) are {distance[a, b]:.3g} bohr apart, closer than '
                       f'{MIN_DISTANCE} bohr')


def describe(surface: Surface) -> str:
  """'12 geometries, R(H0-H1) 0.5..6 bohr', or '5 geometries' for a list."""
  count = f'{len(surface.positions)} geometries'
  if surface.coordinate is None:
    return count
  quantity, _, unit = surface.label.partition(' / ')
  c = surface.coordinate
  return f'{count}, {quantity} {c[0]:g}..{c[-1]:g} {unit}'.rstrip()


def _formula(symbols: tuple) -> str:
  return ' '.join(symbols)
