"""The built course site, read as a reader reads it: every page in headless Chromium, served from
127.0.0.1 with nothing else reachable.

Not part of the default ``python -m pytest`` run (that one builds no site: it skips here). After
``bash docs/build.sh docs/_build/html``:

    ATTENTION_NP_SITE=docs/_build/html python -m pytest tests/site -q

Chromium is Debian's (``apt-get install chromium``), driven by playwright (``pip install
playwright``, part of the ``docs`` extra) with ``executable_path``: playwright's own browser is never
downloaded. Screenshots of lesson 2, the API reference and the home page at 1280 px and 390 px land in
``$ATTENTION_NP_SITE_SHOTS`` (default: the system temp dir's ``attention_np_site_shots/``).

Each page must show no raw TeX (in its visible text, outside code, or in its title), typeset every
formula it has (no MathJax error either), load every image, ask for nothing from another host, raise
no script error, and at 390 px fit the screen's width with its navigation one tap away in the first
screen.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

SITE = os.environ.get("ATTENTION_NP_SITE", "")
SHOTS = Path(os.environ.get("ATTENTION_NP_SITE_SHOTS",
                            Path(tempfile.gettempdir()) / "attention_np_site_shots"))
CHROMIUM = next((p for p in (os.environ.get("CHROMIUM", ""), shutil.which("chromium"),
                             shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).is_file()), None)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 900}
SCREENSHOTS = {"lessons/02_why_scale_by_sqrt_dk.html": "lesson02", "api.html": "api",
               "index.html": "index", "reference.html": "reference"}

# Raw TeX a reader should never see: math delimiters and the commands this course's formulas use.
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\(?:frac|sqrt|top|cdot|mathrm|mathbf|text|sum|exp|log|max|"
                     r"begin|end|left|right|alpha|beta|gamma|epsilon|infty|partial|odot|quad|approx|"
                     r"le|ge|ne|in|times)(?![A-Za-z])")


def _pages() -> list[str]:
    if not SITE:
        return []
    root = Path(SITE)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.html")
                  if p.relative_to(root).parts[0] != "_static")


def _why_skip() -> str | None:
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


SKIP = _why_skip()
# skipif, not a skip in the test: the fixtures (a server, a browser) are never set up when skipping
pytestmark = [pytest.mark.site, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]


@pytest.fixture(scope="module")
def server():
    """The site over http on 127.0.0.1, a free port; stopped after the module's tests."""
    handler = functools.partial(_QuietHandler, directory=str(Path(SITE).resolve()))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium with a fresh profile; every request it makes is recorded, and any request to a
    host other than 127.0.0.1 is recorded and refused (so no test waits on a network)."""
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=FLAGS, viewport=DESKTOP, service_workers="block")

        def route(r):
            requests.append(r.request.url)
            host = urlsplit(r.request.url).hostname
            if urlsplit(r.request.url).scheme in ("data", "blob", "about") or host == "127.0.0.1":
                r.continue_()
            else:
                r.abort()
        context.route("**/*", route)
        context.on("request", lambda req: requests.append(req.url))
        yield context, requests
        context.close()


def _foreign(urls):
    return sorted({u for u in urls if urlsplit(u).scheme not in ("data", "blob", "about")
                   and urlsplit(u).hostname != "127.0.0.1"})


# The text a reader sees, outside code: visible text nodes whose ancestors are not code, scripts or
# MathJax output (whose assistive MathML is text too, and not TeX).
_VISIBLE_TEXT = """() => {
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA", "NOSCRIPT", "MJX-CONTAINER", "KBD"]);
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    let el = n.parentElement, hidden = false;
    for (let a = el; a; a = a.parentElement) { if (skip.has(a.tagName)) { hidden = true; break; } }
    if (hidden || !el.checkVisibility({visibilityProperty: true, opacityProperty: false})) continue;
    if (n.textContent.trim()) out.push(n.textContent);
  }
  return out.join(" ");
}"""

_MATH = """() => {
  const math = [...document.querySelectorAll(".math")];
  return {
    math: math.length,
    untypeset: math.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.slice(0, 80)),
    containers: document.querySelectorAll("mjx-container").length,
    errors: [...document.querySelectorAll("mjx-merror")].map(e => e.textContent.slice(0, 80)),
  };
}"""

_IMAGES = """async () => {
  const imgs = [...document.images];
  for (const img of imgs) { img.loading = "eager"; }
  await Promise.all(imgs.map(img => img.decode().catch(() => null)));
  return imgs.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src);
}"""

# Code, outputs, tables and display math wider than the text column must scroll inside it: a box
# whose content is wider than itself with no scrolling box between it and the article is cut off.
_CUT_OFF = """() => {
  const article = document.querySelector(".bd-article");
  if (!article) return [];
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  return [...article.querySelectorAll("pre, table, div.math, mjx-container")].filter(el => {
    if (el.scrollWidth <= el.clientWidth + 1 && el.getBoundingClientRect().right <=
        article.getBoundingClientRect().right + 1) return false;
    for (let a = el; a && a !== article; a = a.parentElement) { if (scrolls(a)) return false; }
    return true;
  }).map(el => el.tagName + ": " + el.textContent.trim().slice(0, 60));
}"""

_TYPESET = """async () => {
  if (!window.MathJax || !window.MathJax.startup) return "no MathJax";
  await window.MathJax.startup.promise;
  return "ok";
}"""


def _open(context, url, viewport):
    page = context.new_page()
    page.set_viewport_size(viewport)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="load")
    mathjax = page.evaluate(_TYPESET)
    return page, errors, mathjax


@pytest.mark.parametrize("name", _pages() or ["(no site)"])
def test_page_reads_offline(name, server, browser):
    context, requests = browser
    requests.clear()
    page, errors, mathjax = _open(context, server + name, DESKTOP)
    try:
        problems = []
        if mathjax != "ok":
            problems.append(f"MathJax is not loaded: {mathjax}")
        if RAW_TEX.search(page.title()):
            problems.append(f"raw TeX in the title: {page.title()!r}")
        text = page.evaluate(_VISIBLE_TEXT)
        raw = sorted({text[max(0, m.start() - 30):m.end() + 30] for m in RAW_TEX.finditer(text)})
        if raw:
            problems.append(f"raw TeX in the visible text: {raw[:5]}")
        math = page.evaluate(_MATH)
        if math["untypeset"]:
            problems.append(f"{len(math['untypeset'])} of {math['math']} formulas not typeset, "
                            f"e.g. {math['untypeset'][:3]}")
        if math["errors"]:
            problems.append(f"MathJax errors: {math['errors'][:3]}")
        cut = page.evaluate(_CUT_OFF)
        if cut:
            problems.append(f"wider than the text column and not scrollable: {cut[:3]}")
        broken = page.evaluate(_IMAGES)
        if broken:
            problems.append(f"images not loaded: {broken}")
        if name in SCREENSHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"{SCREENSHOTS[name]}-1280.png", full_page=False)
        page.wait_for_timeout(100)             # let late requests (fonts, the speech worker) start
        foreign = _foreign(requests)
        if foreign:
            problems.append(f"requests to other hosts: {foreign[:5]}")
        if errors:
            problems.append(f"script errors: {errors[:3]}")
        assert not problems, f"{name}:\n  " + "\n  ".join(problems)
    finally:
        page.close()


@pytest.mark.parametrize("name", _pages() or ["(no site)"])
def test_page_fits_a_phone(name, server, browser):
    context, _ = browser
    page, _, _ = _open(context, server + name, PHONE)
    try:
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name}: {width} px wide at {PHONE['width']} px: it scrolls sideways"
        # The navigation: a visible menu button in the first screen that opens the site's table of
        # contents, whose links are then visible on screen.
        button = page.locator(".primary-toggle:visible").first
        assert button.count() == 1, f"{name}: no visible menu button at {PHONE['width']} px"
        box = button.bounding_box()
        assert box and 0 <= box["y"] < PHONE["height"] and box["x"] + box["width"] <= PHONE["width"], (
            f"{name}: the menu button is not in the first screen: {box}")
        if name in SCREENSHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"{SCREENSHOTS[name]}-390.png")
        button.click()
        page.wait_for_function("document.getElementById('pst-primary-sidebar-modal')?.open === true",
                               timeout=5000)
        # the site's table of contents: a link to each lesson, the first of them on screen
        lessons = page.locator("#pst-primary-sidebar-modal a.reference.internal",
                               has_text="Scaled dot-product")
        lessons.first.wait_for(state="visible", timeout=5000)
        box = lessons.first.bounding_box()
        assert box and 0 <= box["x"] < PHONE["width"] and 0 <= box["y"] < PHONE["height"], (
            f"{name}: the opened navigation is off screen: {box}")
        count = page.evaluate("""() => [...document.querySelectorAll(
            "#pst-primary-sidebar-modal a.reference.internal")].filter(
            a => /^[1-9]\\. /.test(a.textContent.trim())).length""")
        assert count >= 9, f"{name}: the opened navigation lists {count} lessons, not 9"
        if name in SCREENSHOTS:
            page.screenshot(path=SHOTS / f"{SCREENSHOTS[name]}-390-menu.png")
    finally:
        page.close()


def test_search_results_show_no_raw_tex(server, browser):
    """The search page: a query that finds lesson 2 shows its title and snippet without raw TeX."""
    context, requests = browser
    requests.clear()
    page, errors, _ = _open(context, server + "search.html?q=divide+sqrt", DESKTOP)
    try:
        page.locator("#search-results li").first.wait_for(timeout=15000)
        page.wait_for_function("() => document.querySelector('#search-results p.search-summary')")
        page.wait_for_timeout(1500)            # snippets arrive one by one, then MathJax typesets them
        page.evaluate(_TYPESET)
        # docs/site.md quotes, as code, the TeX this test forbids; a snippet is plain text and
        # cannot show code as code, so that one result is left out
        text = page.evaluate("""() => [...document.querySelectorAll("#search-results li")]
            .filter(li => !li.querySelector("a[href*='site.html']")).map(li => li.innerText).join(" ")""")
        assert "Why divide by √dₖ?" in text, f"lesson 2 is not among the results: {text[:300]}"
        raw = sorted({text[max(0, m.start() - 30):m.end() + 30] for m in RAW_TEX.finditer(text)})
        assert not raw, f"raw TeX in the search results: {raw[:5]}"
        assert not _foreign(requests), _foreign(requests)
        assert not errors, errors
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "search-1280.png")
    finally:
        page.close()


def test_a_lesson_page_has_what_a_course_page_needs(server, browser):
    """Lesson 2: previous/next links to lessons 1 and 3, the favicon, a copy button on code, and
    the note on how to run it (with its download link)."""
    context, _ = browser
    page, errors, _ = _open(context, server + "lessons/02_why_scale_by_sqrt_dk.html", DESKTOP)
    try:
        prev = page.locator(".prev-next-area a.left-prev")
        nxt = page.locator(".prev-next-area a.right-next")
        assert "01_scaled_dot_product_attention" in (prev.get_attribute("href") or "")
        assert "03_multi_head_attention" in (nxt.get_attribute("href") or "")
        icon = page.locator("link[rel='icon']").get_attribute("href")
        assert icon and page.request.get(server + "lessons/" + icon).ok, f"favicon {icon} not served"
        page.locator("div.highlight").first.hover()
        assert page.locator("button.copybtn").count() > 0, "no copy buttons on code"
        note = page.locator(".launch-note")
        assert note.count() == 1 and "Run this lesson" in note.inner_text()
        link = note.locator("a[download]")
        assert link.count() == 1 and page.request.get(server + "lessons/" + link.get_attribute("href")).ok
        assert not errors, errors
    finally:
        page.close()
