"""Timing and memory helpers shared by the comparison workloads.

Two timing modes, as in the Genesis benchmark: per-call latency (the call waits for its
result; warmup excluded; outliers beyond 2.5 IQR dropped; median) and batched
throughput (many calls issued, one wait at the end; mean). Peak memory is the rise of
the process's resident set over its level at the start, sampled by a thread.
"""

import dataclasses
import os
import threading
import time
from typing import Callable, Optional

import numpy as np

_PAGE = os.sysconf('SC_PAGE_SIZE') if hasattr(os, 'sysconf') else 4096


def torch_fp32():
  """PyTorch (imported on demand: only the references need it), set to full float32
  precision: no TF32 in matmuls or convolutions, as on the JAX side."""
  import torch
  torch.set_float32_matmul_precision('highest')
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  return torch


def rss_mb() -> float:
  """Resident set size of this process (MiB)."""
  try:
    with open('/proc/self/statm') as f:
      return int(f.read().split()[1]) * _PAGE / 2**20
  except OSError:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
  """Context manager: `.mb` is the peak RSS rise (MiB) while active, sampled every 2 ms."""

  def __init__(self):
    self.mb = 0.0
    self._stop = threading.Event()

  def _sample(self):
    while not self._stop.is_set():
      self.mb = max(self.mb, rss_mb() - self._base)
      time.sleep(0.002)

  def __enter__(self):
    self._base = rss_mb()
    self._thread = threading.Thread(target=self._sample, daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()
    self.mb = max(self.mb, rss_mb() - self._base)
    return False


def iqr_median(times, factor: float = 2.5) -> float:
  """Median of `times` after dropping those beyond `factor` interquartile ranges."""
  t = np.asarray(times)
  q1, q3 = np.percentile(t, [25, 75])
  keep = t[(t >= q1 - factor * (q3 - q1)) & (t <= q3 + factor * (q3 - q1))]
  return float(np.median(keep if keep.size else t))


def latency_ms(call: Callable, warmup: int = 20, iters: int = 100,
               max_seconds: Optional[float] = None) -> float:
  """Per-call latency (ms): `call()` must return only once its result exists (for JAX,
  block_until_ready inside). Stops early after `max_seconds` (at least 5 calls)."""
  for _ in range(warmup):
    call()
  times, start = [], time.perf_counter()
  for i in range(iters):
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
    if max_seconds and i >= 4 and time.perf_counter() - start > max_seconds:
      break
  return 1e3 * iqr_median(times)


def throughput_ms(issue: Callable, wait: Callable, warmup: int = 5, iters: int = 100) -> float:
  """Mean ms per call when `iters` calls of `issue()` are queued and `wait(outputs)` is
  called once at the end (every output is kept, so none can be skipped)."""
  wait([issue() for _ in range(warmup)])
  t0 = time.perf_counter()
  outs = [issue() for _ in range(iters)]
  wait(outs)
  return 1e3 * (time.perf_counter() - t0) / iters


@dataclasses.dataclass
class Row:
  """One line of COMPARISON.md: the same work done by the reference and by the JAX port."""
  workload: str
  item: str
  size: str
  reference: str  # Framework of the reference implementation.
  ref_ms: float
  jax_ms: float
  compile_s: Optional[float]  # JAX compile time, excluded from jax_ms.
  ref_peak_mb: Optional[float]
  jax_peak_mb: Optional[float]
  agreement: str  # What was compared and how close it is.
  agrees: bool
  note: str = ''

  @property
  def speedup(self) -> float:
    return self.ref_ms / self.jax_ms


def fmt_ms(ms: float) -> str:
  if ms >= 1000:
    return f'{ms / 1000:.2f} s'
  return f'{ms:.3f} ms' if ms < 1 else f'{ms:.1f} ms'
