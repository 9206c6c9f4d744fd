"""The course material on the site, in Chromium: a predict question's output is folded behind
"show output" (and opens on a click), the slides page links a reveal.js deck per lesson, and each
deck runs offline (reveal.js from _static/reveal/, nothing from another host). Screenshots of a
folded output, of it opened, and of a slide go to $ATTENTION_NP_SITE_SHOTS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.site.browser import DESKTOP, SHOTS, SKIP, foreign

pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
ROOT = Path(__file__).resolve().parents[2]


def _predicts():
    from attention_np.exercises import handout
    from attention_np.exercises.syllabus import LESSONS
    return [(les, n, q, cell) for les in LESSONS for n, q, cell in handout.predict_questions(les)]


def _cell_index(les, cell_id):
    """The position of the cell among the lesson's code cells (myst-nb renders them in order)."""
    cells = json.loads((ROOT / "notebooks" / f"{les.stem}.ipynb").read_text())["cells"]
    return [c.get("id") for c in cells if c["cell_type"] == "code"].index(cell_id)


FOLD = """(i) => {
  const cell = document.querySelectorAll("div.cell")[i];
  const fold = cell.querySelector("details.hide");
  const out = cell.querySelector(".cell_output");
  return {tagged: cell.classList.contains("tag_hide-output"), fold: !!fold, open: fold ? fold.open : null,
          inFold: !!(fold && out && fold.contains(out)), visible: out ? out.checkVisibility() : null,
          text: out ? out.innerText : "", summary: fold ? fold.querySelector("summary").innerText : ""};
}"""


@pytest.mark.parametrize("les,number,q,cell", _predicts(), ids=[f"{p[0].number}.{p[1]}" for p in _predicts()])
def test_a_predict_questions_output_is_folded(server, browser, les, number, q, cell):
    context, _ = browser
    page = context.new_page()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{server}lessons/{les.stem}.html", wait_until="load")
    i = _cell_index(les, cell)
    state = page.evaluate(FOLD, i)
    assert state["tagged"] and state["fold"] and state["inFold"] and state["open"] is False, state
    assert not state["visible"]
    first = " ".join(q.quotes[0].split()) if q.quotes else q.ranges[0][0].split(" x")[0]
    page.locator("div.cell").nth(i).locator("details.hide summary").click()
    state = page.evaluate(FOLD, i)
    assert state["open"] and state["visible"] and first in " ".join(state["text"].split()), state
    if (les.number, number) == (1, 1):
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("div.cell").nth(i).scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "lesson01-predict-open.png")
        page.locator("div.cell").nth(i).locator("details.hide summary").click()
        page.screenshot(path=SHOTS / "lesson01-predict-folded.png")
    page.close()


def test_no_other_cell_is_folded(server, browser):
    context, _ = browser
    page = context.new_page()
    for les in {p[0] for p in _predicts()}:
        page.goto(f"{server}lessons/{les.stem}.html", wait_until="load")
        folded = page.evaluate("""() => [...document.querySelectorAll("div.cell")].map(
            (c, i) => c.classList.contains("tag_hide-output") ? i : -1).filter(i => i >= 0)""")
        assert folded == sorted(_cell_index(les, c) for le, _, _, c in _predicts() if le is les), les.stem
    page.close()


def test_every_deck_runs_offline(server, browser):
    from attention_np.exercises.syllabus import LESSONS
    context, requests = browser
    page = context.new_page()
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{server}slides.html", wait_until="load")
    links = page.evaluate("() => [...document.querySelectorAll('article a')]"
                          ".map(a => a.getAttribute('href'))")
    assert [f"slides/{les.stem}.html" for les in LESSONS] == [h for h in links if h.startswith("slides/")]
    for les in LESSONS:
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        start = len(requests)
        page.goto(f"{server}slides/{les.stem}.html", wait_until="load")
        page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=10_000)
        total = page.evaluate("() => Reveal.getTotalSlides()")
        assert total >= 5 and not errors, (les.stem, errors)
        assert not foreign(requests[start:]), foreign(requests[start:])
        broken = page.evaluate("() => [...document.images].filter(i => i.naturalWidth === 0).map(i => i.src)")
        assert not broken, broken
        if les.number == 2:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / "slides02-title.png")
            page.evaluate("() => { const s = [...document.querySelectorAll('.slides > section')]"
                          ".findIndex(x => x.querySelector('img.figure')); Reveal.slide(s); }")
            page.wait_for_timeout(600)
            page.screenshot(path=SHOTS / "slides02-figure.png")
    page.close()
