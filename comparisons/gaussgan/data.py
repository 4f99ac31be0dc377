"""GaussGAN's data: the two-Gaussian mixture N((-5, 5), I) + N((5, 5), I), 10,000 points
each (20,000 reference points), split 80/10/10 (16,000 training points).
"""

import numpy as np




MEANS = np.array([[-5.0, 5.0], [5.0, 5.0]], np.float32)


def make_dataset(seed: int = 41, per_component: int = 10_000) -> tuple:
  """(all 20,000 points, the 16,000 training points): the mixture, shuffled, 80% kept."""
  rng = np.random.default_rng(seed)
  x = np.concatenate([rng.standard_normal((per_component, 2)) + m for m in MEANS])
  x = x.astype(np.float32)[rng.permutation(2 * per_component)]
  return x, x[:int(0.8 * len(x))]
