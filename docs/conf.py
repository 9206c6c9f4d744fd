"""Sphinx configuration of the course site: docs/*.md, the lessons (notebooks/) and the
exercises (exercises/) rendered from their committed outputs, and an API reference.

Build (pages land in docs/_build/html/index.html):

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))          # autodoc imports this checkout's attention_np

# The notebooks live outside docs/: copy them in (docs/lessons/, docs/exercises/ are generated
# and ignored by git); myst-nb renders their committed outputs and never executes them.
for src, dst in (("notebooks", "lessons"), ("exercises", "exercises")):
    out = DOCS / dst
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for nb in sorted((ROOT / src).glob("*.ipynb")):
        shutil.copy2(nb, out / nb.name)
# An exercise links its lessons as ../notebooks/NAME.ipynb (right in the repository); on the site
# the lessons are in lessons/.
for nb in (DOCS / "exercises").glob("*.ipynb"):
    nb.write_text(nb.read_text().replace("](../notebooks/", "](../lessons/"))

project = "attention_np"
author = "attention_np contributors"
copyright = "attention_np contributors"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
nb_execution_mode = "off"              # render the committed outputs; never execute
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "alabaster"
html_title = "attention_np: a course on §3.2 of Attention Is All You Need"


def _outside_markdown_as_download(app, docname, source):
    """A link such as ``[x](../benchmarks/README.md)`` works on GitHub but names no page of the
    site: MyST would warn. Make it a download of the file (``path:``), as links to .py files are."""
    import re

    here = (DOCS / docname).parent

    def fix(match):
        target = (here / match.group(1)).resolve()
        if DOCS in target.parents or not target.is_file():
            return match.group(0)
        return f"](path:{match.group(1)})"
    source[0] = re.sub(r"\]\((\.\./[^)#\s]+\.md)(?:#[^)\s]*)?\)", fix, source[0])


def setup(app):
    app.connect("source-read", _outside_markdown_as_download)
