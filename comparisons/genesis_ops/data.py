"""The Genesis report's shapes, and the arrays: standard normal float32 (the report's
`np.random.randn(...).astype(float32)`), from a seeded generator."""

import numpy as np

ADD_SHAPES = ((256, 256), (512, 512), (1024, 1024), (2048, 2048), (4096, 4096), (8192, 8192))
MATMUL_SIZES = (512, 1024, 2048, 4096)
SUM_SHAPE = (4, 512, 896)
SUM_AXES = (None, -1, (0, 1))
QUICK_ADD_SHAPES = ((256, 256), (1024, 1024))
QUICK_MATMUL_SIZES = (256, 512)


def arrays(rng: np.random.Generator, shape, count: int) -> tuple:
  """`count` standard normal float32 arrays of `shape`."""
  return tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(count))
