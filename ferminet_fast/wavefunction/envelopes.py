"""Envelopes: what multiplies each orbital. For molecules, the decay that makes the
wavefunction vanish far from the nuclei whatever the network's features do there; for
periodic systems, plane waves of the filled k-shells (the Hartree-Fock orbitals of the
electron gas), or, in a crystal, the same decay in the periodic distance to each nucleus
(the periodic Geometry's r_ae), which keeps core electrons near their nuclei and is itself
lattice-periodic. Each is a `Kind` record of `ENVELOPES`, which says where it suits;
config.network.envelope names one, or 'auto' (`resolve`)."""

import dataclasses
from typing import Protocol

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast import choices
from ferminet_fast.wavefunction.features import Geometry


class Envelope(Protocol):
  """(module, g, n_out, name) -> (n_s, n_out): the envelope of n_out orbitals at each of the
  n_s electrons of the geometry g (features.Geometry of those electrons: their offsets and
  distances to the m nuclei and their positions, bohr). Its parameters are created in
  `module` (which has a `param_dtype`, and for periodic envelopes `kpoints`) under names
  that start with `name`, so that their paths in the parameter tree are the module's own."""

  def __call__(self, module: nn.Module, g: Geometry, n_out: int, name: str) -> jax.Array:
    ...


def isotropic_envelope(module: nn.Module, g: Geometry, n_out: int, name: str) -> jax.Array:
  """sum_m pi_m exp(-sigma_m |r - R_m|), one pi and sigma per nucleus and orbital
  (`{name}_pi`, `{name}_sigma`, (m, n_out), both starting at one). On a crystal's periodic
  Geometry |r - R_m| is the periodic distance (features.periodic), so the envelope is
  lattice-periodic and peaks at every image of nucleus m."""
  ae, r_ae = g.ae, g.r_ae
  m = ae.shape[1]
  pi = module.param(f'{name}_pi', nn.initializers.ones, (m, n_out), module.param_dtype)
  sigma = module.param(f'{name}_sigma', nn.initializers.ones, (m, n_out), module.param_dtype)
  return jnp.sum(pi[None] * jnp.exp(-r_ae * jnp.abs(sigma)[None]), axis=1)


def full_envelope(module: nn.Module, g: Geometry, n_out: int, name: str) -> jax.Array:
  """sum_m pi_m exp(-|Sigma_m (r - R_m)|) with a 3 x 3 matrix Sigma_m per nucleus and
  orbital (anisotropic decay; `{name}_sigma` (m, 3, 3, n_out), starting as the identity)."""
  ae = g.ae
  m = ae.shape[1]
  pi = module.param(f'{name}_pi', nn.initializers.ones, (m, n_out), module.param_dtype)
  eye_init = lambda key, s, dtype: jnp.broadcast_to(jnp.eye(3, dtype=dtype)[None, :, :, None], s)
  sigma = module.param(f'{name}_sigma', eye_init, (m, 3, 3, n_out), module.param_dtype)
  exponent = jnp.linalg.norm(jnp.einsum('imj,mjko->imko', ae, sigma), axis=2)
  return jnp.sum(pi[None] * jnp.exp(-exponent), axis=1)


def real_plane_waves(kpoints: np.ndarray, r: jax.Array) -> jax.Array:
  """The K real plane waves (n, K) at positions r (n, 3) bohr of K k-points (K, 3) 1/bohr
  closed under k -> -k with k = 0 first: 1, then cos(k . r) and sin(k . r) for one k of
  each pair +-k. They span the same functions as the complex exp(i k . r)."""
  k = np.asarray(kpoints, np.float64)[1:]
  first = np.where(np.abs(k[:, 0]) > 1e-9, k[:, 0], np.where(np.abs(k[:, 1]) > 1e-9,
                                                            k[:, 1], k[:, 2]))
  phase = r @ jnp.asarray(k[first > 0].T, r.dtype)
  return jnp.concatenate([jnp.ones(r.shape[:-1] + (1,), r.dtype), jnp.cos(phase),
                          jnp.sin(phase)], axis=-1)


def planewave_envelope(module: nn.Module, g: Geometry, n_out: int, name: str) -> jax.Array:
  """sum_k c_k w_k(r) over the plane waves w_k of the filled k-shells (`module.kpoints`), one
  learned amplitude per plane wave and orbital (`{name}_amplitude` (K, n_out)). At the Gamma
  point the waves are real (real_plane_waves) and so is the envelope; at a twist
  (`module.complex_output`) they are exp(i k . r), k = G + k_s, and the amplitudes complex
  (`{name}_amplitude_imag`, the imaginary parts, starting at zero). Orbital o starts as
  plane wave o mod K, so that the envelopes of a spin's first K orbitals start as its
  Hartree-Fock orbitals in the gas."""
  if module.complex_output:
    phase = g.r @ jnp.asarray(np.asarray(module.kpoints).T, g.r.dtype)
    waves = jax.lax.complex(jnp.cos(phase), jnp.sin(phase))  # (n_s, K) exp(i k . r)
  else:
    waves = real_plane_waves(module.kpoints, g.r)  # (n_s, K)
  n_waves = waves.shape[-1]
  init = lambda key, shape, dtype: jnp.asarray(
      np.arange(n_waves)[:, None] == np.arange(n_out)[None] % n_waves, dtype)
  amplitude = module.param(f'{name}_amplitude', init, (n_waves, n_out), module.param_dtype)
  if module.complex_output:
    imag = module.param(f'{name}_amplitude_imag', nn.initializers.zeros, (n_waves, n_out),
                        module.param_dtype)
    amplitude = jax.lax.complex(amplitude, imag)
  return waves @ amplitude


@dataclasses.dataclass(frozen=True, repr=False)
class Kind(choices.Choice):
  """An envelope (calling it is calling its `Envelope`), and the systems it suits."""
  molecule: bool = False  # Open boundaries.
  crystal: bool = False  # A crystal periodic in 3 dimensions.
  slab: bool = False  # A crystal periodic in 1 or 2 (a chain, a slab).
  gas: bool = False  # The electron gas (no nuclei).
  # Its waves carry the twist (exp(i k . r), k = G + k_s), so a complex wavefunction's
  # orbitals need no Bloch factor of their own.
  carries_twist: bool = False


ISOTROPIC = Kind('isotropic', isotropic_envelope, 'exp(-s r); for a crystal r is the periodic '
                 'distance to each nucleus', molecule=True, crystal=True, slab=True)
FULL = Kind('full', full_envelope, 'exp(-|S r|)', molecule=True)
PLANEWAVE = Kind('planewave', planewave_envelope, 'learned combinations of the cos and sin of '
                 'the filled k-shells', crystal=True, gas=True, carries_twist=True)
ENVELOPES = choices.table(ISOTROPIC, FULL, PLANEWAVE)


def resolve(name: str, periodic: bool, nuclei: bool = True) -> Kind:
  """The envelope config.network.envelope names; 'auto': 'planewave' for a periodic system
  without nuclei (the electron gas), else 'isotropic' (a crystal's core electrons need an
  envelope that decays near each nucleus; a plane wave does not localise them)."""
  if name == 'auto':
    return PLANEWAVE if periodic and not nuclei else ISOTROPIC
  return ENVELOPES[name]


def suits(kind: Kind, periodic: bool, nuclei: bool, dims: int = 3) -> bool:
  """Whether `kind` suits the system: a molecule, the electron gas (periodic, no nuclei),
  or a crystal periodic in `dims` dimensions."""
  if not periodic:
    return kind.molecule
  if not nuclei:
    return kind.gas
  return kind.crystal if dims == 3 else kind.slab
