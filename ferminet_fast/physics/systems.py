"""Atoms, molecules and periodic systems: nuclei (bohr), nuclear charges, spin-resolved
electron counts and, for crystals and the electron gas, the lattice (physics/lattice.py)."""

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional

import numpy as np

from ferminet_fast.errors import InputError
from ferminet_fast.physics import boundary as boundary_lib
from ferminet_fast.physics import ecp as ecp_lib
from ferminet_fast.physics import geometries as geometries_lib
from ferminet_fast.physics import lattice as lattice_lib
# The element table and the geometry readers, where they live (physics/geometries.py).
from ferminet_fast.physics.geometries import (BOHR_PER_ANGSTROM, ELEMENTS,  # noqa: F401
                                              atomic_number, parse_molecule)

# Unpaired electrons (n_up - n_down) of each element's ground state (Hund's rules; the
# measured ground terms of the 3d metals, e.g. Cr 7S (3d5 4s1) and Cu 2S (3d10 4s1)).
GROUND_STATE_SPIN = (1, 0, 1, 0, 1, 2, 3, 2, 1, 0, 1, 0, 1, 2, 3, 2, 1, 0,
                     1, 0, 1, 2, 3, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0)
# Exact non-relativistic, infinite-nuclear-mass ground-state energies of the neutral
# atoms, Ha (Chakravorty et al., Phys. Rev. A 47, 3649 (1993); H exactly -1/2).
EXACT_ATOM_ENERGY = {
    'H': -0.5, 'He': -2.903724, 'Li': -7.478060, 'Be': -14.667356, 'B': -24.65391,
    'C': -37.8450, 'N': -54.5892, 'O': -75.0673, 'F': -99.7339, 'Ne': -128.9376,
}



# The coordinate of a scan of a cell (Surface.label): the electron gas's r_s, a crystal's
# factor of its cell against the cell as given.
RS = 'r_s / bohr'
CELL_FACTOR = 'cell / cell given'


def is_periodic(sys_cfg) -> bool:
  """Whether the `system` settings describe a periodic system (a lattice or an electron gas)."""
  return bool(sys_cfg.lattice) or sys_cfg.rs is not None



class Geometry(NamedTuple):
  """Where a system's nuclei are: the data, as against the elements and electrons (which a
  set of geometries shares, and which are fixed when a step is built). A pytree: a stack of
  geometries, positions (G, M, 3) and scales (G,), goes through jax.vmap of a function that
  takes one."""
  positions: Any  # (M, 3) bohr, in the order of System.charges.
  # () the size of a periodic system's cell against its own (System.lattice): the cell's
  # vectors times `scale`, as its nuclei (`positions`) are; None: the cell as it is (and
  # always for open boundaries).
  scale: Any = None


def network_arguments(geometry: Optional[Geometry]) -> tuple:
  """The trailing arguments (atoms, scale) of a network's functions (networks.Network) for
  `geometry`: (positions,); for a scaled cell (positions, scale), or (None, scale) without
  nuclei (the electron gas: the network keeps its own centre); or () for None (the
  system's own nuclei, constants of the program)."""
  if geometry is None:
    return ()
  if geometry.scale is None:
    return (geometry.positions,)
  return (geometry.positions if geometry.positions.shape[-2] else None, geometry.scale)


def wrap_in(boundary) -> Callable:
  """wrap(x (B, 3N), geometry=None) -> x moved into the cell of `geometry` (a Geometry: its
  cell scaled by its scale; None: the system's own) by `boundary`, for mcmc.make_sweep."""
  return lambda x, geometry=None: boundary.wrap(x, None if geometry is None
                                                else geometry.scale)


@dataclasses.dataclass(frozen=True)
class System:
  """A molecule: `positions` (M, 3) in bohr, `charges` (M,) in e, electrons per spin. With
  effective core potentials, `charges` are the effective ones (Z - core electrons), the
  electrons are the valence electrons, and `ecp` holds one ecp.Ecp or None per atom.
  `states` > 1: the lowest `states` states of this spin sector together (NES-VMC);
  `exact_energy` is the ground state's. `boundary`: open (boundary.Open) or periodic in
  the simulation cell at a twist (boundary.Periodic: a crystal's supercell, whose nuclei
  `positions` holds, or the electron gas's, with no nuclei)."""
  symbols: tuple
  positions: np.ndarray
  charges: np.ndarray
  n_up: int
  n_down: int
  name: str
  exact_energy: Optional[float] = None
  ecp: tuple = ()
  states: int = 1
  boundary: boundary_lib.Boundary = boundary_lib.OPEN
  primitive: Optional[lattice_lib.Lattice] = None  # A crystal's primitive cell (None otherwise).
  # A set of geometries of these nuclei (a list or a scan), whose first is `positions`;
  # None for one geometry.
  surface: Optional[geometries_lib.Surface] = None

  @property
  def lattice(self) -> Optional[lattice_lib.Lattice]:
    """The simulation cell of a periodic system; None for open boundaries."""
    return self.boundary.lattice

  @property
  def twist(self) -> tuple:
    """The twist k_s (Bloch wavevector of the simulation cell) in fractional coordinates of
    its reciprocal vectors; psi(r_i + L) = exp(i k_s . L) psi(r_i). Gamma if open."""
    return self.boundary.twist

  @property
  def periodic(self) -> bool:
    return self.boundary.periodic

  @property
  def geometry(self) -> Geometry:
    """The system's own geometry (numpy, bohr)."""
    return Geometry(np.asarray(self.positions))

  @property
  def geometry_count(self) -> int:
    """G, the number of geometries: the surface's, or 1 without one."""
    return 1 if self.surface is None else len(self.surface.positions)

  @property
  def geometries(self) -> Geometry:
    """Every geometry of the system, stacked: positions (G, M, 3) bohr (numpy), with a
    scan of the cell its scales (G,), the surface's or the system's own as a set of one."""
    if self.surface is None:
      return Geometry(np.asarray(self.positions)[None])
    return Geometry(np.asarray(self.surface.positions), self.surface.scales)

  @property
  def complex(self) -> bool:
    """Whether the wavefunction is complex: a periodic system away from the Gamma point."""
    return self.boundary.complex

  @property
  def has_ecp(self) -> bool:
    return any(e is not None for e in self.ecp)

  @property
  def electrons(self) -> tuple:
    return (self.n_up, self.n_down)

  @property
  def n_electrons(self) -> int:
    return self.n_up + self.n_down

  @property
  def exact_reported_energy(self) -> Optional[float]:
    """Ha, the exact value of the energy a run reports: the ground state's with one state;
    None with several (the run reports the states' sum)."""
    return self.exact_energy if self.states == 1 else None

  @property
  def nuclear_repulsion(self) -> float:
    """V_nn = sum_{a<b} Z_a Z_b / |R_a - R_b|, Ha (open boundaries; a periodic system's is
    part of its Ewald sum, physics/ewald.py)."""
    if self.periodic:
      raise ValueError('nuclear_repulsion is for open boundaries; use the Ewald sum')
    e = 0.0
    for a in range(len(self.charges)):
      for b in range(a):
        distance = np.linalg.norm(self.positions[a] - self.positions[b])
        e += self.charges[a] * self.charges[b] / distance
    return float(e)


def read_xyz(path: str) -> tuple:
  """Symbols and positions (bohr) from an .xyz file: the atom count, a comment line, then
  one 'SYMBOL x y z' line per atom in angstrom (the format's unit; extra columns ignored).
  Its first frame; what follows is ignored."""
  return geometries_lib.read_frames(path, f'config.system.molecule {path!r}', first_only=True)[0]


def _spin_counts(n_electrons: int, spin: int, where: str) -> tuple:
  if n_electrons <= 0:
    raise InputError(f'{where}: the system has {n_electrons} electrons; it needs at least one')
  if abs(spin) > n_electrons or (n_electrons - spin) % 2:
    raise InputError(f'{where}: spin {spin} is impossible with {n_electrons} electrons '
                     f'(n_up - n_down must have the parity of the electron count)')
  n_up = (n_electrons + spin) // 2
  return n_up, n_electrons - n_up


def make_system(sys_cfg) -> System:
  """Builds a System from the `config.system` block, checking it for consistency."""
  geometries_lib.check(sys_cfg, is_periodic(sys_cfg))
  if sys_cfg.rs is not None:
    return electron_gas(sys_cfg)
  symbols, positions, surface = nuclei(sys_cfg)
  lattice = primitive = None
  if sys_cfg.lattice:
    symbols, positions, lattice = crystal(sys_cfg, symbols, positions)
    primitive = lattice_lib.make_lattice(np.asarray(sys_cfg.lattice, np.float64) * {
        'bohr': 1.0, 'angstrom': BOHR_PER_ANGSTROM}[sys_cfg.units], dims=sys_cfg.periodic_dims)
    if sys_cfg.scan.cell:  # The system's own cell is the scan's first.
      first = sys_cfg.scan.start
      lattice, primitive = (lattice_lib.scaled(c, first) for c in (lattice, primitive))
      positions = positions * first
      surface = geometries_lib.surface_of_cell_scan(positions, sys_cfg.scan, first,
                                                    CELL_FACTOR)
  charges = np.array([atomic_number(s, 'config.system') for s in symbols], dtype=np.float64)
  full_charges = charges.copy()
  ecps = tuple(ecp_lib.load(name, s) if name else None
               for s, name in zip(symbols, ecp_names(sys_cfg.ecp, symbols)))
  charges = charges - np.array([e.n_core if e else 0 for e in ecps], dtype=np.float64)
  n_core = int(full_charges.sum() - charges.sum())
  n_electrons = int(charges.sum()) - int(sys_cfg.charge)

  if sys_cfg.electrons:
    electrons = tuple(sys_cfg.electrons)
    if len(electrons) != 2 or not all(isinstance(n, int) and n >= 0 for n in electrons):
      raise InputError(f'config.system.electrons must be (n_up, n_down) with non-negative '
                       f'integers, got {sys_cfg.electrons!r}')
    if sum(electrons) != n_electrons:
      raise InputError(f'config.system.electrons = {electrons} holds {sum(electrons)} electrons, '
                       f'but nuclear charge {int(charges.sum())} and charge {sys_cfg.charge} '
                       f'give {n_electrons}')
    if sys_cfg.spin is not None and electrons[0] - electrons[1] != sys_cfg.spin:
      raise InputError(f'config.system.electrons = {electrons} has spin '
                       f'{electrons[0] - electrons[1]}, but config.system.spin = {sys_cfg.spin}')
    n_up, n_down = electrons
    if n_up + n_down == 0:
      raise InputError('config.system.electrons: the system needs at least one electron')
  else:
    if n_electrons <= 0:
      raise InputError(f'config.system.charge = {sys_cfg.charge} leaves {n_electrons} electrons')
    spin = sys_cfg.spin
    if spin is None:
      if lattice is None and len(symbols) == 1 and n_electrons + n_core <= len(ELEMENTS):
        # The isoelectronic neutral atom's ground state (core electrons are paired).
        spin = GROUND_STATE_SPIN[n_electrons + n_core - 1]
      else:
        spin = n_electrons % 2
    n_up, n_down = _spin_counts(n_electrons, spin, 'config.system.spin')
  if n_up < n_down:
    raise InputError(f'config.system: n_up = {n_up} < n_down = {n_down}; by convention the '
                     'majority spin is up (use a positive spin)')

  if lattice is not None and lattice.dims < 3 and n_up + n_down != int(charges.sum()):
    kind = 'slab' if lattice.dims == 2 else 'chain'
    raise InputError(f'config.system.charge = {sys_cfg.charge}: a {kind} must be neutral (a '
                     f'charged {kind} has an infinite energy per cell)')
  exact = sys_cfg.exact_energy
  neutral_ground = (lattice is None and len(symbols) == 1 and not n_core
                    and n_up + n_down == charges[0]
                    and n_up - n_down == GROUND_STATE_SPIN[int(charges[0]) - 1])
  if exact is None and neutral_ground:
    exact = EXACT_ATOM_ENERGY.get(symbols[0])
  name = sys_cfg.name or ''.join(
      s + (str(symbols.count(s)) if symbols.count(s) > 1 else '') for s in dict.fromkeys(symbols))
  return System(symbols=symbols, positions=positions, charges=charges, n_up=int(n_up),
                n_down=int(n_down), name=name, exact_energy=exact, ecp=ecps,
                states=int(sys_cfg.states), boundary=boundary_of(lattice, sys_cfg.twist),
                primitive=primitive, surface=surface)


def nuclei(sys_cfg) -> tuple:
  """(symbols, positions (M, 3) bohr, Surface or None) of `atom`, `molecule` or a set of
  geometries; with a set, the positions are its first geometry's."""
  if sys_cfg.atom and sys_cfg.molecule or not (
      sys_cfg.atom or sys_cfg.molecule or sys_cfg.geometries):
    raise InputError('config.system: give exactly one of atom (a symbol) or molecule '
                     "(e.g. 'H 0 0 0; H 0 0 1.4'), or a set of geometries")
  symbols = positions = surface = None
  if sys_cfg.atom:
    symbols = (sys_cfg.atom,)
    atomic_number(sys_cfg.atom, 'config.system.atom')
    positions = np.zeros((1, 3))
  elif sys_cfg.molecule.strip().lower().endswith('.xyz'):
    symbols, positions = read_xyz(sys_cfg.molecule.strip())
  elif sys_cfg.molecule:
    symbols, positions = parse_molecule(sys_cfg.molecule, sys_cfg.units)
  if geometries_lib.given(sys_cfg) and not sys_cfg.scan.cell:
    base = None if symbols is None else (symbols, positions)
    symbols, surface = geometries_lib.read(sys_cfg, base)
    positions = surface.positions[0].copy()
  return symbols, positions, surface


def at_scale(system: System, scale: float) -> System:
  """The system of one geometry of a scan of its cell: its cell (and its primitive cell)
  and nuclei scaled by `scale` against its own, no set of geometries."""
  lattice = lattice_lib.scaled(system.lattice, scale)
  primitive = None if system.primitive is None else lattice_lib.scaled(system.primitive, scale)
  return dataclasses.replace(system, positions=np.asarray(system.positions) * scale,
                             boundary=boundary_lib.Periodic(lattice, system.twist),
                             primitive=primitive, surface=None)


def boundary_of(lattice: Optional[lattice_lib.Lattice], twist) -> boundary_lib.Boundary:
  """Periodic boundaries in `lattice` at the fractional `twist`; open ones without a lattice."""
  if lattice is None:
    return boundary_lib.OPEN
  return boundary_lib.Periodic(lattice, twist)


def crystal(sys_cfg, symbols: tuple, positions: np.ndarray) -> tuple:
  """(symbols, positions (bohr), Lattice) of the simulation cell: the primitive cell's
  `lattice` (in `units`) repeated by `supercell`, its nuclei copied to each cell."""
  scale = {'bohr': 1.0, 'angstrom': BOHR_PER_ANGSTROM}[sys_cfg.units]
  primitive = lattice_lib.make_lattice(np.asarray(sys_cfg.lattice, np.float64) * scale,
                                       dims=sys_cfg.periodic_dims)
  lattice_lib.check_nuclei(primitive, symbols, positions)
  if not sys_cfg.supercell:
    return symbols, positions, primitive
  cell, matrix = lattice_lib.supercell(primitive, sys_cfg.supercell)
  symbols, positions = lattice_lib.replicate(primitive, matrix, symbols, positions)
  return symbols, positions, cell


def electron_gas(sys_cfg) -> System:
  """The homogeneous electron gas of `electrons` at density `rs` in a cell of shape `cell`:
  no nuclei, a uniform neutralising background (in the Ewald sum)."""
  for key in ('atom', 'molecule', 'lattice', 'supercell', 'ecp'):
    if sys_cfg[key]:
      raise InputError(f'config.system.rs = {sys_cfg.rs} describes the electron gas, which '
                       f'has no {key}: set config.system.{key} to its empty value')
  electrons = tuple(sys_cfg.electrons)
  if (len(electrons) != 2 or not all(isinstance(n, int) and n >= 0 for n in electrons)
      or sum(electrons) == 0):
    raise InputError('config.system.rs: the electron gas needs config.system.electrons = '
                     f'(n_up, n_down), at least one electron, got {sys_cfg.electrons!r}')
  n_up, n_down = electrons
  if n_up < n_down:
    raise InputError(f'config.system.electrons: n_up = {n_up} < n_down = {n_down}; by '
                     'convention the majority spin is up')
  rs, surface = sys_cfg.rs, None
  if sys_cfg.scan.cell:  # The system's own density is the scan's first.
    rs = rs * sys_cfg.scan.start
    surface = geometries_lib.surface_of_cell_scan(np.zeros((0, 3)), sys_cfg.scan, rs, RS)
  lattice = lattice_lib.electron_gas(rs, sys_cfg.cell, n_up + n_down)
  name = sys_cfg.name or f'heg_rs{sys_cfg.rs:g}_{sys_cfg.cell}_{n_up}_{n_down}'
  return System(symbols=(), positions=np.zeros((0, 3)), charges=np.zeros((0,)), n_up=n_up,
                n_down=n_down, name=name, exact_energy=sys_cfg.exact_energy,
                ecp=(), states=int(sys_cfg.states),
                boundary=boundary_lib.Periodic(lattice, sys_cfg.twist), surface=surface)


def ecp_names(setting, symbols: tuple) -> tuple:
  """The ECP name of each atom ('' for all electrons) from `config.system.ecp`: '' (none),
  one name for every atom heavier than helium, or {symbol: name} (also written
  'Fe:ccecp,S:ccecp')."""
  if isinstance(setting, str) and ':' in setting:
    pairs = [entry.split(':') for entry in setting.replace(' ', '').split(',') if entry]
    if any(len(p) != 2 or not all(p) for p in pairs):
      raise InputError(
          f"config.system.ecp = {setting!r}: write 'SYMBOL:NAME,SYMBOL:NAME'")
    twice = sorted({s for s, _ in pairs if [q for q, _ in pairs].count(s) > 1})
    if twice:
      raise InputError(f'config.system.ecp = {setting!r} names {", ".join(twice)} more than once')
    setting = dict(pairs)
  if isinstance(setting, str):
    return tuple(setting if setting and atomic_number(s, 'config.system') > 2 else ''
                 for s in symbols)
  if not isinstance(setting, Mapping) and not hasattr(setting, 'items'):
    raise InputError(f'config.system.ecp must be a name or {{symbol: name}}, got {setting!r}')
  setting = dict(setting.items())
  for symbol in setting:
    atomic_number(symbol, 'config.system.ecp')
    if symbol not in symbols:
      raise InputError(f'config.system.ecp names {symbol}, which is not in the system')
  return tuple(str(setting.get(s, '')) for s in symbols)


def spin_blocks(n_up: int, n_down: int) -> list:
  """[(name, lo, hi)] of the spins that have electrons: electrons lo..hi-1, up first."""
  return [(name, lo, hi) for name, lo, hi in (('up', 0, n_up), ('down', n_up, n_up + n_down))
          if hi > lo]


def electron_homes(system: System) -> np.ndarray:
  """Nucleus index of each electron (up electrons first), used to place initial walkers.

  Electrons fill the nuclei in proportion to their charges, alternating spins on each
  nucleus, so that initial walkers start near a sensible atomic-like configuration.
  """
  m = len(system.charges)
  count = system.charges.astype(int).copy()
  surplus = int(count.sum()) - system.n_electrons  # Positive for cations.
  order = np.argsort(-count, kind='stable')
  i = 0
  while surplus != 0:
    a = order[i % m]
    if surplus > 0 and count[a] > 0:
      count[a] -= 1
      surplus -= 1
    elif surplus < 0:
      count[a] += 1
      surplus += 1
    i += 1
  up_per_atom = (count + 1) // 2
  down_per_atom = count // 2
  # Move spins between nuclei until the global (n_up, n_down) is met.
  while up_per_atom.sum() > system.n_up:
    a = int(np.argmax(up_per_atom - down_per_atom + 1e-3 * up_per_atom))
    up_per_atom[a] -= 1
    down_per_atom[a] += 1
  while up_per_atom.sum() < system.n_up:
    a = int(np.argmax(down_per_atom))
    up_per_atom[a] += 1
    down_per_atom[a] -= 1
  up = np.repeat(np.arange(m), up_per_atom)
  down = np.repeat(np.arange(m), down_per_atom)
  return np.concatenate([up, down]).astype(np.int32)


def describe(system: System) -> str:
  atoms = ', '.join(f'{s}({p[0]:.4f}, {p[1]:.4f}, {p[2]:.4f})'
                    for s, p in zip(system.symbols, system.positions))
  exact = f', exact {system.exact_energy:.6f} Ha' if system.exact_energy is not None else ''
  ecps = sorted({f'{s} {e.name} ({e.n_core} core electrons)'
                 for s, e in zip(system.symbols, system.ecp) if e is not None})
  ecp = f'; ECP {", ".join(ecps)}' if ecps else ''
  states = f'; the lowest {system.states} states' if system.states > 1 else ''
  if system.surface is not None:
    states += (f'; {geometries_lib.describe(system.surface)}'
               + (' (the first shown)' if system.surface.coordinate is None else ''))
  if not system.periodic:
    cell = '; open boundaries'
  else:
    kind = ('electron gas' if not system.symbols else
            {2: 'slab (periodic along a1, a2)', 1: 'chain (periodic along a1)'}.get(
                system.lattice.dims, 'periodic'))
    twist = ('Gamma point' if not system.complex else
             'twist ({:g}, {:g}, {:g}), complex wavefunction'.format(*system.twist))
    cell = f'; {kind}, {lattice_lib.describe(system.lattice)}, {twist}'
  return (f'{system.name}: {atoms or "no nuclei"} bohr; electrons (up, down) = '
          f'{system.electrons}{ecp}{states}{exact}{cell}')

