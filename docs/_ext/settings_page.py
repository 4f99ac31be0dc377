"""Write the settings reference page from `ferminet_fast.config.SETTINGS`.

Every key is declared once, in config.py, with its default, meaning and whether it fixes
the shapes of the saved state. This extension turns that declaration into
reference/settings.md when a build starts, so that the page cannot drift from the code.
The file is generated (and ignored by git); edit config.py, not the page.
"""

import os
import re

PAGE = os.path.join('reference', 'settings.md')

# Sections of the page: the first part of each key; keys without a dot are 'general'.
TITLES = {
    '': 'General', 'system': 'System', 'network': 'Network', 'optim': 'Optimisation',
    'pretrain': 'Hartree–Fock pretraining', 'mcmc': 'Sampling', 'evaluation': 'Evaluation',
    'log': 'Logging, checkpoints and timers', 'distributed': 'Devices and processes',
    'debug': 'Debugging and reproducibility',
}

HEADER = """\
# Settings

Every setting of a run, generated from the declarations in `ferminet_fast/config.py`
(`SETTINGS`). On the command line any key is overridden as `--config.KEY=VALUE`;
`python -m ferminet_fast.train --help-config` prints the same list and `--dry-run`
prints the resolved config of a command. Keys marked **fixes the state** determine the
shapes of the saved training state and cannot change when a run resumes.
"""

_CODE = re.compile(r'(`[^`]*`)')


def _text(doc: str) -> str:
  """A docstring as one Markdown table cell: markup characters escaped outside `code`."""
  parts = _CODE.split(' '.join(doc.split()))
  for i, part in enumerate(parts):
    if i % 2 == 0:
      parts[i] = re.sub(r'([\\*_<>\[\]|$#])', r'\\\1', part)
    else:
      parts[i] = part.replace('|', '\\|')
  return ''.join(parts)


def _code(value) -> str:
  return '`' + repr(value).replace('|', '\\|') + '`'


def render(settings) -> str:
  blocks = {}
  for key, setting in settings.items():
    block = key.split('.')[0] if '.' in key else ''
    blocks.setdefault(block, []).append((key, setting))
  lines = [HEADER]
  for block, entries in blocks.items():
    lines += [f'## {TITLES.get(block, block)}', '',
              '| key | default | meaning |', '|---|---|---|']
    for key, setting in entries:
      fixes = ' **fixes the state**' if setting.structural else ''
      lines.append(f'| `{key}` | {_code(setting.default)} | {_text(setting.doc)}{fixes} |')
    lines.append('')
  return '\n'.join(lines)


def write_page(app):
  from ferminet_fast import config  # After conf.py has put the checkout on sys.path.
  path = os.path.join(app.srcdir, PAGE)
  text = render(config.SETTINGS)
  old = open(path, encoding='utf-8').read() if os.path.exists(path) else None
  if text != old:  # Unchanged content keeps the page's cached build.
    with open(path, 'w', encoding='utf-8') as f:
      f.write(text)


def setup(app):
  app.connect('builder-inited', write_page)
  return {'parallel_read_safe': True, 'parallel_write_safe': True}
