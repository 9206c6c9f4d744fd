"""What the site's browser tests share (tests/site): where the built site is, the Chromium to read
it with, and helpers. The fixtures (a server on 127.0.0.1, a browser that refuses every other host)
are in conftest.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

SITE = os.environ.get("ATTENTION_NP_SITE", "")
SHOTS = Path(os.environ.get("ATTENTION_NP_SITE_SHOTS",
                            Path(tempfile.gettempdir()) / "attention_np_site_shots"))
CHROMIUM = next((p for p in (os.environ.get("CHROMIUM", ""), shutil.which("chromium"),
                             shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).is_file()), None)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 900}


def pages() -> list[str]:
    if not SITE:
        return []
    root = Path(SITE)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.html")
                  if p.relative_to(root).parts[0] not in ("_static", "slides"))   # decks: their own test


def why_skip() -> str | None:
    if not SITE:
        return ("no built site: run `bash docs/build.sh docs/_build/html`, then "
                "`ATTENTION_NP_SITE=docs/_build/html python -m pytest tests/site`")
    if not (Path(SITE) / "index.html").is_file():
        return f"ATTENTION_NP_SITE={SITE} has no index.html: build it with bash docs/build.sh {SITE}"
    if CHROMIUM is None:
        return "no Chromium installed (apt-get install chromium): the site's browser test cannot run"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; its own browsers are not needed)"
    return None


SKIP = why_skip()


def foreign(urls):
    return sorted({u for u in urls if urlsplit(u).scheme not in ("data", "blob", "about")
                   and urlsplit(u).hostname != "127.0.0.1"})


TYPESET = """async () => {
  if (!window.MathJax || !window.MathJax.startup) return "no MathJax";
  await window.MathJax.startup.promise;
  return "ok";
}"""


def open_page(context, url, viewport):
    page = context.new_page()
    page.set_viewport_size(viewport)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="load")
    mathjax = page.evaluate(TYPESET)
    return page, errors, mathjax


