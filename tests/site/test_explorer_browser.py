"""The explorer page (docs/explorer.md -> explorer.html) operated in headless Chromium: each control
changes the picture, and every number the page shows equals the library's own, recomputed here
from the same seeded draws (and the same trained weights) at the precision the page shows: weights
to 4 decimals, the other numbers to 4 significant digits.

The page's data were computed at build time by attention_np/viz/explorer.py (with
``attention_np.sdpa_forward``, ``studies.scaling``, ...); this test recomputes them another way
(``attention_np.paper``'s Eq. (1), the reference kernel for masks with a bias, the models' forward
passes), so that a slip in the generator or in the page's drawing shows up as a wrong number.

Run after ``bash docs/build.sh docs/_build/html``:

    ATTENTION_NP_SITE=docs/_build/html python -m pytest tests/site -q
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.site.browser import DESKTOP, PHONE, SHOTS, SKIP, open_page

pytestmark = [pytest.mark.site, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

ROOT = Path(__file__).resolve().parents[2]
D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)      # the page's d_k slider, in order


def same4(shown: str, value: float) -> bool:
    """A weight shown with 4 decimals ("0.1234", or ".1234" in the masks table) is ``value`` rounded."""
    return abs(float(shown) - value) <= 0.5e-4 + 1e-9


def same_sig4(shown: str, value: float) -> bool:
    """A number shown with 4 significant digits is ``value`` rounded to them (a value at round-off
    level, below 1e-10, only has to be at round-off level too)."""
    if abs(value) < 1e-10:
        return abs(float(shown)) < 1e-10
    unit = 10.0 ** (math.floor(math.log10(abs(value))) - 3)
    return abs(float(shown) - value) <= 0.5 * unit * (1 + 1e-6)


@pytest.fixture(scope="module")
def explorer(server, browser):
    context, _ = browser
    page, errors, mathjax = open_page(context, server + "explorer.html", DESKTOP)
    assert mathjax == "ok"
    page.wait_for_function("() => document.querySelector('#eq1-weights li')", timeout=10000)
    yield page, errors
    assert not errors, errors
    page.close()


def _picture(page, selector: str) -> str:
    return page.locator(selector).inner_html()


# ---- Eq. (1) live --------------------------------------------------------------------------------

def _eq1_expected(d_k: int, scaled: bool) -> dict:
    """Query 0 and the 1000 queries of the page, by attention_np.paper (Eq. (1) as the paper writes it)."""
    from attention_np.paper.attention import sdpa_backward, sdpa_forward
    from attention_np.paper.softmax import softmax_backward

    rng = np.random.default_rng(0)                      # the page says: seed 0, drawn q, k, v, dout
    q = rng.standard_normal((1000, 1, d_k))
    k = rng.standard_normal((1000, 16, d_k))
    v = rng.standard_normal((1000, 16, 16))
    dout = rng.standard_normal((1000, 1, 16))
    _, cache = sdpa_forward(q, k, v, scale=None if scaled else 1.0)
    w = cache.weights[:, 0, :]                          # (1000, 16)
    dscores = softmax_backward(dout @ np.swapaxes(v, -1, -2), cache.weights)[:, 0, :]
    dq = sdpa_backward(dout, cache)[0][:, 0, :]
    logs = np.log(np.where(w > 0, w, 1.0))
    entropy = -(w * logs).sum(-1)
    norms, dq_norms = np.linalg.norm(dscores, axis=-1), np.linalg.norm(dq, axis=-1)
    return {"weights": w[0], "row-entropy": entropy[0], "row-max": w[0].max(),
            "row-dscores": norms[0], "row-dq": dq_norms[0], "mean-entropy": entropy.mean(),
            "mean-max": w.max(-1).mean(), "mean-dscores-rms": np.sqrt((norms ** 2).mean()),
            "mean-dscores-median": np.median(norms), "mean-dq-rms": np.sqrt((dq_norms ** 2).mean())}


def _set_eq1(page, d_k: int, scaled: bool):
    page.locator("#eq1-dk").fill(str(D_KS.index(d_k)))
    page.locator("#eq1-scaled").set_checked(scaled)
    page.wait_for_function(f"() => document.getElementById('eq1-view').dataset.state === "
                           f"'{d_k}-{'scaled' if scaled else 'unscaled'}'")


def test_eq1_controls_are_real_and_move_the_picture(explorer):
    page, _ = explorer
    assert page.locator("input#eq1-dk[type=range]").count() == 1
    assert page.locator("input#eq1-scaled[type=checkbox]").count() == 1
    assert page.locator("select#eq1-axis").count() == 1
    _set_eq1(page, 64, True)
    before = (_picture(page, "#eq1-hist"), _picture(page, "#eq1-bars"), page.inner_text("#eq1-weights"))
    _set_eq1(page, 1024, True)
    after_dk = (_picture(page, "#eq1-hist"), _picture(page, "#eq1-bars"), page.inner_text("#eq1-weights"))
    assert all(a != b for a, b in zip(before, after_dk, strict=True)), "moving d_k changed nothing"
    assert page.inner_text("#eq1-dk-value") == "1024"
    _set_eq1(page, 1024, False)
    after_scale = (_picture(page, "#eq1-hist"), _picture(page, "#eq1-bars"), page.inner_text("#eq1-weights"))
    assert all(a != b for a, b in zip(after_dk, after_scale, strict=True)), "the scale changed nothing"
    shared = _picture(page, "#eq1-hist")
    page.locator("#eq1-axis").select_option("fit")
    assert _picture(page, "#eq1-hist") != shared, "the histogram's axis control changed nothing"
    page.locator("#eq1-axis").select_option("shared")
    # by keyboard: the slider moves with the arrow keys
    page.locator("#eq1-dk").focus()
    page.keyboard.press("ArrowLeft")
    assert page.inner_text("#eq1-dk-value") == "512"


@pytest.mark.parametrize("d_k,scaled", [(4, True), (64, True), (64, False), (1024, False)])
def test_eq1_numbers_are_the_librarys(explorer, d_k, scaled):
    page, _ = explorer
    _set_eq1(page, d_k, scaled)
    expected = _eq1_expected(d_k, scaled)
    shown = page.locator("#eq1-weights .ex-num").all_inner_texts()
    assert len(shown) == 16
    wrong = [(j, s, float(w)) for j, (s, w) in enumerate(zip(shown, expected["weights"], strict=True))
             if not same4(s, w)]
    assert not wrong, f"d_k={d_k} scaled={scaled}: weights of query 0 differ from the library's: {wrong}"
    for name in ("row-entropy", "row-max", "row-dscores", "row-dq", "mean-entropy", "mean-max",
                 "mean-dscores-rms", "mean-dscores-median", "mean-dq-rms"):
        text = page.inner_text(f"#eq1-{name}")
        assert same_sig4(text, float(expected[name])), (
            f"d_k={d_k} scaled={scaled}: {name} shows {text}, the library gives {expected[name]:.6g}")


def test_eq1_shows_the_lesson_2_claim(explorer):
    """The claim the view is for, on the page's own numbers: unscaled, the softmax saturates as d_k
    grows (entropy of the 1000 queries falls, the median gradient collapses); scaled, it does not."""
    page, _ = explorer
    got = {}
    for d_k in (4, 1024):
        for scaled in (True, False):
            _set_eq1(page, d_k, scaled)
            got[d_k, scaled] = (float(page.inner_text("#eq1-mean-entropy")),
                                float(page.inner_text("#eq1-mean-dscores-median")))
    assert got[1024, False][0] < 0.2 < got[4, False][0]
    assert got[1024, False][1] < 1e-3 * got[4, False][1]
    assert abs(got[1024, True][0] - got[4, True][0]) < 0.1


# ---- Masks ---------------------------------------------------------------------------------------

def _mask_expected(align, causal, length, window, alibi_head):
    from attention_np.kernels.reference import sdpa_forward
    from attention_np.paper.masks import causal_mask, padding_mask
    from attention_np.variants.position_bias import alibi_bias, alibi_slopes
    from attention_np.variants.window import sliding_window_mask

    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((5, 8)), rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    mask = np.broadcast_to(padding_mask(np.array([length]), 8)[0], (5, 8))
    if causal:
        mask = mask & causal_mask(5, 8, align=align)
    if window is not None:
        mask = mask & sliding_window_mask(5, 8, left=window, right=window, align=align)
    bias = None if alibi_head is None else alibi_bias(alibi_slopes(8)[[alibi_head]], 5, 8, align=align)[0]
    _, cache = sdpa_forward(q, k, v, mask, bias=bias)
    return mask, cache.weights


def _masks_shown(page):
    cells = page.locator("#masks-weights td").all_inner_texts()
    rects = page.eval_on_selector_all("#masks-mask rect", "rs => rs.map(r => r.getAttribute('class'))")
    return (np.array([float(c) for c in cells]).reshape(5, 8),
            np.array([c == "ex-attend" for c in rects]).reshape(5, 8))


def _set_masks(page, align, causal, length, window, alibi_head):
    page.locator("#masks-align").select_option(align)
    page.locator("#masks-causal").set_checked(causal)
    page.locator("#masks-length").fill(str(length))
    page.locator("#masks-window").select_option("-" if window is None else str(window))
    page.locator("#masks-alibi").select_option("-" if alibi_head is None else str(alibi_head))
    key = "|".join([align, str(int(causal)), str(length), "-" if window is None else str(window),
                    "-" if alibi_head is None else str(alibi_head)])
    page.wait_for_function(f"() => document.getElementById('masks-view').dataset.state === '{key}'")


MASK_STATES = [("top_left", False, 8, None, None), ("top_left", True, 8, None, None),
               ("bottom_right", True, 8, None, None), ("bottom_right", True, 6, 1, None),
               ("top_left", False, 3, None, 0), ("bottom_right", True, 8, 2, 7),
               ("top_left", True, 8, 1, 3), ("top_left", True, 1, None, None)]


@pytest.mark.parametrize("state", MASK_STATES, ids=lambda s: "|".join(map(str, s)))
def test_masks_are_the_librarys(explorer, state):
    page, _ = explorer
    _set_masks(page, *state)
    weights, mask = _masks_shown(page)
    expected_mask, expected = _mask_expected(*state)
    assert (mask == expected_mask).all(), f"{state}: the drawn mask is not the library's:\n{mask.astype(int)}"
    bad = np.argwhere(np.abs(weights - expected) > 0.5e-4 + 1e-9)
    assert bad.size == 0, f"{state}: weights differ from the library's at (query, key) {bad.tolist()}"
    note = page.inner_text("#masks-note")
    empty = [i for i in range(5) if not expected_mask[i].any()]
    assert ("no key" in note) == bool(empty), note


def test_each_mask_control_changes_the_picture(explorer):
    page, _ = explorer
    _set_masks(page, "top_left", False, 8, None, None)
    steps = [("#masks-causal", lambda loc: loc.set_checked(True)),
             ("#masks-align", lambda loc: loc.select_option("bottom_right")),
             ("#masks-length", lambda loc: loc.fill("5")),
             ("#masks-window", lambda loc: loc.select_option("1")),
             ("#masks-alibi", lambda loc: loc.select_option("0"))]
    for selector, act in steps:
        before = _picture(page, "#masks-mask") + _picture(page, "#masks-weights")
        act(page.locator(selector))
        after = _picture(page, "#masks-mask") + _picture(page, "#masks-weights")
        assert after != before, f"operating {selector} changed nothing"


# ---- Heads of trained models ---------------------------------------------------------------------

def _dates_weights():
    """Lesson 8's trained model on its first held-out "of" date, greedy-decoded, every attention map."""
    from attention_np.nn.decoding import greedy_decode
    from attention_np.nn.seq2seq import seq2seq_forward
    from attention_np.training.dates import BOS, ISO_LEN, DatesTask
    from attention_np.training.seq2seq_trainer import dates_config

    saved = np.load(ROOT / "notebooks" / "weights" / "dates_h4.npz")
    params = {n: saved[n] for n in saved.files if n != "losses"}
    config = dates_config()
    held = DatesTask().heldout()
    i = next(n for n, t in enumerate(held.texts) if "of" in t)
    src, src_mask = held.src[i:i + 1], held.src_mask[i:i + 1]
    tokens, _ = greedy_decode(params, config, src, src_mask, bos=BOS, steps=ISO_LEN + 1)
    tgt_in = np.concatenate([[[BOS]], tokens[:, :-1]], axis=1)
    _, cache = seq2seq_forward(params, src, tgt_in, config, src_mask=src_mask)
    n = int(src_mask.sum())
    w = cache.attention_weights
    return held.texts[i], {"encoder": lambda l, h: w["encoder"][l][0, h, :n, :n],
                           "decoder_self": lambda l, h: w["decoder_self"][l][0, h],
                           "cross": lambda l, h: w["cross"][l][0, h, :, :n]}


@pytest.fixture(scope="module")
def minilm():
    from attention_np.pretrained.minilm import MiniLM

    return MiniLM(dtype=np.float64)


def _select_head(page, view: str, layer: int, head: int, query: int):
    page.locator("#heads-input").select_option(view)
    page.locator("#heads-layer").select_option(str(layer))
    page.locator("#heads-head").select_option(str(head))
    page.locator(f"#heads-lines .ex-col-q [data-index='{query}']").focus()
    page.wait_for_function(f"() => document.getElementById('heads-view').dataset.state === "
                           f"'{view}|{layer}|{head}|{query}'")


def _differences(shown, expected) -> list:
    return [(j, s, float(w)) for j, (s, w) in enumerate(zip(shown, expected, strict=True)) if not same4(s, w)]


def _readout(page):
    return page.locator("#heads-readout .ex-num").all_inner_texts()


@pytest.mark.parametrize("kind,layer,head,query", [("encoder", 1, 2, 3), ("decoder_self", 1, 0, 6),
                                                   ("cross", 1, 3, 0), ("cross", 0, 1, 8)])
def test_dates_heads_are_the_librarys(explorer, kind, layer, head, query):
    page, _ = explorer
    text, maps = _dates_weights()
    _select_head(page, f"dates-{kind}", layer, head, query)
    expected = maps[kind](layer, head)[query]
    shown = _readout(page)
    assert len(shown) == expected.size, (len(shown), expected.shape)
    wrong = _differences(shown, expected)
    assert not wrong, f"dates {kind} layer {layer} head {head} query {query}: {wrong}"
    assert text in page.locator("#heads-input option:checked").inner_text()


@pytest.mark.parametrize("sentence,layer,head,query", [(0, 0, 2, 5), (1, 2, 9, 9), (2, 4, 5, 3)])
def test_minilm_heads_are_the_librarys(explorer, minilm, sentence, layer, head, query):
    from attention_np.viz.pretrained import SENTENCES

    page, _ = explorer
    out, batch = minilm([SENTENCES[sentence]])
    _select_head(page, f"minilm-{sentence}", layer, head, query)
    tokens = page.locator("#heads-lines .ex-col-q .ex-token").all_inner_texts()
    assert tokens == batch.tokens[0]
    expected = out.attentions[layer][0, head, query]
    shown = _readout(page)
    wrong = _differences(shown, expected)
    assert not wrong and len(shown) == expected.size, f"MiniLM {sentence} L{layer} H{head} q{query}: {wrong}"


def test_heads_respond_to_pointer_keyboard_and_controls(explorer):
    page, _ = explorer
    _select_head(page, "minilm-0", 0, 2, 1)
    pictures = lambda: (_picture(page, "#heads-lines svg"), _picture(page, "#heads-heat"),  # noqa: E731
                        page.inner_text("#heads-readout"))
    before = pictures()
    page.keyboard.press("ArrowDown")                      # the next query token, by keyboard
    page.wait_for_function("() => document.getElementById('heads-view').dataset.state === 'minilm-0|0|2|2'")
    assert page.evaluate("document.activeElement.dataset.index") == "2"
    assert page.locator("#heads-lines .ex-col-q [data-index='2']").get_attribute("aria-pressed") == "true"
    after_key = pictures()
    assert all(a != b for a, b in zip(before, after_key, strict=True))
    page.locator("#heads-lines .ex-col-q [data-index='5']").hover()   # pointing at a token
    page.wait_for_function("() => document.getElementById('heads-view').dataset.state === 'minilm-0|0|2|5'")
    after_hover = pictures()
    assert after_hover != after_key
    for selector, value in (("#heads-head", "3"), ("#heads-layer", "4"), ("#heads-input", "dates-cross")):
        prior = pictures()
        page.locator(selector).select_option(value)
        assert pictures() != prior, f"choosing {selector} = {value} changed nothing"


def test_decoder_self_attention_is_causal_on_the_page(explorer):
    """The page's claim: in the dates model's masked decoder self-attention no query attends a later
    position (the weights there are exactly 0, shown as 0.0000)."""
    page, _ = explorer
    for layer in (0, 1):
        for head in range(4):
            for query in (0, 4):
                _select_head(page, "dates-decoder_self", layer, head, query)
                assert all(float(s) == 0 for s in _readout(page)[query + 1:])


def test_cross_attention_reads_what_it_copies_on_the_page(explorer):
    """The page's claim about the dates model's last-layer cross-attention, on the numbers it shows:
    each digit of the day and year has a head whose largest weight is on a source character equal
    to it; every head of the month's digits has its largest weight on a letter."""
    page, _ = explorer
    _select_head(page, "dates-cross", 1, 0, 0)
    outputs = page.locator("#heads-lines .ex-col-q .ex-token").all_inner_texts()
    sources = page.locator("#heads-lines .ex-col-k .ex-token").all_inner_texts()
    assert outputs[4] == outputs[7] == "-" and all(outputs[i].isdigit() for i in (0, 1, 2, 3, 5, 6, 8, 9))
    best = {}
    for head in range(4):
        _select_head(page, "dates-cross", 1, head, 0)
        for query in (0, 1, 2, 3, 5, 6, 8, 9):
            page.locator(f"#heads-lines .ex-col-q [data-index='{query}']").focus()
            page.wait_for_function(f"() => document.getElementById('heads-view').dataset.state === "
                                   f"'dates-cross|1|{head}|{query}'")
            shown = [float(x) for x in _readout(page)]
            best[query, head] = sources[int(np.argmax(shown))]
    for query in (0, 1, 2, 3, 8, 9):                      # YYYY-MM-DD: the year's and the day's digits
        assert any(best[query, h] == outputs[query] for h in range(4)), (query, outputs[query], best)
    for query in (5, 6):                                  # the month's digits
        assert all(best[query, h].isalpha() for h in range(4)), (query, best)


def test_the_explorer_fits_a_phone(server, browser):
    context, _ = browser
    page, errors, _ = open_page(context, server + "explorer.html", PHONE)
    try:
        page.wait_for_function("() => document.querySelector('#heads-readout li')", timeout=10000)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"explorer.html is {width} px wide at {PHONE['width']} px"
        # every control and token inside the screen's width
        boxes = page.eval_on_selector_all(
            ".explorer input, .explorer select, .explorer .ex-token",
            "els => els.map(e => e.getBoundingClientRect()).map(r => [r.left, r.right])")
        assert boxes and all(0 <= left and right <= PHONE["width"] for left, right in boxes), boxes
        SHOTS.mkdir(parents=True, exist_ok=True)
        for anchor in ("eq1", "masks", "heads"):
            page.locator(f"#{anchor}").scroll_into_view_if_needed()
            page.evaluate(f"document.getElementById('{anchor}').scrollIntoView()")
            page.screenshot(path=SHOTS / f"explorer-{anchor}-390.png")
        assert not errors, errors
    finally:
        page.close()


def test_explorer_screenshots_at_desktop_width(explorer):
    page, _ = explorer
    SHOTS.mkdir(parents=True, exist_ok=True)
    for anchor in ("eq1", "masks", "heads"):
        page.evaluate(f"document.getElementById('{anchor}').scrollIntoView()")
        page.screenshot(path=SHOTS / f"explorer-{anchor}-1280.png")
    assert "Explorer" in page.title()
