"""Energy differences between adjacent geometries of a surface by correlated sampling.

In every evaluation sweep the walkers of geometry g's chain (sampled from |psi_g|^2) also
estimate the energy of geometry g + 1: each configuration x is carried by the space warp of
Filippi & Umrigar (Phys. Rev. B 61, R16291 (2000); physics/observables.py `space_warp`) to
x', weighted by w = |psi_{g+1}(x')|^2 / |psi_g(x)|^2 |dx'/dx|, and its local energy taken at
g + 1's nuclei: E_{g+1} ~ sum w E_L'(x') / sum w. Less that sweep's plain mean of E_L over
the same walkers, this is one sample of E_{g+1} - E_g whose fluctuations largely cancel
(the same walkers, near-identical local energies), reblocked over the sweeps. The cost is
one more local energy per walker of chains 0 .. G-2 per sweep.

A scan of a periodic cell (its nuclei and the cell scaled by s_g) needs no warp: the map
x' = (s_{g+1} / s_g) x takes the cell of g onto that of g + 1 and every nucleus onto its
image, with a constant Jacobian (s_{g+1} / s_g)^{3N}.
"""

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ferminet_fast.physics import observables, systems
from ferminet_fast.vmc import stats, step

DIFFERENCES = 'differences'  # Key of a sweep's pair estimates among its per-sweep values.


def weighted_mean(log_w: jax.Array, e_l: jax.Array) -> tuple:
  """(sum w E_L / sum w, (sum w)^2 / (n sum w^2), fraction left out) of one sweep's walkers,
  from log w (W,) and E_L (W,): the weights normalised in log space (no overflow), walkers
  with a non-finite weight (also where the warp folds) or local energy left out, which
  biases the estimate, so their fraction of the W is returned; the second is the effective
  sample size as a fraction of the n = W walkers (1 for equal weights)."""
  ok = jnp.isfinite(log_w) & jnp.isfinite(e_l)
  p = jax.nn.softmax(jnp.where(ok, log_w, -jnp.inf))
  mean = jnp.sum(p * jnp.where(ok, e_l, 0.0))
  return mean, 1.0 / (log_w.shape[0] * jnp.sum(p ** 2)), 1.0 - jnp.mean(ok)


def correlated_energy(log_psi: Callable, local_energies: Callable, params, x: jax.Array,
                      atoms: jax.Array, moved_atoms: jax.Array) -> tuple:
  """(E' (), effective sample size fraction (), fraction left out ()): the energy at nuclei
  moved_atoms (M, 3) estimated from walkers x (W, 3N) sampled from |psi|^2 at atoms, each
  warped and weighted (observables.warped_log_weight) and its local energy taken there
  (weighted_mean).
  log_psi(params, x (3N,), atoms) -> log|psi|; local_energies(params, x (W, 3N), atoms)
  -> E_L (W,), Ha."""
  warp = jax.vmap(functools.partial(observables.warped_log_weight, log_psi),
                  in_axes=(None, 0, None, None))
  moved, log_w = warp(params, x, atoms, moved_atoms)
  return weighted_mean(log_w, local_energies(params, moved, moved_atoms))


def scaled_correlated_energy(parts: step.Parts, params, x: jax.Array,
                             geometry: systems.Geometry, moved: systems.Geometry) -> tuple:
  """(E' (), effective sample size fraction (), fraction left out ()): `correlated_energy`
  for a scan of a periodic cell, from walkers x (W, 3N) sampled from |psi|^2 in the cell of
  `geometry` to the cell of `moved` (one geometry each: positions (M, 3), scale ()), each
  walker mapped by the ratio of the scales."""
  ratio = moved.scale / geometry.scale
  moved_x = x * ratio
  log_w = (2.0 * (parts.batch_log_psi(params, moved_x, moved)
                  - parts.batch_log_psi(params, x, geometry))
           + x.shape[-1] * jnp.log(ratio))
  return weighted_mean(log_w, parts.energy(params, moved_x, moved)[1].local_energy)


def make_pairs(parts: step.Parts) -> Callable:
  """(params, xs (G, W, 3N), stack (positions (G, M, 3); scales (G,) for a scan of a cell),
  energies (G,)) -> (3, G - 1): for each adjacent pair (g, g + 1), this sweep's correlated
  difference E_{g+1} - E_g (Ha; `energies` are the chains' plain means of E_L in the same
  sweep), the effective sample size fraction of its weights and the fraction of walkers
  left out (weighted_mean)."""
  def local_energies(params, x, atoms):
    return parts.energy(params, x, systems.Geometry(atoms))[1].local_energy

  pair = functools.partial(correlated_energy, parts.network.log_psi, local_energies)

  def pairs(params, xs, stack, energies):
    if stack.scale is None:
      r = stack.positions
      e_next, ess, left_out = jax.vmap(pair, in_axes=(None, 0, 0, 0))(params, xs[:-1],
                                                                      r[:-1], r[1:])
    else:
      first, second = (jax.tree.map(lambda a: a[:-1], stack),
                       jax.tree.map(lambda a: a[1:], stack))
      e_next, ess, left_out = jax.vmap(functools.partial(scaled_correlated_energy, parts),
                                       in_axes=(None, 0, 0, 0))(params, xs[:-1], first, second)
    return jnp.stack([e_next - energies[:-1], ess, left_out])

  return pairs


def report(values: np.ndarray, rows: list, say: Callable) -> list:
  """pes.json's 'differences': for each adjacent pair, the reblocked correlated difference
  from the sweeps' values (steps, 3, G - 1) (`make_pairs`), the independent one from the
  geometries' rows (surface_report: energies and errors, combined in quadrature), the
  mean effective sample size fraction of the weights and the fraction of walkers left out;
  printed, with a warning where walkers were left out."""
  say('  energy differences of adjacent geometries (correlated sampling with a space warp, '
      'or the scaling of a cell; independent: of the separate energies):')
  out = []
  for g in range(values.shape[2]):
    c = stats.reblock(values[:, 0, g])
    a, b = rows[g], rows[g + 1]
    independent, error = b['energy'] - a['energy'], float(np.hypot(a['error'], b['error']))
    ess, left_out = float(np.mean(values[:, 1, g])), float(np.mean(values[:, 2, g]))
    out.append({'from': g, 'to': g + 1, 'correlated': c.mean, 'correlated_error': c.error,
                'correlated_tau': c.tau, 'independent': independent,
                'independent_error': error, 'effective_sample_fraction': ess,
                'left_out_fraction': left_out})
    where = (f'{a["coordinate"]:.4f} -> {b["coordinate"]:.4f}' if 'coordinate' in a
             else f'{g} -> {g + 1}')
    say(f'    {where}: correlated {c.mean:+.6f} +- {c.error:.6f} Ha, independent '
        f'{independent:+.6f} +- {error:.6f} Ha (effective sample fraction {ess:.3f})')
    if left_out > 0:
      say(f'      warning: {left_out:.2%} of the walkers were left out of this correlated '
          'difference (the warp folds space between these geometries, or a weight or local '
          'energy was not finite), which biases it: take geometries closer together (a bond '
          'shortened by more than a quarter of its length folds the warp), or quote the '
          'independent difference')
  return out
