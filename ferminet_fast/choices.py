"""The record every swappable piece has (a Laplacian method, an optimizer, an envelope, a
Jastrow factor, a clipping window): its name, the factory that makes it, one line of what it
is, and the optional package it needs. Each piece keeps its records beside its code, in one
table (`table`); the settings take their allowed names from those tables, and the run's
resolver turns each name into its record once, so that no code below it takes a name.

A piece whose records need more facts (whether an optimizer trains a complex wavefunction,
which systems an envelope suits) subclasses `Choice` beside its code.
"""

import dataclasses
from typing import Callable, Mapping

from ferminet_fast.environment import packages


@dataclasses.dataclass(frozen=True)
class Choice:
  """One choice of a swappable piece. Calling it calls its factory."""
  name: str
  factory: Callable
  doc: str  # What it is, in a phrase (the settings' help lists it).
  package: str = ''  # The optional package it needs ('' none), by its import name.

  def __call__(self, *args, **kwargs):
    return self.factory(*args, **kwargs)

  def installed(self) -> bool:
    """Whether the package it needs (if any) is installed."""
    return not self.package or packages.installed(self.package)

  def __repr__(self) -> str:
    return f'<{type(self).__name__} {self.name!r}>'


def table(*choices: Choice) -> Mapping[str, Choice]:
  """name -> record, in the order given; a name given twice is an error."""
  out = {}
  for choice in choices:
    if choice.name in out:
      raise ValueError(f'two choices named {choice.name!r}')
    out[choice.name] = choice
  return out


def pick(choices: Mapping[str, Choice], name: str, what: str) -> Choice:
  """The record named `name` in `choices` (a table); `what` names the setting in the error."""
  if name not in choices:
    raise ValueError(f'{what} = {name!r} is not one of {", ".join(choices)}')
  return choices[name]
