"""GaussGAN side by side: the JAX port against the PyTorch / SciPy / NumPy references.

Items: one training step (classical, and killer mode), a training epoch, a classical
training run to the original's documented quality, the validation metrics, and the
quantum noise circuit. Each is checked for agreement (same parameters and random numbers
in, same numbers out) before it is timed.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from comparisons import measure
from comparisons.gaussgan import data, port, reference


# Documented quality of the original's classical run after ~30 epochs.
QUALITY = {'LogLikelihood': -3.8, 'MMDDistance': 0.15}


def _noise(seed: int, batch: int) -> port.Noise:
  """One step's random numbers (port.sample_noise) as NumPy arrays, to feed both."""
  return jax.tree.map(np.array, port.sample_noise(jax.random.PRNGKey(seed), batch))


def step_agreement(killer: bool, steps: int = 3, batch: int = 256) -> dict:
  """Both implementations from the same parameters, fed the same batches and noise: the
  largest relative difference of the losses over `steps` steps, and of the weights after
  the first (relative to their norm; later steps amplify float32 rounding through Adam's
  normalised updates of parameters whose gradients are near zero)."""
  import torch
  params, bn = port.init_params(0, killer)
  ref = reference.GaussGanTorch(killer).load(params, bn)
  state = port.init_state(params, bn)
  _, train = data.make_dataset()
  step = jax.jit(port.train_step)
  loss_err = 0.0
  for i in range(steps):
    real, noise = train[i * batch:(i + 1) * batch], _noise(i + 1, batch)
    state, losses = step(state, jnp.asarray(real), noise)
    t_losses = ref.train_step(torch.from_numpy(real), port.Noise(*map(torch.from_numpy, noise)))
    loss_err = max(loss_err, *(abs(float(a) - b) / max(abs(b), 1e-6) for a, b in zip(losses, t_losses)))
    if i == 0:
      ours = jax.tree.leaves({k: state.params[k] for k in ('G', 'D')})
      theirs = jax.tree.leaves(ref.params())
      diff = np.sqrt(sum(np.sum((np.asarray(a) - b) ** 2) for a, b in zip(ours, theirs)))
      param_err = float(diff / np.sqrt(sum(np.sum(b**2) for b in theirs)))
  return {'loss_rel_diff': loss_err, 'param_rel_diff': param_err}


def time_steps(killer: bool, quick: bool) -> dict:
  """Per-step latency of both (same batch and noise each call)."""
  import torch
  params, bn = port.init_params(0, killer)
  ref = reference.GaussGanTorch(killer).load(params, bn)
  _, train = data.make_dataset()
  real, noise = train[:256], _noise(100, 256)
  t_real, t_noise = torch.from_numpy(real), port.Noise(*map(torch.from_numpy, noise))
  state = port.init_state(params, bn)
  t0 = time.perf_counter()
  step = jax.jit(port.train_step).lower(state, jnp.asarray(real), noise).compile()
  compile_s = time.perf_counter() - t0
  j_real, j_noise = jnp.asarray(real), jax.tree.map(jnp.asarray, noise)
  holder = [state]

  def jax_call():
    holder[0], out = step(holder[0], j_real, j_noise)
    jax.block_until_ready(out)

  iters = 10 if quick else 50
  with measure.PeakMemory() as mem_ref:
    t_ref = measure.latency_ms(lambda: ref.train_step(t_real, t_noise), 3, iters)
  with measure.PeakMemory() as mem_jax:
    t_jax = measure.latency_ms(jax_call, 3, iters)
  return {'ref_ms': t_ref, 'jax_ms': t_jax, 'compile_s': compile_s,
          'ref_mb': mem_ref.mb, 'jax_mb': mem_jax.mb}


def training_run(quick: bool, y: np.ndarray, terms) -> dict:
  """The classical run: `epochs` epochs of both implementations from the same start, the
  epochs timed (the JAX epoch's compile excluded and reported), and after every epoch
  (outside the timing) the metrics of 500 generated points, as the original validated."""
  import torch
  epochs = 2 if quick else 30
  params, bn = port.init_params(0)
  _, train = data.make_dataset()
  if quick:
    train = train[:2048]
  yj = jnp.asarray(y)

  def quality(points):
    return {k: float(v) for k, v in port.metrics(jnp.asarray(points), yj, terms).items()}

  ref = reference.GaussGanTorch().load(params, bn)
  gen = torch.Generator().manual_seed(0)
  t_train = torch.from_numpy(train)
  ref_s, ref_curve = 0.0, []
  with measure.PeakMemory() as mem_ref:
    for _ in range(epochs):
      t0 = time.perf_counter()
      ref.epoch(t_train, gen)
      ref_s += time.perf_counter() - t0
      ref_curve.append(quality(ref.sample(500, gen)))
  epoch = port.make_epoch()
  state, points, key = port.init_state(params, bn), jnp.asarray(train), jax.random.PRNGKey(0)
  t0 = time.perf_counter()
  compiled = epoch.lower(state, points, key).compile()
  compile_s = time.perf_counter() - t0
  jax_s, jax_curve = 0.0, []
  with measure.PeakMemory() as mem_jax:
    for e in range(epochs):
      t0 = time.perf_counter()
      state, _, _ = compiled(state, points, jax.random.fold_in(key, e))
      jax.block_until_ready(state)
      jax_s += time.perf_counter() - t0
      jax_curve.append(quality(port.sample(state, jax.random.fold_in(jax.random.PRNGKey(1), e))))

  def summary(curve):
    best = max(range(len(curve)), key=lambda i: curve[i]['LogLikelihood'])
    return {'final': curve[-1], 'best_epoch': best + 1, 'best': curve[best], 'curve': curve}

  return {'epochs': epochs, 'train_points': len(train), 'ref_s': ref_s, 'jax_s': jax_s,
          'compile_s': compile_s, 'ref_mb': mem_ref.mb, 'jax_mb': mem_jax.mb,
          'quality': {'jax': summary(jax_curve), 'pytorch': summary(ref_curve)}}


def time_metrics(quick: bool, y: np.ndarray, points: np.ndarray) -> dict:
  """The original's metric computation (everything recomputed) against the JAX one
  (reference-set terms precomputed once, their cost reported)."""
  with measure.PeakMemory() as mem_ref:
    t0 = time.perf_counter()
    ref = reference.reference_metrics(points, y)
    ref_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  terms = port.reference_terms(y)
  jax.block_until_ready(terms)
  terms_s = time.perf_counter() - t0
  p, yj = jnp.asarray(points), jnp.asarray(y)
  t0 = time.perf_counter()
  jax.block_until_ready(port.metrics(p, yj, terms))
  compile_s = time.perf_counter() - t0
  with measure.PeakMemory() as mem_jax:
    t_jax = measure.latency_ms(lambda: jax.block_until_ready(port.metrics(p, yj, terms)),
                               2, 5 if quick else 10)
    ours = {k: float(v) for k, v in port.metrics(p, yj, terms).items()}
  diff = max(abs(ours[k] - ref[k]) for k in port.NAMES)
  return {'ref_ms': 1e3 * ref_s, 'jax_ms': t_jax, 'compile_s': compile_s, 'terms_s': terms_s,
          'ref_mb': mem_ref.mb, 'jax_mb': mem_jax.mb, 'max_abs_diff': diff, 'ref': ref,
          'jax': ours, 'terms': terms}


def time_quantum(quick: bool) -> dict:
  batch = 64 if quick else 256
  w = port.init_weights(0)
  z = np.random.default_rng(0).uniform(-1, 1, (batch, 2))
  zj, wj = jnp.asarray(z, jnp.float32), jnp.asarray(w, jnp.float32)
  t0 = time.perf_counter()
  jax.block_until_ready(port.expectations(zj, wj))
  compile_s = time.perf_counter() - t0
  t_ref = measure.latency_ms(lambda: reference.expectations_loop(z, w), 1, 3 if quick else 10)
  t_jax = measure.latency_ms(lambda: port.expectations(zj, wj).block_until_ready(), 5, 50)
  diff = float(np.max(np.abs(np.asarray(port.expectations(zj, wj)) -
                             reference.expectations_loop(z, w))))
  return {'batch': batch, 'ref_ms': t_ref, 'jax_ms': t_jax, 'compile_s': compile_s,
          'max_abs_diff': diff}


def run(quick: bool = False) -> tuple:
  """(rows for COMPARISON.md, details)."""
  y, _ = data.make_dataset()
  if quick:
    y = y[:2000]
  rng = np.random.default_rng(3)
  probe = np.concatenate([rng.standard_normal((250, 2)) + data.MEANS[0],
                          1.3 * rng.standard_normal((250, 2)) + data.MEANS[1]]).astype(np.float32)
  details = {'metrics': time_metrics(quick, y, probe)}
  terms = details['metrics'].pop('terms')
  details['step'] = {'agreement': step_agreement(False), **time_steps(False, quick)}
  details['killer_step'] = {'agreement': step_agreement(True), **time_steps(True, quick)}
  details['training'] = training_run(quick, y, terms)
  details['quantum'] = time_quantum(quick)
  rows = []
  for name, label in (('step', 'train step (5 critic + 1 generator)'),
                      ('killer_step', 'train step, killer mode (+5 predictor, RL term)')):
    d, a = details[name], details[name]['agreement']
    rows.append(measure.Row(
        'gaussgan', label, 'batch 256', 'PyTorch eager', d['ref_ms'], d['jax_ms'], d['compile_s'],
        d['ref_mb'], d['jax_mb'],
        f'same weights and noise: losses over 3 steps rel. diff {a["loss_rel_diff"]:.1e} '
        f'(tol 1e-4), weights after a step rel. diff {a["param_rel_diff"]:.1e} (tol 2e-3: '
        'Adam turns rounding in near-zero gradients into differences of up to lr)',
        a['loss_rel_diff'] < 1e-4 and a['param_rel_diff'] < 2e-3))
  t = details['training']
  q = t['quality']

  def reached(impl):
    """First epoch whose 500 samples meet both goals (None if none)."""
    return next((i + 1 for i, c in enumerate(q[impl]['curve'])
                 if c['LogLikelihood'] >= QUALITY['LogLikelihood'] and
                 c['MMDDistance'] <= QUALITY['MMDDistance']), None)

  def describe(impl):
    b, f = q[impl]['best'], q[impl]['final']
    return (f'goals first met at epoch {reached(impl)}; best LL {b["LogLikelihood"]:.2f} '
            f'(epoch {q[impl]["best_epoch"]}); final LL {f["LogLikelihood"]:.2f}, MMD '
            f'{f["MMDDistance"]:.3f}')

  rows.append(measure.Row(
      'gaussgan', f'training, {t["epochs"]} epochs', f'{t["train_points"]} points, batch 256',
      'PyTorch eager', 1e3 * t['ref_s'], 1e3 * t['jax_s'], t['compile_s'], t['ref_mb'], t['jax_mb'],
      'quality (goal: an epoch with LL >= -3.8 and MMD <= 0.15; the original: best -3.68, '
      f'final -3.76): JAX {describe("jax")}; PyTorch {describe("pytorch")}',
      quick or (reached('jax') is not None and reached('pytorch') is not None),
      f'{t["epochs"] / t["jax_s"]:.2f} vs {t["epochs"] / t["ref_s"]:.2f} epochs/s'))
  m = details['metrics']
  rows.append(measure.Row(
      'gaussgan', 'validation metrics (6)', f'500 vs {len(y)} points', 'SciPy/sklearn/PyTorch',
      m['ref_ms'], m['jax_ms'], m['compile_s'], m['ref_mb'], m['jax_mb'],
      f'max |difference| over the six metrics {m["max_abs_diff"]:.1e} (tol 1e-4)',
      m['max_abs_diff'] < 1e-4,
      f'JAX reuses reference-set terms computed once in {m["terms_s"]:.2f} s'))
  qd = details['quantum']
  rows.append(measure.Row(
      'gaussgan', 'quantum circuit <Z_i> (6 qubits, 2 layers)', f'batch {qd["batch"]}',
      'NumPy per-sample loop', qd['ref_ms'], qd['jax_ms'], qd['compile_s'], None, None,
      f'max |difference| {qd["max_abs_diff"]:.1e} (tol 1e-5)', qd['max_abs_diff'] < 1e-5))
  return rows, details


def run_for_report(quick: bool = False) -> tuple:
  rows, details = run(quick)
  q = details['training']['quality']
  lines = ['Quality of 500 generated points after each epoch of the training run (validation '
           'mode, BatchNorm running statistics; best = the epoch of highest log-likelihood), the '
           'original\'s documented final values being '
           'LogLikelihood -3.76 (ideal -3.53), KL 0.035, Wasserstein 0.28-0.37, MMD distance '
           '0.10-0.15, MMDivergence 0.08-0.10, IsPositive 0 +- 0.07:', '',
           '| implementation | ' + ' | '.join(port.NAMES) + ' |',
           '|---|' + '---|' * len(port.NAMES)]
  for impl, values in q.items():
    for label in ('final', 'best'):
      v = values[label]
      epoch = details['training']['epochs'] if label == 'final' else values['best_epoch']
      lines.append(f'| {impl}, {label} (epoch {epoch}) | ' +
                   ' | '.join(f'{v[k]:.3f}' for k in port.NAMES) + ' |')
  step, t = details['step'], details['training']
  lines += ['', f'**Speed.** One training step is {step["ref_ms"] / step["jax_ms"]:.2f}x and an '
            f'epoch {t["ref_s"] / t["jax_s"]:.2f}x faster in JAX: the step is about sixty '
            '256-wide matrix products (5 critic updates, each with a generator pass, critic '
            'passes on real, fake and interpolated points, and the double backward of the '
            'gradient penalty), so on 2 CPU cores both frameworks spend most of it in the same '
            'GEMM kernels; fusing the rest into one program (lax.scan over the critic updates '
            'and over the epoch) removes the Python and dispatch overhead, which is the '
            'difference. Where the original spent its time, the validation metrics (20,000 x '
            '20,000 kernels rebuilt every epoch) and the per-sample quantum circuit, the JAX '
            'versions are two orders of magnitude faster.']
  return rows, details, lines
