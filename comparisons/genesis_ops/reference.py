"""The Genesis report's op kernels as its baselines ran them: PyTorch (the report's
reference, float32 matmul at full precision with TF32 off, see measure.torch_fp32) and
NumPy; and each op in float64 with NumPy, the ground truth both are checked against."""

import numpy as np


def add(torch):
  """(PyTorch, NumPy, float64) elementwise add."""
  return torch.add, np.add, lambda a, b: a.astype(np.float64) + b


def matmul(torch):
  """(PyTorch, NumPy, float64) square matmul."""
  return (torch.matmul, np.matmul,
          lambda a, b: a.astype(np.float64) @ b.astype(np.float64))


def total(torch, axis):
  """(PyTorch, NumPy, float64) sum over `axis` (None: all)."""
  return ((lambda a: torch.sum(a)) if axis is None else (lambda a: torch.sum(a, dim=axis)),
          lambda a: np.sum(a, axis=axis),
          lambda a: np.sum(a.astype(np.float64), axis=axis))
