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

import re

import pytest

from tests.site.browser import DESKTOP, PHONE, SHOTS, SKIP, TYPESET, foreign, open_page, pages

SCREENSHOTS = {"lessons/02_why_scale_by_sqrt_dk.html": "lesson02", "api.html": "api",
               "index.html": "index", "reference.html": "reference", "explorer.html": "explorer",
               "teaching.html": "teaching"}
MULTI_PANEL = ("lessons/01_scaled_dot_product_attention.html", "lessons/02_why_scale_by_sqrt_dk.html",
               "lessons/07_tiling_and_kv_cache.html")

# Raw TeX a reader should never see: math delimiters and the commands this course's formulas use.
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\(?:frac|sqrt|top|cdot|mathrm|mathbf|text|sum|exp|log|max|"
                     r"begin|end|left|right|alpha|beta|gamma|epsilon|infty|partial|odot|quad|approx|"
                     r"le|ge|ne|in|times)(?![A-Za-z])")


# skipif, not a skip in the test: the fixtures (a server, a browser) are never set up when skipping
pytestmark = [pytest.mark.site, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]


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

# Every figure of the text opens at full size: it is a link to its own file (figure_zoom.js), and
# the file is at least as large as the figure is shown (less its 1 px border).
_UNLINKED_FIGURES = """() => [...document.querySelectorAll(".bd-article img")].filter(img => {
  const a = img.closest("a");
  return !a || a.href !== img.currentSrc || img.naturalWidth < img.getBoundingClientRect().width - 3;
}).map(img => img.src)"""

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

# The pages a later test reads again (the two slowest to load): the load of the two tests below is
# left open here for it, and handed over once (see `kept_or_loaded`).
LESSON_2 = "lessons/02_why_scale_by_sqrt_dk.html"
KEPT: dict = {"reference.html": None, LESSON_2: None}


@pytest.fixture(scope="module", params=pages() or ["(no site)"])
def loaded(request, server, browser):
    """One page of the site, loaded once (at 1280 px) for the two tests below: pytest runs both on
    it before loading the next page. Typesetting its math is most of a page's load time, and MathJax's
    output does not depend on the width (its displayOverflow is "overflow": no line breaking to a
    width), so test_page_fits_a_phone resizes this load to 390 px instead of loading it again."""
    name = request.param
    context, requests = browser
    requests.clear()
    page, errors, mathjax = open_page(context, server + name, DESKTOP)
    yield name, page, errors, mathjax
    if name in KEPT:
        KEPT[name] = page, errors
    else:
        page.close()


def kept_or_loaded(context, server, name, viewport):
    """Page ``name`` at ``viewport``, with the list its script errors go to: the load the two tests
    above left open (its menu closed again, scrolled to the top, resized), or else a new load."""
    page, errors = KEPT.get(name) or (None, None)
    KEPT[name] = None
    if page is None or page.is_closed():
        page, errors, _ = open_page(context, server + name, viewport)
        return page, errors
    page.evaluate("document.getElementById('pst-primary-sidebar-modal')?.close(); window.scrollTo(0, 0)")
    page.set_viewport_size(viewport)
    return page, errors


def test_page_reads_offline(loaded, browser):
    name, page, errors, mathjax = loaded
    _, requests = browser
    page.set_viewport_size(DESKTOP)
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
    unlinked = page.evaluate(_UNLINKED_FIGURES)
    if unlinked:
        problems.append(f"figures that do not open at full size (no link to their file): {unlinked[:3]}")
    if name in SCREENSHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / f"{SCREENSHOTS[name]}-1280.png", full_page=False)
    page.wait_for_timeout(100)             # let late requests (fonts, the speech worker) start
    elsewhere = foreign(requests)
    if elsewhere:
        problems.append(f"requests to other hosts: {elsewhere[:5]}")
    if errors:
        problems.append(f"script errors: {errors[:3]}")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_page_fits_a_phone(loaded):
    name, page, _, _ = loaded
    page.set_viewport_size(PHONE)
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
    if name in MULTI_PANEL:
        # the multi-panel figures, shrunk to the phone's width, open (their link) at least twice
        # as wide as shown: their labels are readable there
        sizes = page.evaluate("""() => [...document.querySelectorAll(".bd-article a.figure-zoom img")]
            .map(img => [img.naturalWidth, img.getBoundingClientRect().width])""")
        wide = [s for s in sizes if s[0] >= 700]
        assert wide and all(natural >= 2 * shown for natural, shown in wide), (name, sizes)
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


def test_search_results_show_no_raw_tex(server, browser):
    """The search page: a query that finds lesson 2 shows its title and snippet without raw TeX."""
    context, requests = browser
    requests.clear()
    page, errors, _ = open_page(context, server + "search.html?q=divide+sqrt", DESKTOP)
    try:
        page.locator("#search-results li").first.wait_for(timeout=15000)
        page.wait_for_function("() => document.querySelector('#search-results p.search-summary')")
        page.wait_for_timeout(1500)            # snippets arrive one by one, then MathJax typesets them
        page.evaluate(TYPESET)
        # docs/site.md quotes, as code, the TeX this test forbids; a snippet is plain text and
        # cannot show code as code, so that one result is left out
        text = page.evaluate("""() => [...document.querySelectorAll("#search-results li")]
            .filter(li => !li.querySelector("a[href*='site.html']")).map(li => li.innerText).join(" ")""")
        assert "Why divide by √dₖ?" in text, f"lesson 2 is not among the results: {text[:300]}"
        raw = sorted({text[max(0, m.start() - 30):m.end() + 30] for m in RAW_TEX.finditer(text)})
        assert not raw, f"raw TeX in the search results: {raw[:5]}"
        assert not foreign(requests), foreign(requests)
        assert not errors, errors
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "search-1280.png")
    finally:
        page.close()


def test_a_lesson_page_has_what_a_course_page_needs(server, browser):
    """Lesson 2: previous/next links to lessons 1 and 3, the favicon, a copy button on code, and
    the note on how to run it (with its download link)."""
    context, _ = browser
    page, errors = kept_or_loaded(context, server, LESSON_2, DESKTOP)
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


# ---- What a reader reported --------------------------------------------------------------------

def _searchindex() -> dict:
    import json
    from pathlib import Path

    from tests.site.browser import SITE

    text = (Path(SITE) / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text.split("(", 1)[1].rstrip().rstrip(";").removesuffix(")"))


# A name mangled by the TeX-to-text step: a subscript letter between two letters ("causalₘask").
MANGLED = re.compile(r"[A-Za-z][ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ][A-Za-z]")


def test_search_titles_are_the_objects_names(server, browser):
    index = _searchindex()
    titles = [*index.get("alltitles", {}), *index.get("titles", [])]
    assert not [t for t in titles if MANGLED.search(t)], [t for t in titles if MANGLED.search(t)][:5]
    assert any(t.startswith("causal_mask(") for t in index["alltitles"]), "causal_mask's title is lost"
    assert "2. Why divide by √dₖ?" in index["titles"]          # a title with math is still plain text
    context, _ = browser
    page, errors, _ = open_page(context, server + "search.html?q=causal_mask", DESKTOP)
    try:
        page.locator("#search-results li").first.wait_for(timeout=15000)
        page.wait_for_function("() => document.querySelector('#search-results p.search-summary')")
        links = page.locator("#search-results li > a").all_inner_texts()
        assert any("causal_mask" in t for t in links), links[:10]
        assert not [t for t in links if MANGLED.search(t)], links
        assert not errors, errors
    finally:
        page.close()


def test_search_results_fit_a_phone_and_quote_prose(server, browser):
    """At 390 px the results page is no wider than the screen (long words in snippets wrap), and a
    snippet is the page's text, not the theme's menus ("Settings Light Dark", "Contents")."""
    context, _ = browser
    page, errors, _ = open_page(context, server + "search.html?q=sliding_window_mask", PHONE)
    try:
        page.locator("#search-results li").first.wait_for(timeout=15000)
        page.wait_for_function("() => document.querySelector('#search-results p.search-summary')")
        page.wait_for_function("() => document.querySelectorAll('#search-results p.context').length >= 3",
                               timeout=20000)
        page.wait_for_timeout(1000)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the search results are {width} px wide at {PHONE['width']} px"
        snippets = page.locator("#search-results p.context").all_inner_texts()
        menu = [s for s in snippets if re.search(r"Light\s+Dark|Settings|Download this page|Skip to", s)]
        assert not menu, f"snippets quote the theme's menus: {menu[:3]}"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "search-390.png")
        assert not errors, errors
    finally:
        page.close()


def test_teaching_page_shows_its_figures(server, browser):
    from attention_np.cli.figures import FIGURES

    context, _ = browser
    page, _, _ = open_page(context, server + "teaching.html", DESKTOP)
    try:
        shown = page.evaluate("""() => [...document.querySelectorAll("figure.course-figure")].map(f => ({
            caption: f.querySelector("figcaption").innerText,
            loaded: f.querySelector("img").naturalWidth > 0}))""")
        assert [s["caption"].split(":")[0].strip() for s in shown] == list(FIGURES), shown
        assert all(s["loaded"] for s in shown), shown
    finally:
        page.close()


def test_reference_reads_paper_first_and_folds(server, browser):
    context, _ = browser
    page, _ = kept_or_loaded(context, server, "reference.html", PHONE)
    try:
        text = page.inner_text(".bd-article")
        for module in ("attention_np.paper.attention", "attention_np.paper.multihead",
                       "attention_np.paper.linear", "attention_np.paper.params"):
            assert page.locator(f"[id='module-{module}']").count() == 1, f"{module} is not documented"
        first = page.evaluate("""() => {
            const paper = document.getElementById("module-attention_np.paper.attention");
            const kernel = document.getElementById("module-attention_np.kernels.reference");
            return Boolean(paper.compareDocumentPosition(kernel) & Node.DOCUMENT_POSITION_FOLLOWING);
        }""")
        assert first, "the reference documents kernels.reference before paper.attention"
        assert "This is the file to read next to the paper" not in text
        assert "The file to read next to the paper is" in text
        height = page.evaluate("document.documentElement.scrollHeight")
        # unfolded it was about 102,000 px when it documented ~150 objects; folded, it stays under
        # half of that as objects are added (42,094 px once 0.3's Grads, plans and checks came in)
        assert height < 51_000, f"the reference is {height} px tall at {PHONE['width']} px: not folded"
        # a fold opens on a tap, and a link to an anchor inside a closed fold opens it
        fold = page.locator("[id='attention_np.paper.attention.sdpa_forward'] + dd > details.fold")
        assert fold.count() == 1 and fold.get_attribute("open") is None
        fold.locator("summary").click()
        assert fold.get_attribute("open") is not None
        inner = "attention_np.kernels.tiled_forward.LazyShift.add_tile"
        assert page.evaluate(f"!document.getElementById('{inner}').closest('details').open")
        page.evaluate(f"location.hash = '#{inner}'")
        page.wait_for_function(f"() => document.getElementById('{inner}').closest('details').open")
    finally:
        page.close()


def _dom(context, url):
    """A page's DOM, the site's scripts run, without MathJax (links and code do not need it): its
    requests are refused, so no navigation waits for it to load and typeset (most of a page's time)."""
    page = context.new_page()
    page.route("**/_static/mathjax/**", lambda route: route.abort())
    page.goto(url, wait_until="domcontentloaded")
    return page


def test_pages_link_what_they_name(server, browser):
    """The API page links the reference; a lesson or exercise named as code on a guide is a link
    to its page; lessons link their explorer view, at an anchor that exists."""
    context, _ = browser
    page = _dom(context, server + "api.html")
    try:
        assert page.locator(".bd-article a[href^='reference.html']").count() >= 1
        for guide in ("teaching.html", "instructors.html"):
            page.goto(server + guide, wait_until="domcontentloaded")
            unlinked = page.evaluate(r"""() => [...document.querySelectorAll(".bd-article code")]
                .filter(c => !c.closest("pre"))
                .filter(c => /^(notebooks\/|exercises\/)?\d\d_[a-z_]+(\.ipynb)?$/.test(c.innerText.trim()))
                .filter(c => !c.closest("a")).map(c => c.innerText)""")
            assert not unlinked, f"{guide} names these notebooks without a link: {unlinked[:5]}"
            linked = page.locator(".bd-article a[href^='lessons/']").count()
            assert linked >= 9, f"{guide} links {linked} lessons"
        page.goto(server + "explorer.html", wait_until="domcontentloaded")
        for anchor in ("eq1", "masks", "heads"):
            assert page.locator(f"section[id='{anchor}']").count() == 1, f"explorer.html has no #{anchor}"
        from attention_np.exercises.syllabus import LESSONS  # each lesson's view: one home
        assert all(les.explorer for les in LESSONS)
        for lesson, anchor in ((les.stem, les.explorer) for les in LESSONS):
            page.goto(server + f"lessons/{lesson}.html", wait_until="domcontentloaded")
            hrefs = page.eval_on_selector_all(".bd-article a[href*='explorer.html']",
                                              "as => as.map(a => a.getAttribute('href'))")
            assert f"../explorer.html#{anchor}" in hrefs, (lesson, hrefs)
    finally:
        page.close()


def test_navigation_has_the_explorer_the_paper_and_the_references(server, browser):
    from pathlib import Path

    context, _ = browser
    page = _dom(context, server + "index.html")
    try:
        nav = page.locator(".bd-sidebar-primary")
        assert nav.locator("a[href='explorer.html']", has_text="Explorer").count() >= 1
        assert nav.locator("a[href='https://arxiv.org/abs/1706.03762']").count() == 1
        if (Path(__file__).resolve().parents[2] / "docs" / "references.md").is_file():
            assert nav.locator("a[href='references.html']").count() == 1
        page.goto(server + "explorer.html", wait_until="domcontentloaded")
        assert "Explorer" in page.title()
    finally:
        page.close()


@pytest.mark.parametrize("width", [PHONE, DESKTOP], ids=["390", "1280"])
def test_tables_keep_code_names_whole(width, server, browser):
    """A code name in a table cell is never cut mid-word ("notebooks/01_sc|aled_dot..."): the table
    scrolls instead. (A command, code with spaces, may wrap at a space.)"""
    context, _ = browser
    page, _, _ = open_page(context, server + "teaching.html", width)
    try:
        broken = page.evaluate("""() => [...document.querySelectorAll(".bd-article table code")]
            .filter(c => !/\\s/.test(c.innerText.trim()) && c.getClientRects().length > 1)
            .map(c => c.innerText)""")
        assert not broken, f"code names wrapped inside a table: {broken[:5]}"
    finally:
        page.close()
