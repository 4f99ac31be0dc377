"""The package's own exceptions, at the bottom of the imports: every module may raise them."""


class InputError(ValueError):
  """Bad user input (config, geometry, paths): reported as one line, no traceback."""


class TrainingError(RuntimeError):
  """Training cannot go on (e.g. diverged); the last good state is checkpointed."""
