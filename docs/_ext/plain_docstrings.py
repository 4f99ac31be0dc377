"""Render this project's docstrings, which are plain prose rather than reStructuredText.

The docstrings write code in `backticks` (shown as literals through `default_role`), use
'|', '*' and trailing underscores as ordinary characters (|psi|^2, a * b, name_), indent
formulas under the sentence that introduces them and end lists without a blank line.
Before autodoc parses a docstring, this hook escapes those characters outside backtick
spans, turns indented formula lines into literal blocks and puts blank lines where an
indented block or a list ends, so that every docstring renders without warnings and reads
as written.
"""

import re

_BULLET = re.compile(r'^(\s*)([-*+]|\d+[.)])\s+')
_CODE = re.compile(r'(`[^`]*`)')


def _escape(text: str) -> str:
  """Backslash-escape reST markup characters outside `code` spans."""
  parts = _CODE.split(text)
  for i in range(0, len(parts), 2):
    part = parts[i].replace('\\', '\\\\')
    part = re.sub(r'([|*])', r'\\\1', part)
    part = re.sub(r'(\w)_(?=\W|$)', r'\1\\_', part)  # name_ is a reference in reST.
    parts[i] = part
  return ''.join(parts)


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


def _content_column(line: str) -> int:
  """Where a line's text starts: after the marker for a list item."""
  m = _BULLET.match(line)
  return m.end() if m else _indent(line)


def plain_to_rst(lines: list) -> list:
  out = []
  previous = None      # The last non-blank line outside a literal block.
  literal_base = None  # Content column of the text that a literal block belongs to.
  for line in lines:
    if not line.strip():
      out.append('')
      continue
    indent = _indent(line)
    if literal_base is not None:
      if indent > literal_base:
        out.append(line)
        continue
      literal_base = None
      out.append('')
      previous = None
    if previous is not None:
      column = _content_column(previous)
      if out[-1] != '' and indent > column:
        # An indented formula under a sentence: a literal block, kept as written.
        literal_base = column
        out.extend(['', ' ' * column + '::', '', line])
        continue
      if out[-1] != '' and (indent < column or
                            (_BULLET.match(line) and not _BULLET.match(previous))):
        out.append('')  # A list or block ends, or a list starts after a sentence.
    out.append(_escape(line))
    previous = line
  return out


def _process(app, what, name, obj, options, lines):
  lines[:] = plain_to_rst(lines)


def setup(app):
  app.connect('autodoc-process-docstring', _process)
  return {'parallel_read_safe': True, 'parallel_write_safe': True}
