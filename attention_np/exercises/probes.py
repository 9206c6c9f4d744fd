"""Behaviour probes: call a wrong submission on inputs built to expose one property, measure it
and name what is wrong.

NumPy only and no import of ``attention_np`` (the course build copies this file into the
student kit and the autograder). A probe never holds a solution: it measures (which axis sums to
one, the scale actually applied, where a mask lets weight through, what a fully masked row
returns) or compares with values stored at build time (``expected[probe_id]``, computed by the
library's references from :data:`INPUTS`).

``PROBES[exercise]`` lists functions ``probe(fn, expected) -> Finding | None``, tried in order
after a case failed; the first finding names the mistake.
"""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised, call

RNG_SEED = 20260


def _run(fn, *args, **kwargs):
    """The output of one call on fresh copies (a :class:`Raised` if it raised)."""
    return call(fn, args, kwargs).out


def _arr(x):
    """``x`` as a float64 array, or None when it is not one (raised, wrong structure)."""
    if isinstance(x, Raised) or isinstance(x, (tuple, list, dict)):
        return None
    try:
        a = np.asarray(x)
    except Exception:           # noqa: BLE001
        return None
    if not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        return None
    return a.astype(np.float64)


def _close(a, b, rtol=1e-6, atol=1e-9):
    if a is None or b is None or np.shape(a) != np.shape(b):
        return False
    a, b = np.asarray(a, float), np.asarray(b, float)
    return bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))


def _nan(a):
    return a is not None and bool(np.isnan(a).any())


# ======================================================================== softmax
def _softmax_inputs():
    rng = np.random.default_rng(RNG_SEED)
    return {"x3": rng.normal(size=(2, 3, 4))}


def softmax_axis(fn, expected):
    x = _softmax_inputs()["x3"]
    out = _arr(_run(fn, x))
    if out is None or out.shape != x.shape or _nan(out):
        return None
    if _close(out.sum(-1), np.ones(x.shape[:-1])):
        return None
    if np.all(out <= 1e-12) and _close(np.exp(out).sum(-1), np.ones(x.shape[:-1])):
        return Finding("returned log-softmax", "your values are log-probabilities (all <= 0, and their "
                       "exp sums to 1 per row)", "softmax returns probabilities in [0, 1]: exp(x - m) / "
                       "sum(exp(x - m)), without the log.")
    if _close(out.sum(), 1.0):
        return Finding("normalized over the whole array", "the whole array sums to 1, not each row",
                       "Each row (the last axis) is one distribution: divide by the row's own sum, "
                       "with keepdims=True so it broadcasts.")
    for ax in range(x.ndim - 1):
        if _close(out.sum(ax), np.ones(x.shape[:ax] + x.shape[ax + 1:])):
            return Finding("softmax over the wrong axis",
                           f"your output sums to 1 over axis {ax} (length {x.shape[ax]}), not over the "
                           "last axis", "Each query's weights over the keys sum to one: the keys are "
                           "the LAST axis. Use axis=-1 (not 0 or 1) so it works for any number of "
                           "leading batch axes.")
    ratio = out / np.exp(x - x.max(-1, keepdims=True))
    if np.all(ratio > 0) and np.allclose(ratio, ratio[..., :1]):
        return Finding("forgot to normalize", "each row of your output is proportional to exp(x) but "
                       "does not sum to 1", "softmax divides exp by the row's sum: check that "
                       "out.sum(-1) is 1.")
    return None


def softmax_stability(fn, expected):
    def row(values, dtype=np.float64):
        return _arr(_run(fn, np.array([values], dtype=dtype)))
    small = row([1.0, 2.0, 3.0])
    if small is None or not _close(small.sum(-1), [1.0], 1e-6):
        return None
    big, tiny = row([1000.0, 1001.0, 1002.0]), row([-1000.0, -1001.0, -1002.0])
    big_bad = big is None or not np.all(np.isfinite(big)) or not _close(big, small, 1e-6)
    tiny_bad = tiny is None or not np.all(np.isfinite(tiny)) or not _close(tiny, small[:, ::-1], 1e-6)
    if big_bad and tiny_bad:
        return Finding("no max subtraction (overflow)", "at logits ~1000 exp overflows to inf (inf/inf "
                       "= NaN), and at ~-1000 every exp underflows to 0 (0/0 = NaN)",
                       "softmax(x) = softmax(x - c) for any constant c per row: which c makes every "
                       "exponent <= 0 and the largest exactly 0?")
    mixed = _arr(_run(fn, np.array([[1.0, 2.0, 3.0], [800.0, 801.0, 802.0]])))
    if mixed is not None and (not np.all(np.isfinite(mixed)) or not _close(mixed[0], small[0], 1e-6)):
        return Finding("subtracted the global max instead of each row's",
                       "with rows on different scales ([1, 2, 3] and [800, 801, 802]) the small row "
                       "comes out wrong", "One constant for the whole array makes another row's "
                       "exponents all underflow to 0. The shift must be per row: keepdims=True.")
    spread = row([-3000.0, 0.0, 1.0])
    if spread is None or not np.all(np.isfinite(spread)) or (big_bad != tiny_bad):
        return Finding("the shift does not make the largest exponent 0",
                       "a row that spans a wide range ([-3000, 0, 1]) or sits far from 0 gives "
                       "inf or NaN: after your shift some exponent is still large",
                       "Subtract each row's MAX (not its min or mean, not a constant): then every "
                       "exponent is <= 0 and the largest is exactly 0.")
    x32 = _arr(_run(fn, np.array([[80.0, 90.0, 100.0]], dtype=np.float32)))
    if x32 is None or not np.all(np.isfinite(x32)):
        return Finding("float32 overflow", "float32 logits ~100 give inf or NaN (exp overflows "
                       "float32 above 88)", "Shift by the row max in the input's own dtype.")
    return None


# ======================================================================== softmax backward
_P = np.array([[0.1, 0.2, 0.3, 0.4]])


def softmax_backward_probe(fn, expected):
    ones = _arr(_run(fn, np.ones_like(_P), _P.copy()))
    if ones is None or ones.shape != _P.shape:
        return None
    n = _P.shape[-1]
    if not _close(ones, np.zeros_like(_P), 0, 1e-9):
        if _close(ones, _P):
            return Finding("dropped the sum term", "with dp = 1 (a loss that does not depend on x, since "
                           "p always sums to 1) your gradient is p, not 0",
                           "Changing x_j changes the normalizer, which moves every p_i: the gradient has "
                           "a term that sums over the row.")
        if _close(ones, _P * (1 - n)):
            return Finding("sum without the weights p", "with dp = 1 your gradient is p * (1 - n), not 0: "
                           "the row sum is not weighted by p", "The sum is an expectation under p: "
                           "weight each dp_j by p_j.")
        if _close(ones, _P * (1 - _P)):
            return Finding("kept only the diagonal of the Jacobian", "with dp = 1 your gradient is "
                           "p (1 - p), not 0", "Each output p_i depends on every input x_j: the "
                           "Jacobian diag(p) - p p^T has off-diagonal terms.")
        return Finding("gradient of a constant loss is not 0", "with dp = 1 (a loss that does not "
                       "depend on x) your gradient is not 0", "softmax is unchanged when every x_j "
                       "moves together, so the gradient must sum to 0 over each row.")
    p0 = np.array([[0.0, 0.5, 0.5, 0.0]])
    dp = np.array([[1.0, 2.0, -1.0, 0.5]])
    g = _arr(_run(fn, dp, p0.copy()))
    if g is not None and g.shape == p0.shape and np.abs(g[p0 == 0]).max() > 1e-12:
        return Finding("forgot the factor p", "where p = 0 (a masked key) your gradient is not 0",
                       "Differentiate exp(x_i) / Z: the derivative of exp is exp, which brings p_i in "
                       "front of every term.")
    e0 = np.array([[1.0, 0.0, 0.0, 0.0]])
    g = _arr(_run(fn, e0, _P.copy()))
    if g is None or g.shape != _P.shape:
        return None
    if g[0, 0] < 0:
        return Finding("sign flipped", "with dp = e_0 your gradient at 0 is negative",
                       "Raising x_0 raises p_0: with dp = e_0 the gradient at 0 must be positive.")
    if np.abs(g[0, 1:]).max() < 1e-12:
        return Finding("kept only the diagonal of the Jacobian", "with dp = e_0 your gradient is 0 "
                       "off the diagonal", "Each output p_i depends on every input x_j: the Jacobian "
                       "diag(p) - p p^T has off-diagonal terms.")
    pb = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
    gb = _arr(_run(fn, np.arange(12.0).reshape(3, 4), pb))
    if gb is not None and gb.shape == pb.shape and not _close(gb.sum(-1), np.zeros(3), 0, 1e-9):
        return Finding("summed over the wrong axis", "on a (3, 4) input your rows do not sum to 0 (each "
                       "row's gradient of a softmax must)", "Each row is its own softmax: sum over "
                       "axis=-1 with keepdims=True.")
    return None


# ======================================================================== masks
def _offsets(m):
    """(kind, offsets): 'prefix' rows True for j <= i + k, or 'suffix' rows True for j > i + k;
    offsets k of the rows that are neither all True nor all False (None if no such row)."""
    L, S = m.shape
    ks_pre, ks_suf = [], []
    for i in range(L):
        c = int(m[i].sum())
        if 0 < c < S:
            if m[i, :c].all():
                ks_pre.append(c - 1 - i)
            elif m[i, S - c:].all():
                ks_suf.append(S - c - 1 - i)
            else:
                return None, None
    if ks_pre and not ks_suf:
        return "prefix", ks_pre
    if ks_suf and not ks_pre:
        return "suffix", ks_suf
    return None, None


def causal_probe(fn, expected):
    for L, S, align in ((5, 5, "top_left"), (3, 6, "bottom_right"), (3, 6, "top_left"),
                        (6, 3, "bottom_right")):
        out = _run(fn, L, S, align)
        if isinstance(out, Raised):
            return None
        m = np.asarray(out)
        if m.dtype != bool:
            if m.shape == (L, S) and set(np.unique(m).tolist()) <= {0, 1}:
                return Finding("returned a float mask", f"your mask has dtype {m.dtype}",
                               "Return a bool array (True = may attend): np.tri(..., dtype=bool) or "
                               "a comparison like j <= i.")
            return None
        if m.shape == (S, L) and L != S:
            return Finding("causal mask transposed", f"for L={L}, S={S} your mask has shape (S, L)",
                           "One row per query (L), one column per key (S).")
        if m.shape != (L, S):
            return None
        want = 0 if align == "top_left" else S - L
        kind, ks = _offsets(m)
        if kind == "suffix":
            return Finding("mask polarity flipped", "your mask is True for the future keys (the ones a "
                           "query may NOT see)", "The convention is True = may attend (PyTorch's bool "
                           "attn_mask), not True = blocked.")
        if kind != "prefix" or len(set(ks)) != 1 or ks[0] == want:
            continue
        k = ks[0]
        where = f"(L={L}, S={S}, {align})"
        if k == want - 1:
            return Finding("causal mask off by one (diagonal excluded)", f"{where} query i cannot see "
                           "its own position", "May a position attend to itself? Look at entry (0, 0).")
        if k == want + 1:
            return Finding("causal mask off by one (one future key allowed)", f"{where} query i sees "
                           "one key too many", "Query i must not see key i + 1: check the first row.")
        if align == "bottom_right" and k == 0:
            return Finding("causal mask wrongly aligned (always top-left)", f"{where} your mask is "
                           "top-left aligned", "With L < S, bottom-right alignment makes the L queries "
                           "the LAST L positions: the last query sees every key.")
        if align == "bottom_right" and k == L - S:
            return Finding("causal mask wrongly aligned (offset L - S instead of S - L)", f"{where} "
                           "your diagonal is shifted the wrong way", "Bottom-right: query i is position "
                           "i + (S - L) of the sequence. Which sign?")
        if align == "top_left" and k == S - L:
            return Finding("the two alignments swapped", f"{where} your mask is bottom-right aligned",
                           "top_left: query i sees keys 0..i; bottom_right: keys 0..i + S - L.")
        return Finding("causal mask misaligned", f"{where} query i sees keys up to i + {k}, expected "
                       f"i + {want}", "Count, for one row, which keys it may see; then write the "
                       "offset of the diagonal.")
    return None


def padding_probe(fn, expected):
    lengths, S = np.array([2, 0, 4]), 5
    out = _run(fn, lengths.copy(), S)
    if isinstance(out, Raised):
        return None
    m = np.asarray(out)
    if m.dtype != bool:
        return Finding("returned a non-bool mask", f"your mask has dtype {m.dtype}",
                       "Return a bool array (True = may attend): a comparison gives one.")
    B = len(lengths)
    if m.shape == (B, S):
        squeezed, what = m, "shape (B, S)"
    elif m.shape == (B, 1, S):
        squeezed, what = m[:, 0], None
    elif m.shape in ((S, B), (S, 1, B), (1, S, B)):
        return Finding("padding mask transposed", f"your mask has shape {m.shape}, expected (B, 1, S) "
                       f"= {(B, 1, S)}", "One entry per sequence on the first axis, one per key on the "
                       "last: (B, 1, S), the 1 broadcasting over the queries.")
    else:
        return Finding("padding mask of the wrong shape", f"your mask has shape {m.shape}, expected "
                       f"(B, 1, S) = {(B, 1, S)}", "(B, 1, S) broadcasts against scores (B, L, S): "
                       "add the query axis with [:, None, :].")
    j = np.arange(S)
    if np.array_equal(squeezed, j[None, :] >= lengths[:, None]):
        return Finding("padding mask polarity flipped", "your mask is True on the padding keys",
                       "True = may attend: the real keys, j < length, are the True ones.")
    if np.array_equal(squeezed, j[None, :] <= lengths[:, None]) or np.array_equal(
            squeezed, j[None, :] < lengths[:, None] - 1):
        return Finding("padding mask off by one", "a sequence of length n gets a count of real keys "
                       "other than n", "A sequence of length 3 has keys 0, 1, 2: is key 3 real?")
    if what and np.array_equal(squeezed, j[None, :] < lengths[:, None]):
        return Finding("padding mask of shape (B, S) instead of (B, 1, S)", "your values are right but "
                       "the shape is (B, S)", "The contract is (B, 1, S): the middle 1 broadcasts over "
                       "the L queries of scores (B, L, S). Add it with [:, None, :].")
    return None


# ======================================================================== attention
def measure_scale(weights, q, k):
    """The factor c with weights = softmax(c * q k^T), fitted from the weights (None if they are
    not of that form, e.g. not positive)."""
    w = np.asarray(weights, float)
    if w.shape != (q.shape[0], k.shape[0]) or not np.all(w > 0) or not np.all(np.isfinite(w)):
        return None
    s = q @ k.T
    lw = np.log(w) - np.log(w).mean(-1, keepdims=True)
    sc = s - s.mean(-1, keepdims=True)
    c = float((lw * sc).sum() / (sc * sc).sum())
    if not np.allclose(lw, c * sc, atol=1e-6 * max(1.0, abs(c) * np.abs(sc).max())):
        return None
    return c


def scale_finding(c, d_k, d_v):
    want = 1 / np.sqrt(d_k)
    if c is None or abs(c - want) <= 1e-6 * want:
        return None
    for value, name, hint in (
            (1.0, "no 1/sqrt(d_k)", "§3.2.1: for large d_k the dot products grow large and push the "
             "softmax into regions with tiny gradients. What keeps their variance at 1?"),
            (1 / d_k, "divided by d_k instead of sqrt(d_k)", "q . k sums d_k products of unit "
             "variance: its variance is d_k. Dividing by what brings the variance back to 1?"),
            (1 / np.sqrt(d_v), "scaled by sqrt(d_v) instead of sqrt(d_k)", "The scores are dot "
             "products of queries and keys: whose width sets their size?"),
            (np.sqrt(d_k), "multiplied by sqrt(d_k) instead of dividing", "Eq. (1) divides the "
             "scores by sqrt(d_k).")):
        if abs(c - value) <= 1e-4 * value:
            return Finding(name, f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                           f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", hint)
    return Finding("wrong scale", f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                   f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", "Eq. (1): softmax(Q K^T / sqrt(d_k)) V, "
                   "with d_k the width of q and k.")


def _attention_inputs():
    rng = np.random.default_rng(RNG_SEED + 1)
    return {"q": rng.normal(size=(3, 16)), "k": rng.normal(size=(6, 16)), "v": rng.normal(size=(6, 2)),
            "qb": rng.normal(size=(2, 3, 4)), "kb": rng.normal(size=(2, 5, 4)),
            "vb": rng.normal(size=(2, 5, 2))}


def attention_shapes(fn, expected):
    x = _attention_inputs()
    out = _run(fn, x["q"], x["k"], x["v"])
    if isinstance(out, Raised):
        return None
    a = _arr(out)
    if a is not None and a.shape == (3, 6):
        return Finding("returned the attention weights instead of the output", "your output has shape "
                       "(L, S) = (3, 6), expected (L, d_v) = (3, 2)", "Eq. (1) ends with '... V': the "
                       "weights average the values.")
    if a is None or a.shape != (3, 2):
        return None
    batched = _run(fn, x["qb"], x["kb"], x["vb"])
    shared = _run(fn, x["qb"], x["kb"][0], x["vb"][0])
    for out, what in ((batched, "batched inputs (2, L, d)"), (shared, "k and v shared across the batch")):
        b = _arr(out)
        if b is None or b.shape != (2, 3, 2):
            got = out.text if isinstance(out, Raised) else f"shape {getattr(b, 'shape', None)}"
            return Finding("does not broadcast over batch axes", f"it works unbatched but on {what} it "
                           f"gives {got}", "k.T reverses EVERY axis: on (B, S, d_k) it gives (d_k, S, "
                           "B). Use np.swapaxes(k, -1, -2) and index axes from the end, so leading "
                           "batch axes broadcast.")
    return None


def attention_scale_axis(fn, expected):
    x = _attention_inputs()
    q, k = x["q"], x["k"]
    w = _arr(_run(fn, q, k, np.eye(6)))            # v = I: the output is the weights
    if w is None or w.shape != (3, 6) or _nan(w):
        return None
    if not _close(w.sum(-1), np.ones(3), 1e-6) and _close(w.sum(0), np.ones(6), 1e-6):
        return Finding("softmax over the wrong axis (over queries)", "your weights sum to 1 over the "
                       "queries (axis -2), not over the keys", "Each query distributes its attention "
                       "over the keys: the weights of one query (one row) sum to 1.")
    return scale_finding(measure_scale(w, q, k), 16, 6)


def attention_masks(fn, expected):
    # a masked logit larger than the others: q k^T = [800, 1]
    out = _arr(_run(fn, np.array([[1.0]]), np.array([[800.0], [1.0]]), np.array([[5.0], [2.0]]),
                    np.array([[False, True]])))
    if out is not None and out.shape == (1, 1) and not _close(out, [[2.0]]):
        if _close(out, [[5.0]]):
            return Finding("mask polarity flipped", "with mask [[False, True]] your output uses the key "
                           "marked False", "The convention is True = may attend. Which entries did "
                           "you set to -inf?")
        return Finding("masked after the softmax", "when a masked key scores far above the others "
                       f"(800 vs 1) your output is {out.ravel()[0]:.4g}, not 2: the softmax ran before "
                       "the mask, so the masked key took all the weight and the others underflowed",
                       "Mask the SCORES (set them to -inf) before the softmax; then a masked key "
                       "cannot influence the others, however large its score.")
    rng = np.random.default_rng(RNG_SEED + 2)
    q, k = rng.normal(size=(2, 4)), rng.normal(size=(4, 4))
    mask = np.array([[True, False, True, False], [True, True, True, False]])
    w = _arr(_run(fn, q, k, np.eye(4), mask))
    if w is None or w.shape != (2, 4) or _nan(w):
        return None
    masked, allowed = w[~mask], w[mask]
    if np.abs(allowed).max() < 1e-12 and masked.min() > 0:
        return Finding("mask polarity flipped", "your weights are 0 on the keys the mask allows",
                       "The convention is True = may attend. Which entries did you set to -inf?")
    if np.abs(masked).max() > 1e-12:
        return Finding("masked keys get weight", "keys the mask forbids get nonzero weight "
                       f"(up to {np.abs(masked).max():.3g}): their score was set to 0 or another "
                       "finite value, or the mask was ignored", "exp(0) = 1: a score of 0 still "
                       "gets weight. What score gets weight exactly 0?")
    if not _close(w.sum(-1), np.ones(2), 1e-6):
        return Finding("masked after the softmax without renormalizing", "your weights are 0 on "
                       "masked keys but a row sums to less than 1", "Zeroing weights after the "
                       "softmax leaves rows that no longer sum to 1. Mask the scores, before the "
                       "softmax.")
    return None


def attention_full_row(fn, expected):
    rng = np.random.default_rng(RNG_SEED + 3)
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.array([[True, True, False], [False, False, False]])
    if isinstance(_run(fn, q, k, v, np.array([[True, True, False], [True, False, False]])), Raised):
        return None                             # it raises anyway: not about the full row
    out = _run(fn, q, k, v, mask)
    a = _arr(out)
    if isinstance(out, Raised):
        return Finding("error on a fully masked row", f"a query that may attend to nothing makes your "
                       f"function raise {out.text}", "A row of all -inf scores must give an output of "
                       "0 (the contract): special-case rows whose max is -inf.")
    if a is None or a.shape != (2, 2):
        return None
    if _nan(a[1]):
        return Finding("NaN on a fully masked row", "a query that may attend to nothing gives NaN",
                       "A row that may attend to nothing is all -inf: its max is -inf and -inf - "
                       "(-inf) is NaN. The contract: such a row returns 0; special-case it.")
    if _close(a[1], v.mean(0), 1e-6):
        return Finding("a fully masked row attends uniformly (finite fill like -1e9)", "a query that may "
                       "attend to nothing returns the mean of the values", "With a finite fill, a row "
                       "with every key masked softmaxes to uniform weights over keys it may not see. "
                       "It should attend to nothing (output 0).")
    if not _close(a[1], np.zeros(2), 0, 1e-12):
        return Finding("a fully masked row is not 0", "a query that may attend to nothing returns "
                       f"{a[1]}", "The contract: a row with no allowed key returns 0.")
    return None


def attention_stability(fn, expected):
    rng = np.random.default_rng(RNG_SEED + 4)
    q, k, v = 60 * rng.normal(size=(2, 4)), 60 * rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    for dtype, f in ((np.float64, 1.0), (np.float32, 0.3)):
        out = _arr(_run(fn, (q * f).astype(dtype), (k * f).astype(dtype), v.astype(dtype)))
        if out is not None and out.shape == (2, 2) and not np.all(np.isfinite(out)):
            return Finding("no max subtraction (overflow)", f"with large scores ({np.dtype(dtype).name}, "
                           "|scores| ~ 10^2-10^3) your output has inf or NaN", "exp overflows (above 709 "
                           "in float64, 88 in float32) and inf/inf is NaN: shift each row by its max "
                           "first.")
    return None


# ======================================================================== attention backward
def _backward_inputs():
    rng = np.random.default_rng(RNG_SEED + 5)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[:, 2] = False
    return {"plain": ((rng.normal(size=(3, 2)), q, k, v), {}),
            "masked_key": ((rng.normal(size=(3, 2)), q, k, v, mask), {})}


def attention_backward_probe(fn, expected):
    (dout, q, k, v), _ = _backward_inputs()["plain"]
    out = _run(fn, dout, q, k, v)
    if isinstance(out, Raised) or not isinstance(out, (tuple, list)) or len(out) != 3:
        return None
    g = [_arr(x) for x in out]
    ref = expected.get("plain")
    if ref is None or any(x is None for x in g):
        return None
    dq, dk, dv = g
    if dk.shape == (3, 4):
        return Finding("dk = dS q instead of dS^T q", "dk has shape (L, d_k), expected k's shape "
                       "(S, d_k)", "dS is (L, S) and dk is (S, d_k): which transpose makes the key "
                       "axis come first?")
    if any(a.shape != np.shape(b) for a, b in zip(g, ref, strict=True)):
        return None
    r = np.sqrt(q.shape[-1])
    if _close(dv, ref[2]):
        if _close(dq, ref[0] * r) and _close(dk, ref[1] * r):
            return Finding("forgot 1/sqrt(d_k) in dq and dk", "dq and dk are sqrt(d_k) times too "
                           "large", "The forward line s = q k^T * scale multiplies by a constant: its "
                           "backward multiplies by it too.")
        if _close(dq, ref[0]) and _close(dk, ref[1] * r):
            return Finding("forgot 1/sqrt(d_k) in dk only", "dk is sqrt(d_k) times too large",
                           "Both q and k enter the scores through the same scaled product.")
        if _close(dq, ref[0] * r) and _close(dk, ref[1]):
            return Finding("forgot 1/sqrt(d_k) in dq only", "dq is sqrt(d_k) times too large",
                           "Both q and k enter the scores through the same scaled product.")
        if not _close(dq, ref[0]) and not _close(dk, ref[1]):
            return Finding("the softmax backward is wrong", "dv is right but dq and dk are not: the "
                           "step from dP to dS", "dS = P * (dP - rowsum(dP * P)): every weight in a "
                           "row shares the normalizer. Check it alone with the softmax_backward "
                           "exercise.")
    (dout, q, k, v, mask), _ = _backward_inputs()["masked_key"]
    out = _run(fn, dout, q, k, v, mask)
    if isinstance(out, (tuple, list)) and len(out) == 3:
        gk, gv = _arr(out[1]), _arr(out[2])
        if gk is not None and gv is not None and gk.shape == k.shape and gv.shape == v.shape and (
                np.abs(gk[2]).max() > 1e-12 or np.abs(gv[2]).max() > 1e-12):
            return Finding("gradient flows into a masked key", "a key that no query may see gets a "
                           "nonzero dk or dv", "A masked key has weight 0 in the forward: the backward "
                           "must use the same masked weights P (0 there).")
    rng = np.random.default_rng(RNG_SEED + 6)
    qb, doutb = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 2))
    out = _run(fn, doutb, qb, k, v)
    if isinstance(out, (tuple, list)) and len(out) == 3:
        shapes = [np.shape(x) for x in out]
        if shapes[1] != k.shape or shapes[2] != v.shape:
            return Finding("broadcast gradients not summed back", f"with k {k.shape} and v {v.shape} "
                           f"shared by a batch of queries {qb.shape}, dk and dv have shapes {shapes[1]} "
                           f"and {shapes[2]}", "k and v were broadcast across the batch in the forward; "
                           "a broadcast copies, so its backward sums: dk must have k's shape.")
    elif isinstance(out, Raised):
        return Finding("does not broadcast over batch axes", f"with k, v shared across a batch of "
                       f"queries it raises {out.text}", "Use np.swapaxes(x, -1, -2) instead of x.T, "
                       "then sum the gradient over the axes that were broadcast.")
    return None


# ======================================================================== heads

def split_probe(fn, expected):
    L, h, d = 4, 2, 3
    x = np.arange(L * h * d, dtype=float).reshape(L, h * d)
    out = _arr(_run(fn, x.copy(), h))
    if out is None:
        return None
    if out.shape == (L, h, d):
        return Finding("head axis not moved", "the output has shape (L, h, d), expected (h, L, d)",
                       "After the reshape to (..., L, h, d), swap the two axes before the last.")
    if out.shape != (h, L, d):
        return None
    inter = np.swapaxes(np.swapaxes(x.reshape(L, d, h), -1, -2), -2, -3)
    if _close(out, inter):
        return Finding("head split transposed (heads interleaved)", "head 0 gets columns 0, h, 2h, ... "
                       "instead of a contiguous block", "Head i should own a CONTIGUOUS block of d_k "
                       "columns: reshape the last axis as (h, d_k), not (d_k, h).")
    if _close(out, x.reshape(h, L, d)):
        return Finding("reshape without the transpose", "a plain reshape to (h, L, d) mixes positions "
                       "into heads", "A reshape keeps the memory order: split the feature axis first, "
                       "(L, h, d), then move the head axis.")
    if _close(out, expected.get("split")):
        xb = np.arange(2 * L * h * d, dtype=float).reshape(2, L, h * d)
        b = _run(fn, xb, h)
        if _arr(b) is None or np.shape(b) != (2, h, L, d):
            return Finding("does not work with batch axes", "(L, h*d) works but a batch (B, L, h*d) "
                           f"gives {b.text if isinstance(b, Raised) else np.shape(b)}", "Count axes from "
                           "the end (swapaxes(-2, -3), reshape(*x.shape[:-1], h, d)) so any leading "
                           "axes pass through.")
    return None


def merge_probe(fn, expected):
    h, L, d = 2, 4, 3
    x = np.arange(h * L * d, dtype=float).reshape(h, L, d)
    out = _arr(_run(fn, x.copy()))
    if out is None:
        return None
    if out.shape != (L, h * d):
        return Finding("merge to the wrong shape", f"(h, L, d) = {x.shape} gives {out.shape}, expected "
                       f"(L, h*d) = {(L, h * d)}", "Move the head axis next to the feature axis, then "
                       "merge the two.") if out.shape == (h * L, d) or out.shape == (h, L * d) else None
    if _close(out, np.moveaxis(x, 0, -1).reshape(L, h * d)):
        return Finding("merge transposed (heads interleaved)", "the merged features alternate between "
                       "heads", "Concat puts head 1's d_v features first, then head 2's: a block per head.")
    if _close(out, x.reshape(L, h * d)):
        return Finding("reshape without the transpose", "a plain reshape mixes positions and heads",
                       "Move the head axis next to the feature axis before the reshape.")
    if _close(out, expected.get("merge")):
        xb = np.arange(2 * h * L * d, dtype=float).reshape(2, h, L, d)
        b = _run(fn, xb)
        if _arr(b) is None or np.shape(b) != (2, L, h * d):
            return Finding("does not work with batch axes", "(h, L, d) works but a batch (B, h, L, d) "
                           f"gives {b.text if isinstance(b, Raised) else np.shape(b)}", "Count axes from "
                           "the end so any leading axes pass through.")
    return None


# ======================================================================== multi-head
def _mha_inputs():
    rng = np.random.default_rng(RNG_SEED + 11)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d)), p, h


def mha_probe(fn, expected):
    x, y, p, h = _mha_inputs()
    base = _arr(_run(fn, x, y, y, p, h))
    if base is None or base.shape != x.shape or _nan(base):
        return None
    delta = np.array([0.5, -1.0, 2.0, 0.25])

    def moved(name):
        return _arr(_run(fn, x, y, y, dict(p, **{name: p[name] + delta}), h))
    for name, want, what in (("b_o", delta, "b_o"), ("b_v", delta @ p["W_o"], "b_v")):
        out = moved(name)
        if out is not None and out.shape == base.shape and not _close(out - base, np.broadcast_to(
                want, base.shape), 1e-6, 1e-9):
            ignored = _close(out, base)
            return Finding("projection biases forgotten" if ignored else f"{what} used wrongly",
                           f"moving {what} by a vector moves your output by "
                           f"{'nothing' if ignored else 'something else'} (it must move by "
                           f"{'that vector' if name == 'b_o' else 'that vector times W_o'})",
                           "params holds b_q, b_k, b_v, b_o: each projection is x W + b.")
    one = expected.get("one_head")
    if one is not None and _close(base, one):
        return Finding("a single head (no split)", f"your output with num_heads = {h} is the output of "
                       "one head", "With one head of width h*d_k the softmax averages over all "
                       "features together; split into num_heads heads, each with its own softmax.")
    return None


def mha_backward_probe(fn, expected):
    inputs = INPUTS["mha_backward"]()["self"][0]
    out = _run(fn, *inputs)
    ref = expected.get("self")
    if isinstance(out, Raised) or not isinstance(out, (tuple, list)) or len(out) != 4 or ref is None:
        return None
    dq, dk, dv, grads = out
    if not isinstance(grads, dict):
        return Finding("grads is not a dict", f"the fourth output is a {type(grads).__name__}",
                       "Return (dquery, dkey, dvalue, grads) with grads a dict with the keys of params "
                       "(W_q, b_q, ..., W_o, b_o).")
    missing = sorted(set(ref[3]) - set(grads))
    if missing:
        return Finding("grads has missing keys", f"grads has no {missing}", "One gradient per "
                       "parameter, with the same keys as params.")
    total = ref[0] + ref[1] + ref[2]
    if all(_close(_arr(x), total) for x in (dq, dk, dv)):
        return Finding("the three input gradients summed", "with query = key = value you return the "
                       "sum of the three gradients for each of them", "The contract: dquery, dkey and "
                       "dvalue are the gradients through each argument alone, even when they are the "
                       "same array (the caller adds them).")
    db_k = _arr(grads["b_k"])
    if db_k is not None and db_k.shape == np.shape(ref[3]["b_k"]) and np.abs(db_k).max() > 1e-9:
        return Finding("nonzero gradient for b_k", "your db_k is not 0", "Adding b_k adds q_i . b_k to "
                       "every score of row i: a constant per row, which softmax ignores. What does "
                       "that make dL/db_k?")
    for name, g in grads.items():
        if name in ref[3]:
            shape, want = np.shape(g), np.shape(ref[3][name])
            if shape != want:
                if name.startswith("b_") and len(shape) == len(want) + 1:
                    return Finding("bias gradient not summed over the batch", f"d{name} has shape "
                                   f"{shape}, expected {want}", "A bias was added to every position "
                                   "of every sequence: its gradient sums over all of them.")
                return Finding("gradient of the wrong shape", f"d{name} has shape {shape}, expected "
                               f"{want}", "Each gradient has the shape of its parameter.")
            a = _arr(g)
            if name.startswith("W_") and a is not None and _close(a.T, ref[3][name]) and not _close(
                    a, ref[3][name]):
                return Finding("weight gradients transposed", f"d{name} is the transpose of the "
                               "answer", "For y = x W with W of shape (d_in, d_out), dW must have W's "
                               "shape: which of x^T dy and dy^T x is (d_in, d_out)?")
    return None


# ======================================================================== tiled
def _tiled_inputs():
    rng = np.random.default_rng(RNG_SEED + 7)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    # scores q k^T / sqrt(4) = 4 * (-55) / 2 = -110 (+- a little): exp(-110) is 0 in float32
    low = (np.full((2, 4), 1.0), np.full((6, 4), -55.0) + 0.1 * rng.normal(size=(6, 4)),
           rng.normal(size=(6, 2)))
    return {"q": q, "k": k, "v": v, "low": tuple(a.astype(np.float32) for a in low)}


def tiled_probe(fn, expected):
    x = _tiled_inputs()
    q, k, v = x["q"], x["k"], x["v"]
    ref = expected.get("blocks")
    outs = {B: _arr(_run(fn, q, k, v, B)) for B in (5, 10, 3, 4, 16)}
    if ref is not None and all(o is not None and o.shape == ref.shape for o in outs.values()):
        ok = {B: _close(o, ref, 1e-7, 1e-10) for B, o in outs.items()}
        if ok[5] and ok[10] and not (ok[3] and ok[4]):
            return Finding("the last, partial block is mishandled", "block sizes that divide S = 10 "
                           "are right, 3 and 4 (a partial last block) are not", "range(0, S, B) with "
                           "slices k[..., j:j + B, :] handles a shorter last block; S // B loops drop it.")
        w = _arr(_run(fn, q, k, np.eye(10), 4))
        if w is not None and w.shape == (3, 10):
            f = scale_finding(measure_scale(w, q, k), 4, 10)
            if f is not None:
                return f
    qg = np.ones((2, 4))
    kg = np.repeat(np.array([0.0, 0.0, 0.0, 400.0, 400.0, 400.0]), 4).reshape(6, 4)   # scores 0, 800
    kg = kg + 0.1 * np.random.default_rng(RNG_SEED + 10).normal(size=(6, 4))
    vg = np.arange(12.0).reshape(6, 2)
    one, tiled = _arr(_run(fn, qg, kg, vg, 6)), _arr(_run(fn, qg, kg, vg, 3))
    if one is not None and tiled is not None and np.all(np.isfinite(one)) and not np.all(np.isfinite(tiled)):
        return Finding("running max never updated (max of the first block only)", "with one block "
                       "your output is finite, but when a later block scores ~800 above the first, "
                       "the tiled output overflows", "A later block can hold larger scores than the "
                       "first: update m = max(m, block max) at every block and rescale what was "
                       "summed so far.")
    low = x["low"]
    out = _arr(_run(fn, *low, 2))
    if out is not None and out.shape == (2, 2) and (_nan(out) or np.abs(out).max() == 0):
        hi = _arr(_run(fn, low[0], -low[1], low[2], 2))
        if hi is not None and np.all(np.isfinite(hi)):
            return Finding("running max started at 0 instead of -inf", "when every score of a row is "
                           "about -110 (float32) your output is NaN or 0: exp(s - 0) underflows to 0 and "
                           "the row divides 0 by 0", "Start the running max at -inf (np.full(..., -np.inf)) "
                           "so the first block sets it to that block's own max.")
    return None


# ======================================================================== decode step
def decode_probe(fn, expected):
    args = INPUTS["decode_step"]()["step"][0]
    x, kc, vc, p, h = args
    empty = _run(fn, x, kc[..., :0, :], vc[..., :0, :], p, h)
    full = _run(fn, *args)
    if isinstance(empty, Raised) and not isinstance(full, Raised):
        return Finding("attended before appending the new key and value", f"with an empty cache (the "
                       f"first step) your function raises {empty.text}", "Position t may attend to "
                       "itself (j <= t): append its key and value first; then even the first step has "
                       "one key.")
    ref = expected.get("step")
    if isinstance(full, (tuple, list)) and len(full) == 3 and ref is not None:
        kn = _arr(full[1])
        if kn is not None and kn.shape == ref[1].shape:
            if _close(kn[..., 1:, :], kc) and _close(kn[..., :1, :], ref[1][..., -1:, :]):
                return Finding("new key and value prepended to the cache", "the new key is first in the "
                               "returned cache", "The cache must stay in position order: append at "
                               "the end.")
            if not _close(kn[..., :-1, :], kc):
                return Finding("the cached keys changed", "the first t entries of the returned k_cache "
                               "are not the cache you were given", "Append the new position: "
                               "np.concatenate([k_cache, k_new], axis=-2).")
        elif kn is not None:
            return Finding("cache of the wrong shape", f"the returned k_cache has shape {kn.shape}, "
                           f"expected {ref[1].shape} (t + 1 positions)", "Append exactly one position "
                           "along the time axis (-2).")
    return None


# ======================================================================== sinusoidal
def sinusoidal_probe(fn, expected):
    n, d = 6, 8
    out = _arr(_run(fn, n, d))
    if out is None or out.shape != (n, d):
        if out is not None and out.shape == (d, n):
            return Finding("table transposed", f"shape {out.shape}, expected (length, d_model) = {(n, d)}",
                           "One row per position.")
        return None
    row0 = out[0]
    if _close(row0, np.tile([1.0, 0.0], d // 2)):
        return Finding("sin and cos swapped", "row 0 is 1, 0, 1, 0, ...", "Row 0 should start 0, 1, 0, "
                       "1, ...: which of sin and cos is 0 at pos = 0?")
    if _close(row0, np.repeat([0.0, 1.0], d // 2)):
        return Finding("sin and cos in two halves instead of interleaved", "row 0 is 0, ..., 0, 1, ..., 1",
                       "The paper interleaves: even columns sin, odd columns cos.")
    if not _close(row0, np.tile([0.0, 1.0], d // 2)):
        return Finding("positions start at 1", "row 0 is not sin(0), cos(0), ...: it is the encoding of "
                       "another position", "The first position is pos = 0: row 0 is sin(0), cos(0), ...")
    w = np.arctan2(out[1, 0::2], out[1, 1::2])          # the angle of pos = 1: its frequencies
    if np.all(w > 0):
        i = np.arange(d // 2)
        slope = np.polyfit(2 * i / d, np.log(w), 1)[0]   # log w = -(2i/d) log(base_eff)
        base = float(np.exp(-slope))
        if abs(base - 100.0) < 1:
            return Finding("exponent i/d_model instead of 2i/d_model", "your frequencies fall as "
                           "10000^(-i/d_model)", "i indexes the sin/cos PAIRS: column 2i's frequency "
                           "uses 2i, the column index.")
        if abs(base - 10000.0) > 1:
            return Finding("wrong base", f"your frequencies fall as {base:.4g}^(-2i/d_model)", "The "
                           "wavelengths form a geometric progression from 2*pi to 10000 * 2*pi.")
    return None


# ======================================================================== the table
#: exercise -> {probe_id: ((args), {kwargs})}: the inputs whose reference outputs the build stores
INPUTS = {
    "split_heads": lambda: {"split": ((np.arange(24, dtype=float).reshape(4, 6), 2), {})},
    "merge_heads": lambda: {"merge": ((np.arange(24, dtype=float).reshape(2, 4, 3),), {})},
    "attention_backward": lambda: {"plain": _backward_inputs()["plain"]},
    "tiled_attention": lambda: {"blocks": ((*(_tiled_inputs()[n] for n in "qkv"), 4), {})},
}


def _mha_backward_inputs():
    rng = np.random.default_rng(RNG_SEED + 8)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    x = rng.normal(size=(2, 3, d))
    return {"self": ((rng.normal(size=(2, 3, d)), x, x, x, p, h), {})}


def _decode_inputs():
    rng = np.random.default_rng(RNG_SEED + 9)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return {"step": ((rng.normal(size=(2, 1, d)), rng.normal(size=(2, h, 3, d // h)),
                      rng.normal(size=(2, h, 3, d // h)), p, h), {})}


INPUTS["mha_backward"] = _mha_backward_inputs
INPUTS["mha_forward"] = lambda: {"one_head": ((*_mha_inputs()[:2], _mha_inputs()[1], _mha_inputs()[2], 1),
                                               {})}
INPUTS["decode_step"] = _decode_inputs

#: exercise -> probes tried in order
PROBES = {
    "softmax": [softmax_axis, softmax_stability],
    "softmax_backward": [softmax_backward_probe],
    "causal_mask": [causal_probe],
    "padding_mask": [padding_probe],
    "attention": [attention_shapes, attention_scale_axis, attention_stability, attention_masks,
                  attention_full_row],
    "attention_backward": [attention_backward_probe],
    "split_heads": [split_probe],
    "merge_heads": [merge_probe],
    "mha_forward": [mha_probe],
    "mha_backward": [mha_backward_probe],
    "tiled_attention": [tiled_probe],
    "decode_step": [decode_probe],
    "sinusoidal": [sinusoidal_probe],
}


def bound(name, expected):
    """The probes of exercise ``name`` as ``probe(fn)``, with their stored expected values."""
    return [lambda fn, p=p: p(fn, expected) for p in PROBES.get(name, [])]


def check_record(name, rec, fn, cases=None):
    """The verdict on ``fn`` for exercise ``name`` from its stored record (see engine.verdict)."""
    from .engine import verdict
    return verdict(name, fn, rec["cases"] if cases is None else cases, rec["fingerprints"],
                   bound(name, rec["probe_expected"]), rec["arg_names"], rec["signature"])
