"""Optional packages: whether one is installed, without importing it."""

import importlib.util


def installed(package: str) -> bool:
  return importlib.util.find_spec(package) is not None
