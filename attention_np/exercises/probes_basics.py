"""Behaviour probes of softmax, its backward, the masks and the sinusoidal table (see probes.py)."""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised
from .probing import (
    RNG_SEED,
    STOP,
    as_array,
    close_to,
    decide,
    first,
    has_nan,
    judge,
    matching,
    output_of,
    shaped,
    shown,
)


# ======================================================================== softmax
def _softmax_inputs():
    rng = np.random.default_rng(RNG_SEED)
    return {"x3": rng.normal(size=(2, 3, 4))}


def _rows_off(out):
    """How far the rows' sums are from 1 (the rows of a softmax sum to 1 within float64 rounding)."""
    return float(np.max(np.abs(out.sum(-1) - 1)))


def _sums_to_one_over(out):
    """The leading axis over which the output sums to 1 (None if none)."""
    return next((ax for ax in range(out.ndim - 1) if close_to(out.sum(ax), np.ones(
        out.shape[:ax] + out.shape[ax + 1:]))), None)


def _proportional_to_exp(out, x):
    ratio = out / np.exp(x - x.max(-1, keepdims=True))
    return np.all(ratio > 0) and np.allclose(ratio, ratio[..., :1])


#: softmax of (2, 3, 4) normal logits: over which axis it sums to 1, and what it is instead
_AXIS = (
    (lambda out, x: out is None or out.shape != x.shape or has_nan(out), STOP),
    (lambda out, x: close_to(out.sum(-1), np.ones(x.shape[:-1])) and _rows_off(out) > 1e-11, lambda out, x: (
        Finding("the rows do not sum to 1", f"your rows sum to 1 within {_rows_off(out):.2g} only (float64 "
                "rounding leaves about 1e-16): something small is added or clipped", "After the max shift "
                "the row's sum is >= 1 (the largest exponent is exp(0) = 1): divide by it as it is, with no "
                "epsilon."))),
    (lambda out, x: close_to(out.sum(-1), np.ones(x.shape[:-1])), STOP),
    (lambda out, x: np.all(out <= 1e-12) and close_to(np.exp(out).sum(-1), np.ones(x.shape[:-1])), Finding(
        "returned log-softmax", "your values are log-probabilities (all <= 0, and their exp sums to 1 per "
        "row)", "softmax returns probabilities in [0, 1]: exp(x - m) / sum(exp(x - m)), without the log.")),
    (lambda out, x: close_to(out.sum(), 1.0), Finding(
        "normalized over the whole array", "the whole array sums to 1, not each row", "Each row (the last "
        "axis) is one distribution: divide by the row's own sum, with keepdims=True so it broadcasts.")),
    (lambda out, x: _sums_to_one_over(out) is not None, lambda out, x: Finding(
        "softmax over the wrong axis" if _sums_to_one_over(out) == 0 else
        f"softmax over axis {_sums_to_one_over(out) - x.ndim} instead of the last", "your output sums to 1 "
        f"over axis {_sums_to_one_over(out)} (length {x.shape[_sums_to_one_over(out)]}), not over the last "
        "axis", "Each query's weights over the keys sum to one: the keys are the LAST axis. Use axis=-1 (not "
        "0 or 1) so it works for any number of leading batch axes.")),
    (_proportional_to_exp, Finding(
        "forgot to normalize", "each row of your output is proportional to exp(x) but does not sum to 1",
        "softmax divides exp by the row's sum: check that out.sum(-1) is 1.")),
)


def softmax_axis(fn, expected):
    """Softmax of (2, 3, 4) logits: the axis it normalizes, or what it returned instead."""
    x = _softmax_inputs()["x3"]
    return judge(_AXIS, as_array(output_of(fn, x)), x)


def _finite(out):
    """``out`` is an array with no inf or NaN."""
    return out is not None and bool(np.all(np.isfinite(out)))


class _Rows:
    """softmax of rows that have the softmax of [1, 2, 3]: ``small`` itself, ``big`` = [1000, 1001,
    1002] and ``tiny`` = [-1000, -1001, -1002] (its reverse), and whether each of the two is wrong."""

    def __init__(self, fn):
        self.fn = fn
        self.small, self.big, self.tiny = (self.row([1.0, 2.0, 3.0]), self.row([1000.0, 1001.0, 1002.0]),
                                           self.row([-1000.0, -1001.0, -1002.0]))
        self.normal = self.small is not None and close_to(self.small.sum(-1), [1.0], 1e-6)
        self.big_bad = self.normal and not self.right(self.big, self.small)
        self.tiny_bad = self.normal and not self.right(self.tiny, self.small[:, ::-1])

    @staticmethod
    def right(out, want):
        return _finite(out) and close_to(out, want, 1e-6)

    def row(self, values, dtype=np.float64):
        return as_array(output_of(self.fn, np.array([values], dtype=dtype)))

    def mixed_bad(self):
        """With rows on different scales ([1, 2, 3] and [800, 801, 802]) the small row is wrong."""
        mixed = as_array(output_of(self.fn, np.array([[1.0, 2.0, 3.0], [800.0, 801.0, 802.0]])))
        return mixed is not None and not self.right(mixed[0], self.small[0])


def _seen(out):
    return "wrong values" if _finite(out) else "inf or NaN"


#: rows far from 0, rows on different scales, a wide row, float32
_STABILITY = (
    (lambda r: not r.normal, STOP),
    (lambda r: r.big_bad and r.tiny_bad, lambda r: Finding(
        "no max subtraction (overflow)", f"the row [1000, 1001, 1002] gives {_seen(r.big)} and [-1000, "
        f"-1001, -1002] gives {_seen(r.tiny)}, though both have the softmax of [1, 2, 3] (exp overflows to "
        "inf above 709, underflows to 0 below -745)", "softmax(x) = softmax(x - c) for any constant c per "
        "row: which c makes every exponent <= 0 and the largest exactly 0?")),
    (lambda r: r.mixed_bad(), Finding(
        "subtracted the global max instead of each row's", "with rows on different scales ([1, 2, 3] and "
        "[800, 801, 802]) the small row comes out wrong", "One constant for the whole array makes another "
        "row's exponents all underflow to 0. The shift must be per row: keepdims=True.")),
    (lambda r: not _finite(r.row([-3000.0, 0.0, 1.0])) or r.big_bad != r.tiny_bad, Finding(
        "the shift does not make the largest exponent 0", "a row that spans a wide range ([-3000, 0, 1]) or "
        "sits far from 0 gives inf or NaN: after your shift some exponent is still large", "Subtract each "
        "row's MAX (not its min or mean, not a constant): then every exponent is <= 0 and the largest is "
        "exactly 0.")),
    (lambda r: not _finite(r.row([80.0, 90.0, 100.0], np.float32)), Finding(
        "float32 overflow", "float32 logits ~100 give inf or NaN (exp overflows float32 above 88)", "Shift "
        "by the row max in the input's own dtype.")),
)


def softmax_stability(fn, expected):
    """Rows whose softmax is known: far from 0 both ways, on different scales, wide, float32."""
    return judge(_STABILITY, _Rows(fn))


# ======================================================================== softmax backward
_P = np.array([[0.1, 0.2, 0.3, 0.4]])


_DIAGONAL = Finding("kept only the diagonal of the Jacobian", "with dp = 1 your gradient is p (1 - p), not 0",
                    "Each output p_i depends on every input x_j: the Jacobian diag(p) - p p^T has "
                    "off-diagonal terms.")


def _constant_loss(fn):
    """dp = 1 (a loss that does not depend on x, since p always sums to 1): the gradient must be 0;
    if not, which known wrong gradient it is."""
    ones = as_array(output_of(fn, np.ones_like(_P), _P.copy()))
    if ones is None or ones.shape != _P.shape:
        return STOP
    if close_to(ones, np.zeros_like(_P), 0, 1e-9):
        return None
    return matching(ones, (
        (_P, Finding("dropped the sum term", "with dp = 1 (a loss that does not depend on x, since p always "
                     "sums to 1) your gradient is p, not 0", "Changing x_j changes the normalizer, which "
                     "moves every p_i: the gradient has a term that sums over the row.")),
        (_P * (1 - _P.shape[-1]), Finding(
            "sum without the weights p", "with dp = 1 your gradient is p * (1 - n), not 0: the row sum is "
            "not weighted by p", "The sum is an expectation under p: weight each dp_j by p_j.")),
        (_P * (1 - _P), _DIAGONAL))) or Finding(
        "gradient of a constant loss is not 0", "with dp = 1 (a loss that does not depend on x) your "
        "gradient is not 0", "softmax is unchanged when every x_j moves together, so the gradient must "
        "sum to 0 over each row.")


def _factor_p(fn):
    """Where p = 0 (a masked key) the gradient must be 0."""
    p0 = np.array([[0.0, 0.5, 0.5, 0.0]])
    g = as_array(output_of(fn, np.array([[1.0, 2.0, -1.0, 0.5]]), p0.copy()))
    return g is not None and g.shape == p0.shape and np.abs(g[p0 == 0]).max() > 1e-12 and Finding(
        "forgot the factor p", "where p = 0 (a masked key) your gradient is not 0", "Differentiate exp(x_i) "
        "/ Z: the derivative of exp is exp, which brings p_i in front of every term.") or None


def _one_hot(fn):
    """dp = e_0: the gradient at 0 is positive and the others are not 0."""
    g = as_array(output_of(fn, np.array([[1.0, 0.0, 0.0, 0.0]]), _P.copy()))
    if g is None or g.shape != _P.shape:
        return STOP
    if np.abs(g).max() < 1e-12:
        return Finding("the gradient is 0 for every dp", "with dp = e_0 your gradient is 0 everywhere; it "
                       "must be p_0 (e_0 - p), not 0", "dx_j = sum_i dp_i J_ij with J_ij = dp_i/dx_j = p_i "
                       "(delta_ij - p_j): contract dp with the Jacobian's FIRST index. Each column of J "
                       "sums to 0, so summing over the index you keep (or multiplying by a row sum of p, "
                       "which is 1) gives 0.")
    if g[0, 0] < 0:
        return Finding("sign flipped", "with dp = e_0 your gradient at 0 is negative", "Raising x_0 raises "
                       "p_0: with dp = e_0 the gradient at 0 must be positive.")
    return np.abs(g[0, 1:]).max() < 1e-12 and Finding(
        "kept only the diagonal of the Jacobian", "with dp = e_0 your gradient is 0 off the diagonal",
        _DIAGONAL.hint) or None


_ROWS = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])


def _three_rows(fn):
    """Three rows (3, 4), one row (1, 4) having worked: the row sum must broadcast back."""
    g = output_of(fn, np.arange(12.0).reshape(3, 4), _ROWS.copy())
    return not shaped(g, _ROWS.shape) and Finding(
        "the row sum does not broadcast back (keepdims missing)", f"one row (1, 4) works but three rows (3, "
        f"4) give {shown(g)}: a sum over the last axis of shape (3,) lines up with the LAST axis of (3, 4), "
        "not with the rows", "Keep the summed axis: (dp * p).sum(axis=-1, keepdims=True) has shape (..., "
        "1) and broadcasts along each row.") or None


def _leading_axes(fn):
    """A batch (2, 3, 4), 2-D inputs having worked."""
    p3 = np.broadcast_to(_P, (2, 3, 4)).copy()
    g = output_of(fn, np.ones_like(p3), p3)
    return not shaped(g, p3.shape) and Finding(
        "does not work with batch axes", f"2-D inputs (1, 4) and (3, 4) work but (2, 3, 4) gives {shown(g)}",
        "Write it for any number of leading axes: reduce over axis=-1 with keepdims=True, and never build "
        "the (n, n) Jacobian (np.diag, np.outer are 2-D only).") or None


def _rows_alone(fn):
    """On three rows each row's gradient sums to 0 (each row is its own softmax)."""
    g = as_array(output_of(fn, np.arange(12.0).reshape(3, 4), _ROWS))
    return g is not None and g.shape == _ROWS.shape and not close_to(g.sum(-1), np.zeros(3), 0, 1e-9) and (
        Finding("the sum is not over each row alone", "on a (3, 4) input your rows do not sum to 0 (each "
                "row's gradient of a softmax must)", "Each row is its own softmax: sum over axis=-1 with "
                "keepdims=True.")) or None


def softmax_backward_probe(fn, expected):
    """A constant loss, a masked key, a one-hot dp, then more rows and a batch."""
    return decide((_constant_loss, _factor_p, _one_hot, _three_rows, _leading_axes, _rows_alone), fn)


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


_OTHER = {"top_left": "bottom_right", "bottom_right": "top_left"}


def _right_causal(fn, L, S, align):
    """The submission's (L, S) mask of ``align`` is the causal mask (measured from its rows)."""
    out = output_of(fn, L, S, align)
    if isinstance(out, Raised) or np.shape(out) != (L, S) or np.asarray(out).dtype != bool:
        return False
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    return bool(np.array_equal(out, j <= i + (0 if align == "top_left" else S - L)))


class _CausalMask:
    """The submission's (L, S) causal mask of ``align``, measured: ``m`` (None if it raised),
    ``want`` the offset of the right diagonal, ``kind`` and ``k`` from :func:`_offsets` (``k`` the
    one offset of its partial rows, None when they have several)."""

    def __init__(self, fn, L, S, align):
        self.fn, self.L, self.S, self.align = fn, L, S, align
        out = output_of(fn, L, S, align)
        self.m = None if isinstance(out, Raised) else np.asarray(out)
        self.want = 0 if align == "top_left" else S - L
        self.where = f"(L={L}, S={S}, {align})"
        measured = self.m is not None and self.m.dtype == bool and self.m.shape == (L, S)
        self.kind, self.ks = _offsets(self.m) if measured else (None, None)
        self.k = self.ks[0] if self.kind == "prefix" and len(set(self.ks)) == 1 else None

    def right_offsets(self):
        """Every partial row ends on the right diagonal."""
        return self.kind == "prefix" and set(self.ks) == {self.want}


def _transposed(fn, L, S, align):
    """The mask has shape (S, L)."""
    m = output_of(fn, L, S, align)
    return not isinstance(m, Raised) and np.shape(m) == (S, L)


def _l_below_s_right(c):
    """The same function's bottom-right masks with L < S (L=3, S=6) are right."""
    return _CausalMask(c.fn, 3, 6, "bottom_right").right_offsets()


def _bottom_right(c):
    return c.align == "bottom_right"


_ONE_OFFSET = ("Write both alignments with one offset: query i sees keys j <= i + offset, offset 0 "
               "(top_left) or S - L (bottom_right).")
#: one mask: its dtype and shape, its polarity, then where its diagonal is
_CAUSAL = (
    (lambda c: c.m is None, STOP),
    (lambda c: c.m.dtype != bool and c.m.shape == (c.L, c.S) and set(np.unique(c.m).tolist()) <= {0, 1},
     lambda c: Finding("returned a float mask", f"your mask has dtype {c.m.dtype}", "Return a bool array "
                       "(True = may attend): np.tri(..., dtype=bool) or a comparison like j <= i.")),
    (lambda c: c.m.dtype != bool, STOP),
    (lambda c: c.m.shape == (c.S, c.L) and c.L != c.S, lambda c: Finding(
        "causal mask transposed", f"for L={c.L}, S={c.S} your mask has shape (S, L)", "One row per query "
        "(L), one column per key (S).")),
    (lambda c: c.m.shape != (c.L, c.S), STOP),
    (lambda c: c.kind == "suffix", lambda c: Finding(
        "mask polarity flipped" if np.array_equal(c.m, ~np.tri(c.L, c.S, c.want, dtype=bool)) else
        "True on the future keys (polarity flipped)", "your mask is True for the future keys (the ones a "
        "query may NOT see)", "The convention is True = may attend (PyTorch's bool attn_mask), not True "
        "= blocked.")),
    (lambda c: c.k is None or c.k == c.want, None),            # right, or no one diagonal: go on
    (lambda c: c.k in (c.want - 1, c.want + 1) and _right_causal(c.fn, c.L, c.S, _OTHER[c.align]),
     lambda c: Finding(f"causal mask off by one on {c.align} only", f"{c.where} query i sees keys up to "
                       f"i + {c.k}, expected i + {c.want}; with {_OTHER[c.align]} your mask is right",
                       _ONE_OFFSET)),
    (lambda c: c.k == c.want - 1, lambda c: Finding(
        "causal mask off by one (diagonal excluded)", f"{c.where} query i cannot see its own position",
        "May a position attend to itself? Look at entry (0, 0).")),
    (lambda c: c.k == c.want + 1, lambda c: Finding(
        "causal mask off by one (one future key allowed)", f"{c.where} query i sees one key too many",
        "Query i must not see key i + 1: check the first row.")),
    (lambda c: _bottom_right(c) and c.k == 0 and c.L > c.S and _l_below_s_right(c), lambda c: Finding(
        "causal mask wrongly aligned when L > S", f"{c.where} your mask is top-left aligned, though your "
        "bottom-right masks with L < S are right: the offset S - L = "
        f"{c.S - c.L} is negative here and was not used", "bottom_right: query i sees keys 0..i + S - L "
        "for any L and S; with L > S the first L - S queries see no key at all (do not clamp the offset "
        "at 0).")),
    (lambda c: _bottom_right(c) and c.k == 0, lambda c: Finding(
        "causal mask wrongly aligned (always top-left)", f"{c.where} your mask is top-left aligned", "With "
        "L < S, bottom-right alignment makes the L queries the LAST L positions: the last query sees "
        "every key.")),
    (lambda c: _bottom_right(c) and c.k == c.L - c.S, lambda c: Finding(
        "causal mask wrongly aligned (offset L - S instead of S - L)", f"{c.where} your diagonal is "
        "shifted the wrong way", "Bottom-right: query i is position i + (S - L) of the sequence. Which "
        "sign?")),
    (lambda c: c.align == "top_left" and c.k == c.S - c.L, lambda c: Finding(
        "the two alignments swapped", f"{c.where} your mask is bottom-right aligned", "top_left: query i "
        "sees keys 0..i; bottom_right: keys 0..i + S - L.")),
    (lambda c: True, lambda c: Finding(
        "causal mask misaligned", f"{c.where} query i sees keys up to i + {c.k}, expected i + {c.want}",
        "Count, for one row, which keys it may see; then write the offset of the diagonal.")),
)


def _transposed_step(L, S, align):
    def step(fn):
        return _transposed(fn, L, S, align) and Finding(
            "causal mask transposed", f"for L={L}, S={S} your mask has shape (S, L) = {(S, L)}, expected "
            f"(L, S) = {(L, S)}", "One row per query (L), one column per key (S): the query index runs "
            "down the rows, i[:, None], the key index along the columns, j[None, :].") or None
    return step


def _mask_step(L, S, align):
    return lambda fn: first(_CAUSAL, _CausalMask(fn, L, S, align))


#: two shapes (S, L) first; then each mask's rule table, on square, L < S both ways and L > S
_CAUSAL_STEPS = (_transposed_step(3, 6, "top_left"), _transposed_step(6, 3, "bottom_right"),
                 *(_mask_step(L, S, align) for L, S, align in ((5, 5, "top_left"), (3, 6, "bottom_right"),
                                                             (3, 6, "top_left"), (6, 3, "bottom_right"))))


def causal_probe(fn, expected):
    """The causal masks of a few (L, S, align): shape, dtype, polarity, then the diagonal's offset."""
    return decide(_CAUSAL_STEPS, fn)


_LENGTHS, _S = np.array([2, 0, 4]), 5
_B = len(_LENGTHS)
_REAL = np.arange(_S)[None, :] < _LENGTHS[:, None]          # (B, S): True on the real keys


class _Padding:
    """The submission's padding mask for lengths [2, 0, 4] and S = 5: ``m`` (None if it raised),
    ``squeezed`` its (B, S) values when its shape is (B, 1, S) or (B, S) (``flat`` for the latter),
    ``counts`` the True keys per sequence."""

    def __init__(self, fn):
        out = output_of(fn, _LENGTHS.copy(), _S)
        self.m = None if isinstance(out, Raised) else np.asarray(out)
        self.flat = self.m is not None and self.m.shape == (_B, _S)
        bs1 = self.m is not None and self.m.shape == (_B, 1, _S)
        self.squeezed = self.m if self.flat else self.m[:, 0] if bs1 else None
        self.counts = None if self.squeezed is None else self.squeezed.sum(-1)

    def off_by(self, n):
        """Each non-empty sequence sees its first keys, ``n`` more than its length."""
        real = _LENGTHS > 0
        prefix = all(self.squeezed[b, :c].all() for b, c in enumerate(self.counts))
        return prefix and np.array_equal(self.counts[real], _LENGTHS[real] + n)


def _off_by_one(c):
    fewer = c.off_by(-1)
    got = ", ".join(f"{n} for length {length}" for n, length in zip(c.counts, _LENGTHS, strict=True))
    return Finding("padding mask off by one (the last real key left out)" if fewer else "padding mask off by "
                   "one", f"your mask lets each sequence see its first keys, but {got} (lengths "
                   f"{_LENGTHS.tolist()}, S = {_S})", "A sequence of length 3 has keys 0, 1 and 2, all three "
                   "real: j < length." if fewer else "A sequence of length 3 has keys 0, 1, 2: is key 3 "
                   "real? And a length 0 sees no key.")


#: the mask's dtype, its shape, its polarity, where each sequence's keys end
_PADDING = (
    (lambda c: c.m is None, STOP),
    (lambda c: c.m.dtype != bool, lambda c: Finding(
        "returned a non-bool mask", f"your mask has dtype {c.m.dtype}", "Return a bool array (True = may "
        "attend): a comparison gives one.")),
    (lambda c: c.squeezed is None and c.m.shape in ((_S, _B), (_S, 1, _B), (1, _S, _B)), lambda c: Finding(
        "padding mask transposed", f"your mask has shape {c.m.shape}, expected (B, 1, S) = {(_B, 1, _S)}",
        "One entry per sequence on the first axis, one per key on the last: (B, 1, S), the 1 broadcasting "
        "over the queries.")),
    (lambda c: c.squeezed is None, lambda c: Finding(
        "padding mask of the wrong shape", f"your mask has shape {c.m.shape}, expected (B, 1, S) = "
        f"{(_B, 1, _S)}", "(B, 1, S) broadcasts against scores (B, L, S): add the query axis with "
        "[:, None, :].")),
    (lambda c: np.array_equal(c.squeezed, ~_REAL), Finding(
        "padding mask polarity flipped", "your mask is True on the padding keys", "True = may attend: the "
        "real keys, j < length, are the True ones.")),
    (lambda c: c.off_by(1) or c.off_by(-1), _off_by_one),
    (lambda c: c.flat and np.array_equal(c.squeezed, _REAL), Finding(
        "padding mask of shape (B, S) instead of (B, 1, S)", "your values are right but the shape is (B, S)",
        "The contract is (B, 1, S): the middle 1 broadcasts over the L queries of scores (B, L, S). Add it "
        "with [:, None, :].")),
)


def padding_probe(fn, expected):
    """The padding mask of lengths [2, 0, 4] (an empty sequence included): dtype, shape, polarity,
    then where each sequence's keys end."""
    return judge(_PADDING, _Padding(fn))


# ======================================================================== attention
# ======================================================================== sinusoidal
_N, _DM = 6, 8                       # positions and d_model of the probe's table


def _row_zero(out):
    """Row 0 (pos = 0) must be sin(0), cos(0), ... = 0, 1, 0, 1, ...: which known wrong row it is."""
    if close_to(out[0], np.tile([0.0, 1.0], _DM // 2)):
        return None
    return matching(out[0], (
        (np.tile([1.0, 0.0], _DM // 2), Finding("sin and cos swapped", "row 0 is 1, 0, 1, 0, ...", "Row 0 "
                                                "should start 0, 1, 0, 1, ...: which of sin and cos is 0 "
                                                "at pos = 0?")),
        (np.repeat([0.0, 1.0], _DM // 2), Finding("sin and cos in two halves instead of interleaved", "row 0 "
                                                  "is 0, ..., 0, 1, ..., 1", "The paper interleaves: even "
                                                  "columns sin, odd columns cos.")))) or Finding(
        "positions start at 1", "row 0 is not sin(0), cos(0), ...: it is the encoding of another position",
        "The first position is pos = 0: row 0 is sin(0), cos(0), ...")


def _pair_frequencies(out):
    """At pos = 1 each column's angle is its frequency: a sin column and its cos partner must share one."""
    w_sin, w_cos = np.arcsin(np.clip(out[1, 0::2], -1, 1)), np.arccos(np.clip(out[1, 1::2], -1, 1))
    big = (w_sin > 0.05) & (w_cos > 0.05)               # well-conditioned angles (float32 too)
    if not big.any() or close_to(w_sin[big], w_cos[big], 1e-4, 1e-5):
        return None
    if close_to(w_cos, 10000.0 ** (-np.arange(1, _DM, 2) / _DM), 1e-4, 1e-5) and close_to(
            w_sin, 10000.0 ** (-np.arange(0, _DM, 2) / _DM)):
        return Finding("each column uses its own index in the exponent", "the cos column 2i+1 has frequency "
                       "10000^(-(2i+1)/d_model), its sin partner 10000^(-2i/d_model)", "Columns 2i and 2i+1 "
                       "are one pair with ONE frequency, 1/10000^(2i/d_model): use the pair's 2i for both, "
                       "not each column's index.")
    return Finding("sin and cos of a pair have different frequencies", "at pos = 1 the sin columns have "
                   f"angles {np.round(w_sin, 4).tolist()} and the cos columns {np.round(w_cos, 4).tolist()}",
                   "Columns 2i and 2i+1 share one frequency, 1/10000^(2i/d_model).")


def _rising(out):
    """The sin columns are sin(pos * 10000^(2i/d_model)) and not sin(pos / 10000^(2i/d_model))."""
    pos, pair = np.arange(_N)[:, None], np.arange(0, _DM, 2)[None, :]
    falling = close_to(out[:, 0::2], np.sin(pos / 10000.0 ** (pair / _DM)), 1e-6, 1e-9)
    rising = close_to(out[:, 0::2], np.sin(pos * 10000.0 ** (pair / _DM)), 1e-6, 1e-9)
    return not falling and rising and Finding(
        "frequencies rise instead of fall", "your pair i has frequency 10000^(+2i/d_model): the position is "
        "multiplied by 10000^(2i/d_model)", "The angle is pos / 10000^(2i/d_model): the wavelengths grow "
        "from 2*pi (pair 0) to nearly 10000 * 2*pi.") or None


def _angles(out):
    """The angle of pos = 1 of each sin/cos pair: its frequency."""
    return np.arctan2(out[1, 0::2], out[1, 1::2])


def _same_frequency(out):
    w = _angles(out)
    return np.all(w > 0) and close_to(w, np.full_like(w, w[0]), 1e-9, 1e-12) and Finding(
        "every pair has the same frequency", f"at pos = 1 every sin/cos pair has angle {w[0]:.4g}: the "
        "frequency does not fall with the pair index i", "The exponent 2i/d_model grows with i. Note that 2 "
        "* i // d_model is integer division: 0 for every i < d_model / 2.") or None


def _base(out):
    """The base b of the frequencies b^(-2i/d_model), fitted from log w = -(2i/d) log b."""
    w = _angles(out)
    if not np.all(w > 0):
        return None
    base = float(np.exp(-np.polyfit(2 * np.arange(_DM // 2) / _DM, np.log(w), 1)[0]))
    if abs(base - 100.0) < 1:
        return Finding("exponent i/d_model instead of 2i/d_model", "your frequencies fall as "
                       "10000^(-i/d_model)", "i indexes the sin/cos PAIRS: column 2i's frequency uses 2i, "
                       "the column index.")
    return abs(base - 10000.0) > 1 and Finding(
        "wrong base" if abs(base - 1000.0) < 1 else f"base {base:.4g} instead of 10000", f"your frequencies "
        f"fall as {base:.4g}^(-2i/d_model)", "The wavelengths form a geometric progression from 2*pi to "
        "10000 * 2*pi.") or None


def sinusoidal_probe(fn, expected):
    """The table's shape, its row 0, each pair's frequency at pos = 1, then how they fall."""
    out = as_array(output_of(fn, _N, _DM))
    if out is not None and out.shape == (_DM, _N):
        return Finding("table transposed", f"shape {out.shape}, expected (length, d_model) = {(_N, _DM)}",
                       "One row per position.")
    if out is None or out.shape != (_N, _DM):
        return None
    return decide((_row_zero, _pair_frequencies, _rising, _same_frequency, _base), out)
