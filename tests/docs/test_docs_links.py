"""docs/check_links.py, the offline internal-link check of the course site, finds broken links."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check_links():
    spec = importlib.util.spec_from_file_location("check_links", ROOT / "docs" / "check_links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_broken_links_and_anchors_are_found(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#intro">ok</a> <a href="sub/page.html#nope">bad anchor</a>'
        '<a href="missing.html">missing</a> <img src="_images/x.png">'
        '<a href="https://example.org/x">external</a> <a href="#top" id="top">self</a>')
    (tmp_path / "sub" / "page.html").write_text('<h1 id="intro">Intro</h1><a href="../index.html">up</a>')
    bad = _check_links().broken_links(tmp_path)
    assert sorted(bad) == sorted(["index.html: sub/page.html#nope (no such anchor)",
                                  "index.html: missing.html", "index.html: _images/x.png"])


def test_a_clean_site_has_no_broken_links(tmp_path):
    (tmp_path / "index.html").write_text('<a href="a.html">a</a>')
    (tmp_path / "a.html").write_text('<a href="index.html#">back</a>')
    assert _check_links().broken_links(tmp_path) == []


def test_theme_templates_in_static_are_not_pages(tmp_path):
    # pydata-sphinx-theme copies Jinja macro files named *.html into _static/: their "links" are
    # template code, not the site's; a page that links to a missing file of _static/ still counts
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "webpack-macros.html").write_text('<link href="{{ pathto(x) }}">')
    (tmp_path / "index.html").write_text('<script src="_static/gone.js"></script>')
    assert _check_links().broken_links(tmp_path) == ["index.html: _static/gone.js"]


def test_contributing_builds_the_site_as_ci_does():
    """CONTRIBUTING's site command is docs/build.sh (it installs MathJax; a bare sphinx-build on a
    fresh clone stops at the missing MathJax), and the browser test's command follows it."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "bash docs/build.sh docs/_build/html" in text
    assert "sphinx-build" not in text
    assert "ATTENTION_NP_SITE=docs/_build/html python -m pytest tests/site" in text
    assert "bash docs/build.sh docs/_build/html" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
