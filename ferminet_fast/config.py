"""Settings: every key declared once, with its default, meaning, unit and allowed values.

`SETTINGS` is the single declaration. The defaults (`default()`), validation
(`validate`), the resume-compatibility check (`structural_differences`, from the keys
marked structural) and reading a run's config.json back (`from_json`) all come from it.

Key names follow DeepMind FermiNet where the concept is the same, so a FermiNet config
translates line by line. Per-system files in `configs/` start from `default()` and change
what they need; the result is locked, so a misspelt key is an error rather than a
silently ignored setting. After validation a run hands each module its own block,
frozen (`freeze`).
"""

import math
import reprlib
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
from ml_collections import config_dict

from ferminet_fast.environment import packages
from ferminet_fast.errors import InputError
from ferminet_fast.optimizers import optim
from ferminet_fast.physics import geometries, laplacians, relaxation, systems
from ferminet_fast.physics import lattice as lattice_lib
from ferminet_fast.vmc import loss
from ferminet_fast.wavefunction import envelopes, jastrows, networks

# The swappable pieces: each keys its records by name in one table beside its code (name,
# factory, what it needs and suits, choices.py); the keys that choose one take their allowed
# names, and their help, from there.
LAPLACIANS = laplacians.METHODS
OPTIMIZERS = optim.OPTIMIZERS
ENVELOPES = envelopes.ENVELOPES
JASTROWS = jastrows.JASTROWS
ANSATZES = networks.ANSATZES
CLIPPING = loss.CLIPPING
# Which parameters the stages after training take from a checkpoint: the moving average of
# the last updates (optim.average_fraction) or the last.
PARAMETERS = ('average', 'last')


def listed(table) -> str:
  """"'name' (what it is), ..." of a table of choices, for a key's help."""
  return ', '.join(f"'{c.name}' ({c.doc}{', needs ' + c.package if c.package else ''})"
                   for c in table.values())


class Setting(NamedTuple):
  """One key: its default, what it means (unit, allowed values), how its value is checked,
  and whether it fixes the shapes of the saved state (then it cannot change on resume)."""
  default: Any
  doc: str
  check: Optional[Callable[[Any], Optional[str]]] = None  # value -> what is wrong, or None.
  structural: bool = False
  # The type of a key whose default is None; `object` for a key that takes values of
  # several types (such as 'auto' or a number).
  kind: Optional[type] = None


def one_of(*allowed) -> Callable:
  """A check that the value is one of `allowed`, which it keeps as `.allowed` so that the
  values a key takes can be listed (and None among them makes the key nullable)."""
  def check(v):
    return None if v in allowed else f'is not one of {", ".join(map(str, allowed))}'
  check.allowed = allowed
  return check


def _positive_int(v):
  return None if v > 0 else 'must be a positive integer'


def _count(v):
  ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
  return None if ok else 'must be an integer >= 0'


def _finite(v) -> bool:
  """Not an infinite or NaN float (an integer of any size is finite)."""
  return not isinstance(v, float) or math.isfinite(v)


def _non_negative(v):
  if v is None:
    return None
  if not _finite(v):
    return 'must be a finite number'
  return None if v >= 0 else 'must be >= 0'


def auto_or_int(minimum: int) -> Callable:
  """'auto' or an integer >= `minimum` (not a bool)."""
  def check(v):
    ok = v == 'auto' or (isinstance(v, int) and not isinstance(v, bool) and v >= minimum)
    return None if ok else f"must be 'auto' or an integer >= {minimum}"
  return check


def _positive(v):
  if v is None:
    return None
  if not _finite(v):
    return 'must be a finite number'
  return None if v > 0 else 'must be > 0'


def in_range(low: float, high: float, closed: str) -> Callable:
  """Within low..high; `closed` says which ends belong: '[]', '[)', '(]' or '()'."""
  def check(v):
    ok = ((v >= low if closed[0] == '[' else v > low) and
          (v <= high if closed[1] == ']' else v < high))
    return None if ok else f'must lie in {closed[0]}{low}, {high}{closed[1]}'
  return check


def _ecp_setting(v):
  if isinstance(v, str) or (hasattr(v, 'items') and
                            all(isinstance(k, str) and isinstance(n, str) for k, n in v.items())):
    return None
  return "must be '' (none), an ECP name, or {symbol: name}"


def _numbers(v, shape: tuple) -> bool:
  """Whether v is nested tuples/lists of finite numbers (not bools) of exactly `shape`."""
  if not shape:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
  return (isinstance(v, (tuple, list)) and len(v) == shape[0] and
          all(_numbers(e, shape[1:]) for e in v))


def _lattice(v):
  ok = v == () or v == [] or _numbers(v, (3, 3))
  return None if ok else 'must be () (open boundaries) or three vectors of three numbers'


def _supercell(v):
  ok = (v == () or v == [] or
        (_numbers(v, (3,)) or _numbers(v, (3, 3))) and all(
            float(e) == int(e) for e in (v if _numbers(v, (3,)) else [x for r in v for x in r])))
  return None if ok else 'must be () (one cell), 3 integers or an integer 3 x 3 matrix'


def _twist(v):
  return None if _numbers(v, (3,)) else 'must be three fractional coordinates'


def _taus(v):
  ok = v == 'auto' or (isinstance(v, (tuple, list)) and v and all(
      isinstance(t, (int, float)) and not isinstance(t, bool) and _finite(t) and t > 0
      for t in v))
  return None if ok else "must be 'auto' or a non-empty tuple of finite time steps > 0 (Ha^-1)"


def _layer_widths(dims):
  if (isinstance(dims, (tuple, list)) and dims and
      all(isinstance(d, (tuple, list)) and len(d) == 2 and
          all(isinstance(w, int) and w > 0 for w in d) for d in dims)):
    return None
  return ('must be a non-empty tuple of (one_electron_width, two_electron_width) positive '
          'integer pairs')


# debug.seed, evaluate's and dmc's --seed: what JAX's random key takes, a 64-bit integer.
SEEDS = (-2**63, 2**63 - 1)
MAX_STATES = 16  # system.states: each step costs about K times the ground state's.

S = Setting
SETTINGS = {
    'batch_size': S(256, 'Walkers (electron configurations) per step, summed over devices.',
                    _positive_int, structural=True),
    'precision': S('float32', "'float32' or 'float64' for every array of the run.",
                   one_of('float32', 'float64'), structural=True),
    'matmul_precision': S('highest', "Matrix products of float32 arrays: 'highest' (true "
                          "float32) or 'default' (the device's default: TF32 on NVIDIA GPUs "
                          'since Ampere, about three significant digits, which moves local '
                          'energies by up to tens of mHa each, BENCHMARKS.md). CPUs always '
                          'multiply in true float32.', one_of('highest', 'default')),

    # The physical system.
    'system.atom': S('He', "Element symbol of a single atom at the origin; '' when "
                     '`molecule` is used.', structural=True),
    'system.molecule': S('', "Nuclei as 'SYMBOL x y z; SYMBOL x y z; ...' (the pyscf atom "
                         'string), in `units`; or the path of an .xyz file (angstrom, as the '
                         'format says; read again on resume and evaluation).', structural=True),
    'system.units': S('bohr', "Units of the coordinates of `molecule` and `geometries` (when "
                      "given as text), of `lattice` and of the scan's distances: 'bohr' or "
                      "'angstrom'.", one_of('bohr', 'angstrom'), structural=True),
    # A set of geometries of one system, over which one network is trained (a potential
    # energy surface): a list or file of geometries, or a scan of one interatomic distance
    # of `molecule`, or of a periodic system's cell (an equation of state;
    # physics/geometries.py). Not for atoms or several states; a periodic system only by
    # the scan of its cell.
    'system.geometries': S('', "A set of geometries: a tuple of molecule strings ('SYMBOL x "
                           "y z; ...' in `units`, as `molecule`), or the path of an .xyz file "
                           'of one or more frames one after another (angstrom); every '
                           'geometry holds the same elements in the same order (those of '
                           "`molecule`, if given). '' for none. The run's nuclei start at the "
                           'first geometry.', geometries.geometries_problem, structural=True,
                           kind=object),
    'system.scan.atoms': S((), 'A scan of one interatomic distance of `molecule`: the pair (i, '
                           'j) of atom indices (from 0, i != j); atom j moves along the axis '
                           'from atom i to atom j, the other atoms stay. () for no scan.',
                           geometries.pair_problem, structural=True, kind=object),
    'system.scan.cell': S(False, "A scan of a periodic system's cell instead of a distance "
                          '(scan.atoms = ()): its lattice vectors and nuclei, or the '
                          "electron gas's r_s, multiplied by each factor of the scan.",
                          structural=True),
    'system.scan.start': S(None, 'The scanned distance |R_j - R_i| of the first geometry, in '
                           '`units`, > 0; with `cell`, the factor of its cell (1: the cell '
                           'as given). None: no scan.', _positive, structural=True, kind=float),
    'system.scan.stop': S(None, 'The scanned distance (or factor) of the last geometry, > 0 '
                          '(smaller or larger than `start`). None: no scan.', _positive,
                          structural=True, kind=float),
    'system.scan.points': S(0, 'Geometries of the scan, >= 1: distances (or factors) evenly '
                            'spaced from `start` to `stop`, both included. 0: no scan.',
                            _count, structural=True),
    # Geometry optimisation (physics/relaxation.py, stages/relax.py): the nuclei move to
    # the energy minimum while the wavefunction trains; one geometry of a molecule, one
    # state, no ECPs. The path and the final geometry go to <run>/relax.json; evaluation
    # and DMC of the run take the geometry the nuclei had at its checkpoint.
    'system.relax': S(False, 'Relax the geometry: every `relax.every` steps the nuclei move '
                      'along the mean force of those steps (the `relax` settings), until the '
                      'stopping criterion holds; then they stay at the final geometry. The '
                      'nuclei start at `molecule`.', structural=True),
    'system.charge': S(0, 'Total charge in units of e (positive: electrons removed).',
                       structural=True),
    'system.spin': S(None, "n_up - n_down. None: the ground-state spin for atoms (Hund's "
                     'rules), else the lowest.', structural=True, kind=int),
    'system.electrons': S((), '(n_up, n_down) given explicitly; () derives them from charge '
                          'and spin. Must agree with both.', structural=True),
    'system.states': S(1, 'Number of electronic states K (the lowest K of this spin '
                       'sector) trained together by natural excited states (NES-VMC, Pfau et '
                       'al., Science 385, eadn0137 (2024)): the network gives K wavefunctions '
                       'and the walkers sample K configurations each; 1 is the ground state '
                       f'alone. At most {MAX_STATES}.', in_range(1, MAX_STATES, '[]'),
                       structural=True),
    'system.ecp': S('', "Effective core potentials: '' for all electrons; the name of a "
                    "pyscf ECP (e.g. 'ccecp') for every atom heavier than He; or {symbol: "
                    "name} for chosen elements (on the command line 'Fe:ccecp,S:ccecp'). "
                    'Those atoms lose their core electrons and their charge becomes Z - '
                    'core; the ECP acts on the valence electrons (physics/ecp.py).',
                    _ecp_setting, structural=True, kind=object),
    # Periodic systems (physics/lattice.py, physics/ewald.py): a crystal gives `lattice`
    # and its primitive cell's nuclei in `molecule` (or `atom`); the electron gas gives
    # `rs` and `cell` (no nuclei, `atom` and `molecule` empty) and `electrons`.
    'system.lattice': S((), 'Lattice vectors of the primitive cell, three rows (a1, a2, a3) '
                        "in `units`, right-handed; () for open boundaries (molecules).",
                        _lattice, structural=True, kind=object),
    'system.rs': S(None, 'Electron gas: density parameter r_s, bohr (volume per electron 4 '
                   'pi r_s^3 / 3); the cell holds `electrons` and no nuclei, with a uniform '
                   'neutralising background. None: not an electron gas.', _positive,
                   structural=True, kind=float),
    'system.cell': S('sc', "Electron gas: shape of the cell of volume N 4 pi r_s^3 / 3, 'sc' "
                     "(cube), 'bcc' or 'fcc' (primitive cells of those lattices).",
                     one_of('sc', 'bcc', 'fcc'), structural=True),
    'system.supercell': S((), 'Crystal: the simulation cell as a supercell of the primitive '
                          'one, 3 integers (n1 a1, n2 a2, n3 a3) or an integer 3 x 3 matrix '
                          'S (rows S . (a1, a2, a3)); () is the primitive cell. Its nuclei are '
                          "the primitive cell's, copied to each cell.", _supercell,
                          structural=True, kind=object),
    'system.twist': S((0.0, 0.0, 0.0), 'Twist (Bloch wavevector k_s of the simulation cell) '
                      'in fractional coordinates of its reciprocal vectors: psi(r_i + L) = '
                      'exp(i k_s . L) psi(r_i) for a lattice vector L. (0, 0, 0) is the Gamma '
                      'point (a real wavefunction); any other twist makes it complex (the '
                      'electron gas and crystals alike; a crystal is pretrained on pyscf.pbc '
                      "orbitals at that k-point). Several twists: one run each, averaged by "
                      'python -m ferminet_fast.evaluate --twist_average.', _twist,
                      structural=True),
    'system.periodic_dims': S(3, 'Number of periodic dimensions of a crystal: 3 (bulk); 2 (a '
                              'slab: periodic along a1 and a2, which lie in the xy plane, '
                              'open along z, where a3 must point; a neutral cell, twist (t1, '
                              't2, 0)); or 1 (a chain: periodic along a1, which must point '
                              'along x, open in the yz plane, where a2 and a3 lie and only '
                              'set the cell\'s extent; a neutral cell, supercell (n, 1, 1), '
                              'twist (t1, 0, 0)).', one_of(1, 2, 3), structural=True),
    'system.exact_energy': S(None, 'Reference (exact) energy in Ha for reporting the error; '
                             'None looks neutral atoms H-Ne up. A config file\'s value is '
                             'cleared when the command line gives another system (atom, '
                             'molecule, charge, spin, ECP, cell...) but no exact energy.',
                             kind=float),
    'system.name': S('', "Label for logs and the run directory; '' derives it from the "
                     'geometry.'),

    # The wavefunction: every key fixes the parameters' shapes.
    'network.network_type': S(networks.FERMINET.name, f'Wavefunction ansatz: '
                              f'{listed(ANSATZES)}. Each uses the determinant, envelope and '
                              'Jastrow below.', one_of(*ANSATZES), structural=True),
    'network.determinants': S(2, 'Number of determinants summed in psi.', _positive_int,
                              structural=True),
    'network.full_det': S(True, 'True: one N x N determinant over all electrons; False: one '
                          'per spin (block diagonal).', structural=True),
    'network.envelope': S(envelopes.ISOTROPIC.name, f'Orbital envelope: {listed(ENVELOPES)}; for '
                          'molecules ' + ', '.join(f"'{k.name}'" for k in ENVELOPES.values()
                                                   if k.molecule) + ', for crystals '
                          + ', '.join(f"'{k.name}'" for k in ENVELOPES.values() if k.crystal)
                          + ', for the electron gas '
                          + ', '.join(f"'{k.name}'" for k in ENVELOPES.values() if k.gas)
                          + "; 'auto': 'planewave' for the electron gas, else 'isotropic'.",
                          one_of(*ENVELOPES, 'auto'), structural=True),
    'network.jastrow': S(jastrows.SIMPLE_EE.name, f'Jastrow factor: {listed(JASTROWS)}.',
                         one_of(*JASTROWS), structural=True),
    'network.ferminet.hidden_dims': S(((32, 8), (32, 8)), 'Widths (one-electron, '
                                      'two-electron) of each layer; its length is the number '
                                      'of layers.', _layer_widths, structural=True),
    'network.psiformer.layers': S(2, 'Self-attention layers.', _positive_int, structural=True),
    'network.psiformer.heads': S(4, 'Attention heads per layer.', _positive_int,
                                 structural=True),
    'network.psiformer.head_dim': S(16, 'Features per head; the stream width is heads * '
                                    'head_dim.', _positive_int, structural=True),
    'network.psiformer.layer_norm': S(False, 'Layer-normalise the input of each sublayer.',
                                      structural=True),
    # LapNet: Psiformer's layers with sparse derivative attention; the paper's 4 layers of
    # 4 heads of 64 are scaled as the Psiformer's are here.
    'network.lapnet.layers': S(2, 'Sparse derivative attention layers.', _positive_int,
                               structural=True),
    'network.lapnet.heads': S(4, 'Attention heads per layer.', _positive_int,
                              structural=True),
    'network.lapnet.head_dim': S(16, 'Features per head; both streams are heads * head_dim '
                                 'wide.', _positive_int, structural=True),
    'network.lapnet.layer_norm': S(False, 'Layer-normalise the input of each sublayer.',
                                   structural=True),
    'network.lapnet.sparse_layers': S(2, 'Residual tanh dense layers of the per-electron '
                                      'stream (queries and keys) between attention layers; '
                                      '0: every layer attends with the embedding.', _count,
                                      structural=True),

    # Optimisation.
    'optim.iterations': S(2000, 'Parameter updates (training steps).', _non_negative),
    # A wall-time budget, per invocation: a resumed run gets it afresh. Learning-rate
    # annealing (optim.lr.anneal) goes towards whichever end comes first, this budget's or
    # optim.iterations'.
    'optim.seconds': S(0.0, 'Seconds of training loop (after compilation, pretraining and '
                       'burn-in) after which the run stops at the end of the step that '
                       'reached them, as at optim.iterations: a final checkpoint, the result '
                       'and the stages after; 0: no budget.', _non_negative),
    'optim.geometries_per_step': S(0, 'Over a set of geometries (`system.geometries` or '
                                   '`system.scan`): how many of them each step draws at '
                                   'random, without replacement, to sweep and train on (their '
                                   'chains of batch_size / G walkers each; the others wait). '
                                   '0: all of them, every step.', _count),
    'optim.optimizer': S(optim.KFAC.name, f'The optimizer: {listed(OPTIMIZERS)}.',
                         one_of(*OPTIMIZERS), structural=True),
    'optim.laplacian': S('best', f'Laplacian of log|psi| for the kinetic energy: '
                         f"{listed(LAPLACIANS)}; 'auto' (times "
                         + ', '.join(m.name for m in LAPLACIANS.values() if m.timed)
                         + " before training and uses the fastest), or 'best' (the fastest in "
                         "our benchmarks: with folx installed, 'folx_sparse' for molecules of "
                         f'{laplacians.SPARSE_PAYS_FROM} electrons or more in one state on a '
                         "CPU, else 'folx'; without it 'jacfwd'). All are exact.",
                         one_of(*LAPLACIANS, 'auto', 'best')),
    'optim.energy_chunk_size': S('auto', "Walkers per chunk (summed over devices) when "
                                 "evaluating local energies: 'auto' (on CPU, chunks whose "
                                 'Laplacian intermediates stay in cache, markedly faster '
                                 'from about ten electrons; on GPU/TPU all at once; either way '
                                 "halved until the compiled step fits the device's free "
                                 'memory), 0 (all at '
                                 'once) or a number of walkers (also bounds the memory of '
                                 'the Laplacian); over a set of geometries, each '
                                 "geometry's chunk is its share (at least one walker). "
                                 'Exact either way.', auto_or_int(0),
                                 kind=object),
    'optim.clip_local_energy': S(5.0, 'Local energies used in the gradient are clipped to '
                                 'centre +- k * scale; this is k. 0 disables clipping. The '
                                 'reported energy is always the unclipped mean.', _non_negative),
    'optim.clip_method': S(loss.MEDIAN_ABSDEV.name, 'How centre and scale are taken: '
                           f'{listed(CLIPPING)}.', one_of(*CLIPPING)),
    'optim.node_cutoff': S(0.0, 'bohr: each walker\'s weight in the gradient is multiplied by '
                           'Pathak and Wagner\'s factor within this estimated distance of a '
                           'node (1 / |grad log|psi||), where its score d log|psi| / d params '
                           'diverges and the clipping does not reach it: finite moments of '
                           'every term at a bias of order node_cutoff^3 (vmc/loss.py). 0: '
                           'not regularised. One state only.', in_range(0, 1, '[]')),
    # KFAC's norm constraint bounds each step's length in its own block-diagonal curvature,
    # which can understate the step's length in the whole Fisher metric at the walkers
    # (stats.csv's fisher_step against model_step); this bounds that length itself, at the
    # cost of one forward-mode derivative of log|psi| over the walkers per step.
    'optim.max_fisher_step': S(0.0, 'Bound on each update\'s squared length in the Fisher '
                               'metric of log|psi| at the step\'s walkers, twice the mean '
                               'squared change J_i u of log|psi| the update u makes there '
                               '(dimensionless), centred and without the 1% of walkers that '
                               'change most (those near a node): the step is shortened to it '
                               'where longer, after every other bound. Any optimizer. 0: off.',
                               _non_negative),
    'optim.spin_penalty': S(0.0, 'lambda (Ha): lambda <S^2> is added to the energy in the '
                            'gradient (not in the reported energy), which keeps a run in the '
                            'lowest spin state of its (n_up, n_down) sector. Costs n_up * '
                            'n_down extra network evaluations per walker and step. 0: none.',
                            _non_negative),
    'optim.lr.rate': S(None, "Learning rate at step 0; None: the optimizer's default ("
                       + '; '.join(f'{m.name} {m.rate:g}' for m in OPTIMIZERS.values()) + ').',
                       _non_negative, kind=float),
    'optim.lr.decay': S(1.0, 'Exponent of the decay: rate * (1 + t / delay) ** -decay.',
                        _non_negative),
    'optim.lr.delay': S(None, 'Steps over which the rate halves (decay = 1); None: the '
                        "optimizer's default ("
                        + '; '.join(f'{m.name} {m.delay:g}' for m in OPTIMIZERS.values())
                        + ').', _positive, kind=float),
    # Late in training the last parameters carry the gradient's noise; annealing the steps
    # over the last ones quiets them (the averaged parameters, optim.average_fraction, are
    # the other remedy). The factor multiplies each step after KFAC's or SPRING's norm bound
    # (which sets KFAC's step for most of a run at size), so the steps themselves shrink.
    # The run's progress is the update count t against optim.iterations (a resumed run with
    # more iterations anneals to its new end) or, with a time budget (optim.seconds), the
    # fraction of it spent, whichever is further on (optim.anneal_factor); damping is not
    # annealed.
    'optim.lr.anneal': S(0.0, 'Fraction of the run, the last, over which each step falls '
                         'along a half cosine to anneal_to times what it would be: of '
                         'optim.iterations, or of the time budget optim.seconds when one '
                         'is set, whichever end comes first; 0: off.',
                         in_range(0.0, 1.0, '[]')),
    'optim.lr.anneal_to': S(0.1, 'Factor on the step at the end of the run when annealing '
                            '(optim.lr.anneal > 0).', in_range(0.0, 1.0, '[]')),
    # Evaluation takes the parameters averaged over the last part of training: late in
    # training the last parameters carry the gradient's noise, which raises their energy;
    # the average cancels much of it (optimizers/optim.py, `averaged`).
    'optim.average_fraction': S(0.03, 'Evaluation uses the moving average of the parameters '
                                'over about this fraction of the updates done (the last '
                                'ones); 0: the last parameters.', in_range(0.0, 1.0, '[]')),
    # Recovery from non-finite numbers. Non-finite local energies are left out of the step
    # and an update that would make a parameter non-finite is not applied; after
    # `rewind_after` such bad steps in a row the run rewinds to its last all-finite state
    # (kept in device memory every `snapshot_every` steps) with a new random stream, at
    # most `max_rewinds` times, then stops with an error (the last good state checkpointed).
    'optim.rewind_after': S(5, 'Bad steps in a row before a rewind.', _positive_int),
    'optim.snapshot_every': S(100, 'Steps between in-memory snapshots of the last good '
                              '(all-finite, not blown-up) state.', _positive_int),
    'optim.max_rewinds': S(5, 'Rewinds before the run stops with an error.', _non_negative),
    # A finite blow-up counts as a bad step too: a step whose batch variance of the local
    # energy is more than `blowup_factor` times the median over the `blowup_window` steps
    # before it. Single outlying steps (a walker near a nucleus or a node) pass after one or
    # two such steps; parameters damaged by a run of bad updates keep the variance up, and
    # after `rewind_after` such steps in a row the run rewinds as above.
    'optim.blowup_factor': S(20.0, 'Variance, in multiples of its recent median, above which '
                             'a step counts as bad (0: never).', _non_negative),
    'optim.blowup_window': S(500, 'Steps whose median variance a step is compared with; no '
                             'step is judged before this many are recorded.', _positive_int),
    'optim.adam.b1': S(0.9, 'First-moment decay.'),
    'optim.adam.b2': S(0.999, 'Second-moment decay.'),
    'optim.adam.eps': S(1e-8, 'Denominator offset.'),
    'optim.kfac.damping': S(1e-3, 'Tikhonov damping added to the curvature blocks.', _positive),
    'optim.kfac.norm_constraint': S(1e-3, 'Bound on lr^2 <F^-1 g, g> of each update.',
                                    _positive),
    'optim.kfac.cov_ema_decay': S(0.95, 'Moving-average decay of the curvature estimates.'),
    'optim.kfac.invert_every': S(1, 'Steps between re-inverting the curvature blocks.',
                                 _positive_int),
    'optim.kfac.dense_rest': S(False, 'One dense block of the curvature over every parameter '
                               'outside the dense layers (envelopes, Jastrow, layer norms), '
                               "instead of its diagonal (FermiNet's). Its size P is about 4 "
                               'x atoms x electrons x determinants (isotropic envelope): P^2 '
                               'numbers kept, O(P^3) per inversion.', structural=True),
    'optim.kfac.rows': S(optim.KFAC_ROWS['expand'].name, "How KFAC factors a dense layer "
                         "applied to each of a configuration's rows (electrons, pairs): "
                         f'{listed(optim.KFAC_ROWS)}.', one_of(*optim.KFAC_ROWS),
                         structural=True),
    'optim.spring.damping': S(1e-3, 'SPRING (Goldshmid et al. 2024): added to the diagonal of '
                              'the B x B walker kernel.', _positive),
    'optim.spring.momentum': S(0.0, 'mu: weight of the previous direction, in [0, 1). 0 is '
                               'MinSR, our default: in float32, momentum 0.9-0.99 made the '
                               'walker-space solve diverge at the rates that converge fastest '
                               '(He: lr 0.2 with mu 0.9), and at stable rates it converged '
                               'more slowly than mu = 0.', in_range(0, 1, '[)')),
    'optim.spring.norm_constraint': S(0.1, 'Bound on lr^2 |d|^2 of each update.', _positive),

    # Forces on the nuclei (evaluate's 'forces' observable and the relaxation's): the
    # zero-variance zero-bias estimator of physics/observables.py.
    'forces.node_cutoff': S(0.01, 'bohr: the Pulay term is regularised within this estimated '
                            'distance of a node (Pathak and Wagner 2020), which makes its '
                            'variance finite at a bias of order node_cutoff^3; 0: not '
                            'regularised.', in_range(0, 1, '[]')),

    # Geometry optimisation (with system.relax = True): damped, preconditioned steepest
    # descent with momentum on the zero-variance forces averaged over the steps between
    # moves, the net force and torque removed (physics/relaxation.py). The final geometry
    # is the mean of the trailing positions of the path (with a Hessian, each carried a
    # Newton step along its forces); the nuclei stop there once it is known to `tolerance`
    # and the path has settled.
    'relax.start': S(200, 'Training steps before the nuclei first move (the forces of a '
                     'wavefunction that has barely trained point anywhere); their forces '
                     'are not used. Counted from step 0, so a resumed run does not wait '
                     'again.', _count),
    'relax.every': S(20, 'Training steps between moves of the nuclei; the forces of those '
                     'steps (one estimate per step from its walkers) are averaged.',
                     _positive_int),
    'relax.hessian': S(relaxation.HARTREE_FOCK.name, 'How the moves are preconditioned: '
                       f'{listed(relaxation.HESSIANS)}. With a Hessian (its inverse on the '
                       'internal motions) every vibration relaxes at about the same rate, and '
                       'each averaged position is first carried a Newton step along the '
                       'forces measured there, x + H^-1 F.',
                       one_of(*relaxation.HESSIANS)),
    'relax.rate': S(0.3, "With a Hessian: the fraction of the Newton step H^-1 F taken "
                    'per move, in (0, 1]; every vibration relaxes in about 1 / rate moves.',
                    in_range(0, 1, '(]')),
    'relax.step_size': S(0.5, "Without a Hessian: bohr^2/Ha, displacement of a nucleus per "
                         'unit of mean force. Stable for force constants up to about 2 (1 + '
                         'momentum) / step_size Ha/bohr^2 (the stiffest bonds of first-row '
                         'molecules are about 1.5).', _positive),
    'relax.momentum': S(0.5, 'Weight of the previous move in the next, in [0, 1); reset to 0 '
                        'when the force opposes the previous move.', in_range(0, 1, '[)')),
    'relax.max_displacement': S(0.05, 'bohr: the most any nucleus moves in one move (the '
                                'move is scaled down to it).', _positive),
    'relax.average': S(0.5, 'The trailing fraction of the path whose positions are averaged '
                       'for the final geometry, in (0, 1]; the earlier ones are the descent '
                       '(on noisy forces the nuclei fluctuate about the minimum, and the mean '
                       'of their positions converges to it).', in_range(0, 1, '(]')),
    'relax.tolerance': S(0.005, 'bohr: the nuclei stop when every internuclear distance of '
                         'the final geometry has a standard error of at most this and the '
                         'two halves of the averaged positions agree.', _positive),
    'relax.min_averaged': S(50, 'Positions averaged before the stopping criterion is checked '
                            '(their reblocked error needs several correlation times of the '
                            'path; a soft bend of water took about 50 moves).', _positive_int),
    'relax.max_moves': S(0, 'Moves after which the nuclei stop at the final geometry whether '
                         'or not the criterion holds (0: no limit but optim.iterations).',
                         _count),

    # Hartree-Fock pretraining (needs the pyscf extra): before VMC, the network's orbitals
    # are fitted to the occupied HF orbitals by Adam, at walkers sampled from
    # hf_fraction * |psi_HF|^2 + (1 - hf_fraction) * |psi_net|^2 (FermiNet's scheme).
    # Without pyscf a run that asks for it says so and trains without it.
    'pretrain.iterations': S(0, 'Pretraining steps (0: none). Skipped when resuming.',
                             _non_negative),
    'pretrain.basis': S('sto-6g', 'Gaussian basis of the HF calculation (any pyscf basis '
                        'name).'),
    'pretrain.ecp_basis': S('ccecp-cc-pvdz', 'Gaussian basis of the atoms with an ECP in the '
                            'HF calculation (a pyscf basis made for that ECP).'),
    'pretrain.restricted': S(False, 'False: UHF; True: ROHF (same spatial orbitals per spin).'),
    'pretrain.lr': S(3e-4, 'Adam learning rate of the orbital fit.', _positive),
    'pretrain.hf_fraction': S(1.0, "Weight of |psi_HF|^2 in the sampling density, in [0, 1]. "
                              "1 (FermiNet's default) samples the HF density only, so the "
                              'moves never evaluate the network: the cheapest.',
                              in_range(0, 1, '[]')),
    'pretrain.mcmc_steps': S(1, 'Metropolis-Hastings moves per pretraining step.',
                             _positive_int),

    # Sampling.
    'mcmc.steps': S(10, 'Metropolis-Hastings steps per training step.', _positive_int),
    'mcmc.burn_in': S(200, 'MH steps before training, with the move width adapted.',
                      _non_negative),
    'mcmc.move_width': S(0.02, 'Initial std of the Gaussian all-electron proposal, bohr.',
                         _positive),
    'mcmc.init_width': S(1.0, 'Std of the initial electron positions around their nuclei, '
                         'bohr.', _positive),
    'mcmc.target_pmove': S(0.5, 'Acceptance rate the move width is adapted toward, in (0, 1).',
                           in_range(0, 1, '()')),
    'mcmc.adapt_rate': S(1.0, 'Width update after every sweep of `steps` moves: width *= '
                         'exp(rate * (pmove - target)). The width is fixed within a sweep, '
                         'so each sweep is an exact MH kernel.', _non_negative),

    # Evaluation (python -m ferminet_fast.evaluate --run DIR): parameters frozen, the energy
    # recorded over many sweeps and reblocked. These are its defaults for this system.
    'evaluation.steps': S(2000, 'MCMC sweeps (of mcmc.steps moves each) whose energies are '
                          'kept.', _positive_int),
    'evaluation.burn_in': S(100, 'Sweeps discarded first (walkers re-equilibrate to fixed '
                            'params).', _non_negative),

    # Fixed-node diffusion Monte Carlo (python -m ferminet_fast.dmc --run DIR) on the trained
    # network: one run per time step, then the linear extrapolation to tau -> 0 (diffusion/walk.py).
    # In a cell: the Ewald energy, moves wrapped into the cell, fixed-phase at a twist; the
    # runs of one system at its twists: python -m ferminet_fast.dmc --twist_average A,B.
    'dmc.tau': S('auto', 'Time steps, Ha^-1, each > 0: DMC runs at each in turn (from the '
                 'largest) and, with two or more, fits E(tau) linearly to give E(tau -> 0). '
                 "'auto': tau_1, tau_1 / 2, tau_1 / 4 with tau_1 from the system "
                 '(plan.dmc_time_steps): 0.04 / Z for the largest charge Z the electrons '
                 'see (the effective one with an ECP), at most 0.02; 0.02 r_s^2 for the '
                 'electron gas.', _taus, kind=object),
    'dmc.steps': S(2000, 'DMC steps per time step whose energies are kept.', _positive_int),
    'dmc.equilibration': S(500, 'DMC steps per time step discarded first (the projection '
                           'out of the VMC distribution).', _non_negative),
    'dmc.batch_size': S(0, "Walkers (the fixed population); 0: the run's batch_size.",
                        _non_negative),
    'dmc.parameters': S('average', "Parameters of the trial function: 'average' (their "
                        "moving average, as evaluation) or 'last'.", one_of(*PARAMETERS)),
    'dmc.moves': S('electron', "Moves of the walkers: 'electron' (one electron at a time, "
                   'each accepted or rejected alone: Umrigar, Nightingale and Runge, J. Chem. '
                   "Phys. 99, 2865 (1993)) or 'all' (all electrons at once, the whole move "
                   'accepted or rejected; fewer network evaluations, far fewer acceptances '
                   'in larger atoms). In a cell both are wrapped into it. Records: '
                   'diffusion/walk.py MOVES.',
                   one_of('electron', 'all')),
    'dmc.ecp_moves': S('tmoves', "Treatment of an ECP's non-local part (none without an "
                       "ECP, hence none in a cell): 'tmoves' (T-moves in the size-consistent "
                       'form of Casula, Moroni, Sorella and Filippi, J. Chem. Phys. 132, '
                       '154113 (2010), their version '
                       "1: variational, the energy an upper bound of the ECP Hamiltonian's "
                       "ground state) or 'locality' (the locality approximation: the non-local "
                       'part applied to the trial function; not variational). Records: '
                       'diffusion/walk.py ECP_MOVES.', one_of('tmoves', 'locality')),
    'dmc.population_memory': S(1.0, 'Ha^-1: projection time over which the fixed '
                               "population's renormalisations are undone in the "
                               'population-corrected energy of each time step (its steps: '
                               'this over tau), reported beside the mixed estimate with '
                               'their difference, the population bias (diffusion/stage.py).',
                               _positive),
    'dmc.save_every': S(0, 'DMC steps between checkpoints of the DMC state (0: by '
                        '`log.save_frequency` minutes only); always on a stop signal.',
                        _non_negative),

    # Logging, checkpoints and timers.
    'log.save_path': S('', "Run directory; '' makes runs/<name>_<date>_<time>."),
    'log.print_every': S(100, 'Print a progress line every this many steps (0: never).',
                         _non_negative),
    'log.timers': S(False, 'Compile the stages of the step separately and time them on the '
                    'equilibrated state before the loop (costs a compilation of about the '
                    "step's; off unless asked for)."),
    'log.timers_every': S(0, 'Re-measure the stage timers every this many steps (0: never).',
                          _non_negative),
    'log.final_fraction': S(0.2, 'Fraction of the last steps averaged for the final '
                            'estimate, in (0, 1].', in_range(0, 1, '(]')),
    # Checkpoints (orbax, in <save_path>/checkpoints) every `save_frequency` minutes and/or
    # `save_every` steps (0 disables either), and always at the end or on
    # SIGTERM/SIGINT/SIGUSR1. Running again with the same save_path resumes from the
    # newest valid one.
    'log.save_frequency': S(10.0, 'Minutes between checkpoints (0: not by time).',
                            _non_negative),
    'log.save_every': S(0, 'Steps between checkpoints (0: not by steps).', _non_negative),
    'log.keep_checkpoints': S(3, 'Newest checkpoints kept; older ones are deleted.',
                              _positive_int),
    'log.restore_path': S('', 'Start from the newest checkpoint of this other run directory '
                          '(its state: parameters, walkers, optimizer and step). Once this '
                          "run has a checkpoint of its own in save_path, a restart resumes "
                          'that one, so a resubmitted job keeps the same command line.'),
    'log.fine_tune_from': S('', "A trained run's directory whose parameters (their average, "
                            'as evaluation takes them) this run starts from, at its own '
                            'geometry or set of geometries: the same elements in the same '
                            'order, electrons, network and precision (checked); the walkers, '
                            'optimizer state and step count start afresh and pretraining is '
                            "skipped; a restart resumes this run's own checkpoint. '' starts "
                            'from initialised (or pretrained) parameters.'),
    'log.progress': S(True, 'A progress bar (energy, variance, pmove, it/s, ETA) when the '
                      "output is a terminal; batch jobs' logs get the `print_every` lines "
                      'instead.'),
    'log.tensorboard': S(False, 'TensorBoard scalars in <save_path>/tensorboard (needs the '
                         'tensorboard extra).'),

    # Devices and processes. Walkers are split over all devices of all processes;
    # batch_size must be a multiple of the device count.
    'distributed.initialize': S('auto', "Call jax.distributed.initialize() (multi-host): "
                                "'auto' (under a SLURM step with more than one task, or when "
                                "`coordinator` is set), 'yes' (cluster auto-detected by JAX), "
                                "'no' (this process's devices only).",
                                one_of('auto', 'yes', 'no')),
    'distributed.coordinator': S('', "'host:port' of process 0, for clusters JAX cannot "
                                 'detect.'),
    'distributed.num_processes': S(0, 'Processes in the run (with `coordinator`).'),
    'distributed.process_id': S(-1, "This process's index, 0..num_processes-1 (with "
                                '`coordinator`).'),
    'distributed.cpu_devices': S('auto', 'On a CPU: the devices the cores are split into, '
                                 'the walkers sharded over them as over GPUs, one thread '
                                 "each (environment/cpu_devices.py): 'auto' (the most, at "
                                 'most one per core, that split batch_size evenly; a count '
                                 'set in JAX_NUM_CPU_DEVICES or XLA_FLAGS wins, and '
                                 'multi-process runs keep one per process) or a number >= 1. '
                                 'Read when JAX starts: a notebook that has run JAX keeps its '
                                 'devices. No effect on GPUs.', auto_or_int(1), kind=object),

    # A step that stops completing (a deadlock in the runtime, a device or peer that stopped
    # answering) ends the process with a report and exit status 4 instead of waiting
    # forever (runtime/watchdog.py); train, evaluate and the later stages all watch their steps.
    'watchdog.enabled': S(True, 'Watch every long-running stage for steps that stop '
                          'completing.'),
    'watchdog.multiple': S(50.0, 'A step is stalled when nothing completes for this many '
                           'times the median of the recent step times ...', _positive),
    'watchdog.floor_s': S(300.0, '... or for this many seconds, whichever is longer '
                          '(covers checkpoints and other host work between steps).',
                          _positive),
    'watchdog.first_s': S(1800.0, 'Seconds allowed for the first step of each phase of a '
                          'stage (a chunk of pretraining, a sweep of burn-in, a training '
                          'step), before its step time is known.', _positive),
    'watchdog.idle_s': S(120.0, 'On the CPU, in one process: a stage is stalled once the '
                         'process has used under 1% of a core for this many seconds (every '
                         'thread asleep: a deadlock), at any point of the stage, start-up '
                         'included. 0: not watched.', _non_negative, kind=float),
    'watchdog.signal_grace_s': S(25.0, 'Seconds after SIGTERM within which the process ends '
                                 'even if its step does not return (SLURM kills 30 s after '
                                 'SIGTERM by default): checkpoints written before are left '
                                 'whole, and the exit status is 75 as for a clean stop.',
                                 _positive, kind=float),

    'debug.seed': S(0, 'Seed of every random number in the run, a 64-bit integer.',
                    in_range(*SEEDS, '[]')),
    'debug.deterministic': S(False, 'Deterministic (bit-reproducible, slower) GPU kernels: '
                             'adds --xla_gpu_deterministic_ops to XLA_FLAGS before JAX starts '
                             '(an error if it has already started in this process). The seed '
                             "is always fixed by `seed` (FermiNet's key of this name fixes its "
                             'seed instead).'),
}
del S


def default() -> config_dict.ConfigDict:
  """The defaults: a helium atom with a small network, trained by KFAC. Locked: assigning
  an unknown key is an error."""
  cfg = config_dict.ConfigDict()
  for key, setting in SETTINGS.items():
    *blocks, last = key.split('.')
    node = cfg
    for block in blocks:
      if block not in node:
        node[block] = config_dict.ConfigDict()
      node = node[block]
    if setting.default is None:
      node[last] = config_dict.placeholder(setting.kind)
    elif setting.kind is object:
      node[last] = config_dict.FieldReference(setting.default, field_type=object)
    else:
      node[last] = setting.default
  cfg.lock()
  return cfg


def get_config() -> config_dict.ConfigDict:
  """Entry point used by `--config` when no file is given."""
  return default()


def describe() -> str:
  """Every key with its default and meaning, one per line (what `--help-config` prints)."""
  return '\n'.join(f'{key} = {s.default!r}{"  [fixes the state]" if s.structural else ""}\n'
                   f'    {s.doc}' for key, s in SETTINGS.items())


def _get(cfg, dotted: str):
  """cfg['a']['b'] for 'a.b' (a ConfigDict or a dict)."""
  for part in dotted.split('.'):
    cfg = cfg[part]
  return cfg


def allowed_values(dotted: str) -> Optional[tuple]:
  """The values a key is limited to by its `one_of` check, or None if it has no such list."""
  return getattr(SETTINGS[dotted].check, 'allowed', None) if dotted in SETTINGS else None


def nullable(dotted: str) -> bool:
  """Whether the key takes None: its default is None ('derive it' or 'the default') or None
  is one of its allowed values."""
  if dotted not in SETTINGS:
    return False
  return SETTINGS[dotted].default is None or None in (allowed_values(dotted) or ())


def validate(cfg: config_dict.ConfigDict) -> None:
  """Checks that `cfg` holds the declared keys and no other, every value against its
  declaration, then the combinations (optional packages a choice needs, the processes of a
  multi-host run, a scan's size). Types are checked by the locked ConfigDict. A numpy array
  a config file set (a FermiNet-style `np.eye(3) * a` lattice) is made nested tuples in
  place first, as the settings declare it and config.json stores it. Raises InputError."""
  _check_keys(cfg)
  _plain_values(cfg)
  for key, setting in SETTINGS.items():
    value = _get(cfg, key)
    if value is None and not nullable(key):
      raise InputError(f'config.{key} cannot be None (default: {setting.default!r})')
    problem = setting.check(value) if setting.check else None
    if problem and problem.startswith('is not'):
      raise InputError(f'config.{key} = {value!r} {problem}')
    if problem:
      raise InputError(f'config.{key} {problem}, got {value!r}')
  if cfg.log.tensorboard and not packages.installed('tensorboardX'):
    raise InputError("config.log.tensorboard = True needs the optional package tensorboardX: "
                     "pip install 'ferminet_fast[tensorboard]'")
  if cfg.system.states > 1:
    for key, on in (('pretrain.iterations', cfg.pretrain.iterations > 0),
                    ('system.ecp', bool(cfg.system.ecp)),
                    ('optim.spin_penalty', bool(cfg.optim.spin_penalty)),
                    ('optim.node_cutoff', cfg.optim.node_cutoff > 0)):
      if on:
        raise InputError(f'config.system.states = {cfg.system.states}: config.{key} is not '
                         'available with several states (use states = 1)')
  if cfg.system.scan.points > cfg.batch_size:  # Before the scan's geometries are made.
    raise InputError(f'config.system.scan.points = {cfg.system.scan.points} exceeds '
                     f'config.batch_size = {cfg.batch_size}: each geometry needs a walker at '
                     'least')
  dist = cfg.distributed
  if dist.coordinator and (dist.num_processes < 1 or dist.process_id < 0):
    raise InputError('config.distributed.coordinator is set, so config.distributed.'
                     'num_processes (>= 1) and process_id (>= 0) must be set too')
  if dist.coordinator and dist.process_id >= dist.num_processes:
    raise InputError(f'config.distributed.process_id = {dist.process_id} is not one of the '
                     f'{dist.num_processes} processes (0 to {dist.num_processes - 1})')
  geometries.check(cfg.system, systems.is_periodic(cfg.system))
  relaxation.check(cfg.system, systems.is_periodic(cfg.system))
  hessian = relaxation.HESSIANS[cfg.relax.hessian]
  if cfg.system.relax and not hessian.installed():
    raise InputError(f'config.relax.hessian = {hessian.name!r} needs the optional package '
                     f"{hessian.package}: pip install 'ferminet_fast[{hessian.package}]', or "
                     f'set config.relax.hessian = {relaxation.NO_HESSIAN.name!r}')
  _validate_periodic(cfg)
  method = LAPLACIANS.get(cfg.optim.laplacian)
  if method is not None and not method.installed():
    raise InputError(f'config.optim.laplacian = {method.name!r} needs the optional package '
                     f"{method.package}: pip install 'ferminet_fast[{method.package}]'")


def _plain_values(cfg) -> None:
  """Numpy arrays among `cfg`'s values (those of keys declared of any kind: the lattice,
  the supercell) made nested tuples."""
  for key in SETTINGS:
    *blocks, last = key.split('.')
    node = cfg
    for block in blocks:
      node = node[block]
    if isinstance(node[last], np.ndarray):
      node[last] = as_tuples(node[last].tolist())


def _check_keys(cfg) -> None:
  """InputError unless `cfg` holds every declared key and no other (a config file that
  built its own ConfigDict rather than starting from `default()`)."""
  for key in SETTINGS:
    try:
      _get(cfg, key)
    except (KeyError, TypeError):
      raise InputError(f'config.{key} is missing: a config file starts from '
                       'ferminet_fast.config.default() and changes what it needs') from None

  def walk(node, prefix):
    for key in node.keys():
      dotted = prefix + key
      if dotted in SETTINGS:
        continue
      if not isinstance(node[key], config_dict.ConfigDict) or not any(
          k.startswith(dotted + '.') for k in SETTINGS):
        raise InputError(f'unknown config key {dotted!r}: a config file starts from '
                         'ferminet_fast.config.default(), whose keys are the declared ones')
      walk(node[key], dotted + '.')

  walk(cfg, '')


def _validate_periodic(cfg) -> None:
  """The combinations of periodic settings that are refused (or not supported yet)."""
  sys_cfg, periodic = cfg.system, systems.is_periodic(cfg.system)
  nuclei = sys_cfg.rs is None  # The electron gas has none.
  envelope = envelopes.resolve(cfg.network.envelope, periodic, nuclei)
  if periodic and not envelopes.suits(envelope, True, nuclei):
    allowed = [k.name for k in ENVELOPES.values() if envelopes.suits(k, True, nuclei)]
    raise InputError(f'config.network.envelope = {envelope.name!r} is not for '
                     f"{'a crystal' if nuclei else 'the electron gas'}; it needs one of "
                     f"{', '.join(allowed)} (or 'auto')")
  if not periodic and not envelope.molecule:
    raise InputError(f'config.network.envelope = {envelope.name!r} is for periodic systems '
                     '(set config.system.lattice or config.system.rs), not molecules')
  if not periodic:
    if sys_cfg.periodic_dims != 3:
      raise InputError(f'config.system.periodic_dims = {sys_cfg.periodic_dims} needs a crystal '
                       '(config.system.lattice); a molecule has no periodic dimensions')
    return
  dims = sys_cfg.periodic_dims
  if dims < 3:
    kind, open_axes = {2: ('slab', 'third lattice vector'),
                       1: ('chain', 'second and third lattice vectors')}[dims]
    if sys_cfg.rs is not None:
      raise InputError(f'config.system.periodic_dims = {dims} is for crystals (a {kind} of '
                       'nuclei and electrons); the electron gas is periodic in 3 dimensions')
    if any(float(t) % 1.0 for t in tuple(sys_cfg.twist)[dims:]):
      raise InputError(f'config.system.twist = {tuple(sys_cfg.twist)}: a {kind} is open along '
                       f'its {open_axes}, so the twist is 0 along them')
    if not envelopes.suits(envelope, True, nuclei, dims):
      raise InputError(f'config.network.envelope = {envelope.name!r} is periodic in 3 '
                       f'dimensions; a {kind} needs '
                       + ' or '.join(f"'{k.name}'" for k in ENVELOPES.values() if k.slab)
                       + " (or 'auto')")
  if not lattice_lib.is_gamma(sys_cfg.twist):
    if not OPTIMIZERS[cfg.optim.optimizer].complex:
      raise InputError(f'config.optim.optimizer = {cfg.optim.optimizer!r} does not support the '
                       f'complex wavefunction of a twist ({tuple(sys_cfg.twist)}); use one of '
                       + ', '.join(m.name for m in OPTIMIZERS.values() if m.complex))
  for key, on in (('system.states', sys_cfg.states > 1), ('system.ecp', bool(sys_cfg.ecp)),
                  ('optim.spin_penalty', bool(cfg.optim.spin_penalty))):
    if on:
      raise InputError(f'config.{key} is not supported yet for periodic systems')
  if cfg.pretrain.iterations > 0 and sys_cfg.rs is not None:
    raise InputError(f'config.pretrain.iterations = {cfg.pretrain.iterations}: the electron gas '
                     'needs none: its plane-wave envelope starts as the Hartree-Fock '
                     'determinant; set it to 0')


def freeze(cfg: config_dict.ConfigDict) -> config_dict.FrozenConfigDict:
  """The validated settings, frozen: what the modules receive (each its own block). A
  'best' Laplacian stays for the build to resolve, which knows the system and the device."""
  return config_dict.FrozenConfigDict(config_dict.ConfigDict(cfg.to_dict()))


# Keys of older config.json files that no longer exist, dropped when read: 'dmc.ecp' held
# the only treatment of an ECP in DMC then ('locality'), now a choice of 'dmc.ecp_moves'.
# 'relax.patience', 'relax.threshold' and 'relax.window' stopped a relaxation on its forces
# and averaged its last positions; it now stops on its averaged geometry (relax.tolerance).
RETIRED = ('dmc.ecp', 'relax.patience', 'relax.threshold', 'relax.window')


def from_json(d: dict, source: str = 'the saved settings') -> config_dict.ConfigDict:
  """The defaults updated with a run's saved config.json (lists back to tuples; RETIRED
  keys dropped); InputError naming `source` (the file) where it is not such settings."""
  cfg = default()

  def assign(node, values, prefix):
    if not isinstance(values, dict):
      raise InputError(f'{source}: {prefix[:-1] or "the file"} holds {reprlib.repr(values)}, '
                       'not a block of settings')
    for key, value in values.items():
      dotted = prefix + key
      if dotted in RETIRED:
        continue
      if key not in node:
        raise InputError(f'{source}: unknown config key {dotted!r}')
      if isinstance(node[key], config_dict.ConfigDict):
        assign(node[key], value, dotted + '.')
        continue
      try:
        node[key] = as_tuples(value)
      except (TypeError, ValueError):
        raise InputError(f'{source}: {dotted} = {reprlib.repr(value)} is not a value of its '
                         f'type ({type(node[key]).__name__})') from None

  assign(cfg, d, '')
  return cfg


def as_tuples(v):
  """Nested lists (as JSON stores a tuple) as nested tuples."""
  return tuple(as_tuples(x) for x in v) if isinstance(v, list) else v


def structural_differences(saved: dict, current: dict) -> list:
  """'key: old -> new' for each structural key whose value differs between two configs
  given as dicts (a saved config.json and the current one); keys missing from `saved`
  compare as their defaults."""
  diffs = []
  for key, setting in SETTINGS.items():
    if not setting.structural:
      continue
    try:
      old = _get(saved, key)
    except KeyError:
      old = setting.default
    new = _get(current, key)
    if as_tuples(old) != as_tuples(new):
      diffs.append(f'{key}: {old!r} -> {new!r}')
  return diffs
