"""Exercises on the pieces of Eq. (1): stable softmax, its backward, masks, sinusoidal positions."""

from __future__ import annotations

import numpy as np

from attention_np.exercises import generate
from attention_np.exercises.checker import UNWEIGHTED_HINT, Case, Exercise, Mistake
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.paper.masks import causal_mask, padding_mask
from attention_np.paper.softmax import softmax, softmax_backward


# ---------------------------------------------------------------- softmax
def ref_softmax(x):
    """Stable softmax over the last axis of ``x`` (..., n); keeps the dtype."""
    return softmax(x, axis=-1)


def _softmax_build(rng, sz, key, family):
    x = generate.logits(rng, (*sz["batch"], sz["n"]), family, sz["dtype"])
    return (generate.some_neg_inf(rng, x) if key == "neg_inf" else x,)


SOFTMAX_SPEC = generate.Spec(
    "softmax", (generate.Axis("n", high=7),), lead=3, build=_softmax_build,
    measure=lambda a: {"n": a[0].shape[-1], "batch": a[0].shape[:-1], "dtype": a[0].dtype},
    clauses=(generate.Clause("batch"), generate.Clause("neg_inf", excludes=("n=1",)),
             generate.Clause("extreme", ("huge", "tiny", "scales", "peak", "later_larger", "both_signs")),
             generate.Clause("sums_to_one")))


def _softmax_cases(seed=0):
    return generate.draw(SOFTMAX_SPEC, seed, None if seed == 0 else 0)


def _sm(e, axis=-1):
    return e / e.sum(axis, keepdims=True)


SOFTMAX = Exercise(
    "softmax", "softmax(x)",
    "Attention(Q, K, V) = softmax(QK^T / sqrt(d_k)) V  (the softmax of each row of scores)",
    ref_softmax, _softmax_cases, spec=SOFTMAX_SPEC, mistakes=[
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


def _softmax_backward_build(rng, sz, key, family):
    shape = (*sz["batch"], sz["n"])
    x = generate.logits(rng, shape, family)
    if key == "zeros":
        x = generate.some_neg_inf(rng, x)
    return rng.normal(size=shape).astype(sz["dtype"]), softmax(x).astype(sz["dtype"])


SOFTMAX_BACKWARD_SPEC = generate.Spec(
    "softmax_backward", (generate.Axis("n", high=7),), lead=3, build=_softmax_backward_build,
    measure=lambda a: {"n": a[1].shape[-1], "batch": a[1].shape[:-1], "dtype": a[1].dtype},
    clauses=(generate.Clause("batch"), generate.Clause("zeros", excludes=("n=1",)),
             generate.Clause("gradient", ("normal", "peak", "later_larger", "both_signs"))))


def _softmax_backward_cases(seed=1):
    rng = np.random.default_rng(seed)
    x, dp = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    return generate.draw(SOFTMAX_BACKWARD_SPEC, seed, None if seed == 1 else 1) + [
        Case("gradcheck: central differences of softmax", (dp, softmax(x)),
             expected=_fd_softmax_grad(x, dp), tol=(1e-6, 1e-8), clauses=("gradient",))]


SOFTMAX_BACKWARD = Exercise(
    "softmax_backward", "softmax_backward(dp, p)",
    "The backward of P = softmax(S), row by row: dS = P * (dP - sum(dP * P))",
    ref_softmax_backward, _softmax_backward_cases, spec=SOFTMAX_BACKWARD_SPEC, mistakes=[
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


def _causal_build(rng, sz, key, family):
    return sz["L"], sz["S"], key if key in ("top_left", "bottom_right") else family


CAUSAL_SPEC = generate.Spec(
    "causal_mask", (generate.Axis("L", high=7), generate.Axis("S", high=7)), differ=(("L", "S"),),
    equal=(("L", "S"),), floats=False, build=_causal_build,
    measure=lambda a: {"L": a[0], "S": a[1]},
    clauses=(generate.Clause("sizes", ("top_left", "bottom_right")), generate.Clause("top_left"),
             generate.Clause("bottom_right"), generate.Clause("bool", ("top_left", "bottom_right"))))


def _causal_cases(seed=0):
    return generate.draw(CAUSAL_SPEC, seed, None if seed == 0 else 0)


CAUSAL_MASK = Exercise(
    "causal_mask", "causal_mask(L, S, align)",
    "We ... prevent leftward information flow in the decoder ... by masking out (setting to "
    "-inf) all values in the input of the softmax which correspond to illegal connections (§3.2.3)",
    ref_causal_mask, _causal_cases, spec=CAUSAL_SPEC,
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


def _padding_build(rng, sz, key, family):
    B, S = sz["B"], sz["S"]
    lengths = rng.integers(0, S + 1, size=B)
    if key in ("zero_length", "full_length"):
        lengths[rng.integers(B)] = 0 if key == "zero_length" else S
    return lengths, S


PADDING_SPEC = generate.Spec(
    "padding_mask", (generate.Axis("B", high=5), generate.Axis("S", high=7)), differ=(("B", "S"),),
    floats=False, build=_padding_build, measure=lambda a: {"B": len(a[0]), "S": a[1]},
    clauses=(generate.Clause("zero_length"), generate.Clause("full_length"),
             generate.Clause("shape")))


def _padding_cases(seed=0):
    return generate.draw(PADDING_SPEC, seed, None if seed == 0 else 0)


PADDING_MASK = Exercise(
    "padding_mask", "padding_mask(lengths, S)",
    "Padding keys must get zero weight: mask them out of the softmax, as for §3.2.3's causal mask.",
    ref_padding_mask, _padding_cases, spec=PADDING_SPEC, mistakes=[
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


SINUSOIDAL_SPEC = generate.Spec(
    "sinusoidal", (generate.Axis("length", high=60), generate.Axis("d_model", low=2, high=32, step=2)),
    differ=(("length", "d_model"),), floats=False, build=lambda rng, sz, key, family: (sz["length"],
                                                                                       sz["d_model"]),
    measure=lambda a: {"length": a[0], "d_model": a[1]},
    clauses=(generate.Clause("sizes"), generate.Clause("table")))


def _sinusoidal_cases(seed=0):
    return generate.draw(SINUSOIDAL_SPEC, seed, None if seed == 0 else 0)


SINUSOIDAL = Exercise(
    "sinusoidal", "sinusoidal(length, d_model)",
    "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))  (§3.5)",
    ref_sinusoidal, _sinusoidal_cases, spec=SINUSOIDAL_SPEC,
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
