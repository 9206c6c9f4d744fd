"""Exercises on the pieces of Eq. (1): stable softmax, its backward, masks, sinusoidal positions."""

from __future__ import annotations

import numpy as np

from attention_np.exercises.checker import UNWEIGHTED_HINT, Case, Exercise, Mistake
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.paper.masks import causal_mask, padding_mask
from attention_np.paper.softmax import softmax, softmax_backward


# ---------------------------------------------------------------- softmax
def ref_softmax(x):
    """Stable softmax over the last axis of ``x`` (..., n); keeps the dtype."""
    return softmax(x, axis=-1)


def _softmax_cases(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, 5))
    return [
        Case("random (4, 5)", (x,), clauses=("sums_to_one",)),
        Case("batched (2, 3, 4, 6)", (rng.normal(size=(2, 3, 4, 6)),), clauses=("batch",)),
        Case("huge logits ~1000 (exp overflows)", (1000.0 + 50 * rng.normal(size=(3, 4)),),
             clauses=("extreme",)),
        Case("very negative logits ~-1000 (exp underflows)", (-1000.0 + 5 * rng.normal(size=(3, 4)),),
             clauses=("extreme",)),
        Case("rows on different scales", (np.array([[1.0, 2.0, 3.0], [800.0, 801.0, 802.0]])
                                          + rng.normal(size=(1, 3)),), clauses=("extreme",)),
        Case("-inf entries (masked)", (_some_neg_inf(rng, x[:3, :4]),), clauses=("neg_inf",)),
        Case("single column", (rng.normal(size=(3, 1)),), clauses=("batch",)),
        Case("float32 (3, 7)", (rng.normal(size=(3, 7)).astype(np.float32),), dtype=np.float32,
             clauses=("dtype",)),
    ]


def _some_neg_inf(rng, x):
    """``x`` with about 40 % of its entries -inf, at least one finite entry per row."""
    out = np.where(rng.random(x.shape) < 0.4, -np.inf, x)
    out[..., 0] = x[..., 0]
    return out


def _sm(e, axis=-1):
    return e / e.sum(axis, keepdims=True)


SOFTMAX = Exercise(
    "softmax", "softmax(x)",
    "Attention(Q, K, V) = softmax(QK^T / sqrt(d_k)) V  (the softmax of each row of scores)",
    ref_softmax, _softmax_cases, [
        Mistake("no max subtraction (overflow)", lambda x: _sm(np.exp(x)),
                "exp(1000) is inf in floating point. softmax(x) = softmax(x - c) for any "
                "constant c per row: which c makes every exponent <= 0?"),
        Mistake("softmax over the wrong axis", lambda x: _sm(np.exp(x - x.max(0, keepdims=True)), 0),
                "Each query's weights over the keys sum to one: which axis holds the keys?"),
        Mistake("subtracted the global max instead of each row's",
                lambda x: _sm(np.exp(x - x.max())),
                "With rows on different scales, one row's max makes another row's exponents all "
                "underflow to 0. The shift must be per row."),
        Mistake("the shift does not make the largest exponent 0",
                lambda x: _sm(np.exp(x - x.min(-1, keepdims=True))),
                "Subtract each row's MAX (not its min or mean, not a constant): then every "
                "exponent is <= 0 and the largest is exactly 0."),
        Mistake("normalized over the whole array",
                lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(),
                "Does every row of your result sum to 1? Normalize each row by its own sum."),
        Mistake("forgot to normalize", lambda x: np.exp(x - x.max(-1, keepdims=True)),
                "softmax is exp divided by a sum: check that each row sums to 1."),
        Mistake("returned log-softmax", lambda x: (x - x.max(-1, keepdims=True)) - np.log(
            np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
                "Your values are negative: softmax returns probabilities in [0, 1]."),
        Mistake("dtype not kept",
                lambda x: softmax(np.asarray(x, dtype=np.float64)),
                "Keep the input's dtype: a float32 model should stay float32 (avoid float64 "
                "constants or dtype=np.float64 in intermediate arrays)."),
    ])


# ---------------------------------------------------------------- softmax backward
def ref_softmax_backward(dp, p):
    """dL/dx from dL/dp (..., n) and p = softmax(x) (..., n), over the last axis."""
    return softmax_backward(dp, p, axis=-1)


def _fd_softmax_grad(x, dp):
    x = x.copy()
    return numerical_gradient(lambda: float((dp * softmax(x)).sum()), x)


def _softmax_backward_cases(seed=1):
    rng = np.random.default_rng(seed)
    x, dp = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    x4, dp4 = rng.normal(size=(2, 2, 3, 4)), rng.normal(size=(2, 2, 3, 4))
    xm = _some_neg_inf(rng, rng.normal(size=(3, 5)))
    x32 = rng.normal(size=(3, 6))
    dp32 = rng.normal(size=(3, 6))
    return [
        Case("random (3, 5)", (dp, softmax(x)), clauses=("gradient",)),
        Case("batched (2, 2, 3, 4)", (dp4, softmax(x4)), clauses=("batch",)),
        Case("peaked rows (huge logits)", (dp, softmax(30 * x)), clauses=("gradient",)),
        Case("masked entries (p = 0)", (dp, softmax(xm)), clauses=("zeros",)),
        Case("gradcheck: central differences of softmax", (dp, softmax(x)),
             expected=_fd_softmax_grad(x, dp), tol=(1e-6, 1e-8), clauses=("gradient",)),
        Case("float32", (dp32.astype(np.float32), softmax(x32).astype(np.float32)),
             dtype=np.float32, clauses=("dtype",)),
    ]


SOFTMAX_BACKWARD = Exercise(
    "softmax_backward", "softmax_backward(dp, p)",
    "The backward of P = softmax(S), row by row: dS = P * (dP - sum(dP * P))",
    ref_softmax_backward, _softmax_backward_cases, [
        Mistake("kept only the diagonal of the Jacobian", lambda dp, p: p * (1 - p) * dp,
                "Each output p_i depends on every input x_j, not only x_i: the Jacobian "
                "diag(p) - p p^T has off-diagonal terms."),
        Mistake("dropped the sum term", lambda dp, p: p * dp,
                "Changing x_j changes the normalizer, which moves every p_i: where is that "
                "term in your gradient?"),
        Mistake("forgot the factor p", lambda dp, p: dp - (dp * p).sum(-1, keepdims=True),
                "Differentiate exp(x_i) / Z: the derivative of exp is exp, which brings p_i "
                "in front."),
        Mistake("sum without the weights p", lambda dp, p: p * (dp - dp.sum(-1, keepdims=True)),
                UNWEIGHTED_HINT),
        Mistake("sign flipped", lambda dp, p: p * ((dp * p).sum(-1, keepdims=True) - dp),
                "Raising x_i raises p_i: with dp = e_i, the gradient at i should be positive."),
        Mistake("summed over the wrong axis", lambda dp, p: p * (dp - (dp * p).sum(0, keepdims=True)),
                "Each row is its own softmax: which axis did the forward normalize over?"),
    ])


# ---------------------------------------------------------------- masks
def ref_causal_mask(L, S, align):
    """Bool (L, S), True = may attend; align "top_left" or "bottom_right"."""
    return causal_mask(L, S, align=align)


def _causal_cases(sizes=((4, 4), (2, 5), (5, 2), (1, 6), (3, 3))):
    return [Case(f"L={L}, S={S}, {a}", (L, S, a), clauses=(a, "bool") + (("sizes",) if L != S or L == 1
                                                                          else ()))
            for (L, S) in sizes for a in ("top_left", "bottom_right")]


CAUSAL_MASK = Exercise(
    "causal_mask", "causal_mask(L, S, align)",
    "We ... prevent leftward information flow in the decoder ... by masking out (setting to "
    "-inf) all values in the input of the softmax which correspond to illegal connections (§3.2.3)",
    ref_causal_mask, _causal_cases, hidden=lambda: _causal_cases(((6, 6), (3, 7), (7, 3), (1, 1))),
    mistakes=[
        Mistake("causal mask off by one (diagonal excluded)",
                lambda L, S, a: np.tri(L, S, k=(0 if a == "top_left" else S - L) - 1, dtype=bool),
                "May a position attend to itself? Look at entry (0, 0)."),
        Mistake("causal mask off by one (one future key allowed)",
                lambda L, S, a: np.tri(L, S, k=(0 if a == "top_left" else S - L) + 1, dtype=bool),
                "Query i must not see key i + 1: check the first row."),
        Mistake("mask polarity flipped",
                lambda L, S, a: ~np.tri(L, S, k=0 if a == "top_left" else S - L, dtype=bool),
                "The convention is True = may attend (PyTorch's bool attn_mask), not True = blocked."),
        Mistake("causal mask wrongly aligned (always top-left)",
                lambda L, S, a: np.tri(L, S, dtype=bool),
                "With L < S, bottom-right alignment makes the L queries the LAST L positions: "
                "the last query sees every key."),
        Mistake("causal mask wrongly aligned (offset L - S instead of S - L)",
                lambda L, S, a: np.tri(L, S, k=0 if a == "top_left" else L - S, dtype=bool),
                "Bottom-right: query i is position i + (S - L) of the sequence. Which sign?"),
        Mistake("returned a float mask", lambda L, S, a: np.tri(L, S, k=0 if a == "top_left" else S - L),
                "Return a bool array (True = may attend), not 0/1 floats."),
    ])


def ref_padding_mask(lengths, S):
    """Bool (B, 1, S): key j of sequence b is real (True) iff j < lengths[b]."""
    return padding_mask(lengths, S)


def _padding_cases():
    return [Case("lengths [3, 1, 5], S=5", (np.array([3, 1, 5]), 5), clauses=("shape", "full_length")),
            Case("lengths [2, 4], S=6", (np.array([2, 4]), 6), clauses=("shape",)),
            Case("one sequence, full length", (np.array([4]), 4), clauses=("full_length",)),
            Case("lengths [2, 0, 3], S=4 (an empty sequence)", (np.array([2, 0, 3]), 4),
                 clauses=("zero_length",))]


def _padding_hidden():
    return [Case("lengths [0, 2], S=3 (an empty sequence)", (np.array([0, 2]), 3),
                 clauses=("zero_length",)),
            Case("lengths [1, 1, 1], S=4", (np.array([1, 1, 1]), 4), clauses=("shape",)),
            Case("lengths [5, 3], S=8", (np.array([5, 3]), 8), clauses=("shape",)),
            Case("lengths [6, 2], S=6", (np.array([6, 2]), 6), clauses=("full_length",))]


PADDING_MASK = Exercise(
    "padding_mask", "padding_mask(lengths, S)",
    "Padding keys must get zero weight: mask them out of the softmax, as for §3.2.3's causal mask.",
    ref_padding_mask, _padding_cases, hidden=_padding_hidden, mistakes=[
        Mistake("padding mask polarity flipped",
                lambda n, S: (np.arange(S)[None, :] >= np.asarray(n)[:, None])[:, None, :],
                "True = may attend: the real keys, j < length, are the True ones."),
        Mistake("padding mask off by one",
                lambda n, S: (np.arange(S)[None, :] <= np.asarray(n)[:, None])[:, None, :],
                "A sequence of length 3 has keys 0, 1, 2: is key 3 real?"),
        Mistake("padding mask transposed",
                lambda n, S: (np.arange(S)[None, :] < np.asarray(n)[:, None])[:, None, :].T,
                "One entry per sequence on the first axis, one per key on the last: (B, 1, S), "
                "the 1 broadcasting over the queries."),
        Mistake("padding mask of shape (B, S) instead of (B, 1, S)",
                lambda n, S: np.arange(S)[None, :] < np.asarray(n)[:, None],
                "The contract is (B, 1, S): the middle 1 broadcasts over the L queries of scores "
                "(B, L, S). Add it with [:, None, :]."),
    ])


# ---------------------------------------------------------------- positions
def ref_sinusoidal(length, d_model):
    """(length, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...)."""
    return sinusoidal_encoding(length, d_model)


def _pe(length, d_model, *, base=10000.0, start=0, rate=2, swap=False, halves=False):
    pos = np.arange(start, start + length)[:, None]
    ang = pos * base ** (-rate * np.arange(d_model // 2) / d_model)
    a, b = (np.cos(ang), np.sin(ang)) if swap else (np.sin(ang), np.cos(ang))
    if halves:
        return np.concatenate([a, b], axis=1)
    pe = np.empty((length, d_model))
    pe[:, 0::2], pe[:, 1::2] = a, b
    return pe


def _sinusoidal_cases(sizes):
    return [Case(f"length={n}, d_model={d}", (n, d),
                 clauses=("table",) + (("sizes",) if n == 1 or d == 2 else ())) for n, d in sizes]


SINUSOIDAL = Exercise(
    "sinusoidal", "sinusoidal(length, d_model)",
    "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))  (§3.5)",
    ref_sinusoidal,
    lambda: _sinusoidal_cases(((6, 8), (50, 16), (3, 2), (1, 6))),
    hidden=lambda: _sinusoidal_cases(((1, 4), (20, 32), (100, 6), (7, 2))),
    mistakes=[
        Mistake("sin and cos swapped", lambda n, d: _pe(n, d, swap=True),
                "Row 0 should start 0, 1, 0, 1, ...: which of sin and cos is 0 at pos = 0?"),
        Mistake("exponent i/d_model instead of 2i/d_model", lambda n, d: _pe(n, d, rate=1),
                "i indexes the sin/cos PAIRS: column 2i's frequency uses 2i, the column index."),
        Mistake("sin and cos in two halves instead of interleaved", lambda n, d: _pe(n, d, halves=True),
                "The paper interleaves: even columns sin, odd columns cos."),
        Mistake("wrong base", lambda n, d: _pe(n, d, base=1000.0),
                "The wavelengths form a geometric progression from 2*pi to 10000 * 2*pi."),
        Mistake("positions start at 1", lambda n, d: _pe(n, d, start=1),
                "The first position is pos = 0: row 0 is sin(0), cos(0), ..."),
    ])
