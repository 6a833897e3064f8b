"""Sphinx configuration of remindkit's documentation (Sphinx + MyST Markdown).

Build it strictly, as the tests do (tests/test_docs.py)::

    .venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

Warnings are errors: a broken link between pages, a missing anchor or a page left
out of the table of contents fails the build. The reference pages are made from the
code as the site is built (docs/_ext/refpages.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

from remindkit import __version__  # noqa: E402

project = "remindkit"
author = "remindkit"
copyright = "remindkit's authors"  # noqa: A001 - Sphinx's name
release = __version__

extensions = ["myst_parser", "remindkit_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4  # [text](page.md#a-heading) links, checked by the build

smartquotes = False  # "--tz" stays two hyphens, quotes stay straight

html_theme = "furo"
html_title = "remindkit"
html_static_path: list[str] = []
html_copy_source = False
html_show_sourcelink = False
