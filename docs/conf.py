"""Sphinx configuration of the ferminet_fast documentation.

Pages are MyST Markdown. The settings reference is written from `ferminet_fast.config.SETTINGS`
at build time (`_ext/settings_page.py`); the API reference comes from the docstrings.
"""

import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
sys.path.insert(0, ROOT)  # The package from this checkout, installed or not.
sys.path.insert(0, os.path.join(DOCS, '_ext'))

project = 'ferminet_fast'
author = 'ferminet_fast contributors'
copyright = '%Y, ferminet_fast contributors'

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.autosummary',
    'settings_page',
    'plain_docstrings',
]

source_suffix = {'.md': 'markdown', '.rst': 'restructuredtext'}  # .rst: autosummary's stubs.
exclude_patterns = ['_build', 'Thumbs.db', '.DS_Store']
root_doc = 'index'

# Markdown: heading anchors so that links such as ACCURACY.md#excited-states resolve.
myst_heading_anchors = 3
myst_enable_extensions = ['colon_fence']

# Docstrings are plain prose with `code` in backticks: render backticks as literals.
default_role = 'literal'
autodoc_default_options = {'members': True, 'undoc-members': False, 'show-inheritance': False}
autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
autodoc_mock_imports = ['pyscf', 'folx', 'matplotlib', 'tensorboardX']
autosummary_generate = True
autosummary_imported_members = False

html_theme = 'furo'
html_title = 'ferminet_fast'
html_static_path = []
