"""Behaviour probes of Eq. (1), its backward and the tiled forward (see probes.py)."""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised
from .probing import (
    RNG_SEED,
    STOP,
    Outputs,
    as_array,
    close_to,
    decide,
    first,
    has_nan,
    judge,
    measure_scale,
    output_of,
    scale_finding,
)


def _attention_inputs():
    rng = np.random.default_rng(RNG_SEED + 1)
    return {"q": rng.normal(size=(3, 16)), "k": rng.normal(size=(6, 16)), "v": rng.normal(size=(6, 2)),
            "qb": rng.normal(size=(2, 3, 4)), "kb": rng.normal(size=(2, 5, 4)),
            "vb": rng.normal(size=(2, 5, 2))}


def attention_shapes(fn, expected):
    x = _attention_inputs()
    out = output_of(fn, x["q"], x["k"], x["v"])
    if isinstance(out, Raised):
        return None
    a = as_array(out)
    if a is not None and a.shape == (3, 6):
        return Finding("returned the attention weights instead of the output", "your output has shape "
                       "(L, S) = (3, 6), expected (L, d_v) = (3, 2)", "Eq. (1) ends with '... V': the "
                       "weights average the values.")
    if a is None or a.shape != (3, 2):
        return None
    return _batched_finding(fn, x) or _shared_kv_finding(fn, x)


def _batched_finding(fn, x):
    """Unbatched inputs work: batched ones (2, L, d) must give (2, L, d_v)."""
    want = output_of(fn, x["qb"], x["kb"], x["vb"])
    batched = as_array(want)
    if batched is not None and batched.shape == (2, 3, 2):
        return None
    got = want.text if isinstance(want, Raised) else f"shape {getattr(batched, 'shape', None)}"
    return Finding("does not broadcast over batch axes", f"it works unbatched but on batched inputs "
                   f"(2, L, d) it gives {got}", "k.T reverses EVERY axis: on (B, S, d_k) it gives "
                   "(d_k, S, B). Use np.swapaxes(k, -1, -2) and index axes from the end, so leading "
                   "batch axes broadcast.")


def _shared_kv_finding(fn, x):
    """Batched inputs work: k and v shared by the batch (fewer leading axes, or a leading axis of
    size 1) must give what the same k and v repeated for each batch entry give."""
    for kv, what in (((x["kb"][0], x["vb"][0]), "k and v shared across the batch (no batch axis)"),
                     ((x["kb"][:1], x["vb"][:1]),
                      "k and v shared across the batch (a batch axis of size 1)")):
        got = _shared_kv_outcome(fn, x["qb"], kv)
        if got is not None:
            return Finding("does not broadcast over batch axes", f"batched inputs (2, L, d) work but on "
                           f"{what} it gives {got}", "k and v may have fewer leading axes than q, or axes of "
                           "size 1: let matmul broadcast them (q @ np.swapaxes(k, -1, -2)) instead of "
                           "indexing k[b] for each batch entry of q.")
    return None


def _shared_kv_outcome(fn, q, kv):
    """What is wrong with ``fn(q, *kv)`` for k, v shared by the batch of ``q`` (None: nothing)."""
    out = output_of(fn, q, *kv)
    b = as_array(out)
    if b is None or b.shape != (2, 3, 2):
        return out.text if isinstance(out, Raised) else f"shape {getattr(b, 'shape', None)}"
    repeated = as_array(output_of(fn, q, *(np.repeat(a.reshape(1, *a.shape[-2:]), 2, 0) for a in kv)))
    if repeated is not None and repeated.shape == b.shape and not close_to(b, repeated):
        return "another output than the same k and v repeated for each batch entry"
    return None


def attention_scale_axis(fn, expected):
    x = _attention_inputs()
    q, k = x["q"], x["k"]
    # v = I with an extra zero column: the output is the weights, and d_v = 7 differs from S = 6
    w = as_array(output_of(fn, q, k, np.eye(6, 7)))
    if w is None or w.shape != (3, 7) or has_nan(w):
        return None
    w = w[:, :6]
    if not close_to(w.sum(-1), np.ones(3), 1e-6) and close_to(w.sum(0), np.ones(6), 1e-6):
        return Finding("softmax over the wrong axis (over queries)", "your weights sum to 1 over the "
                       "queries (axis -2), not over the keys", "Each query distributes its attention "
                       "over the keys: the weights of one query (one row) sum to 1.")
    return scale_finding(measure_scale(w, q, k), 16, 7, S=6)


_MASK = np.array([[True, False, True, False], [True, True, True, False]])


def _masked_weights(fn, expected):
    """The weights (values v = I) under :data:`_MASK`, as ``(allowed, masked, rows' sums)``
    (None unless of the scores' shape and without NaN)."""
    rng = np.random.default_rng(RNG_SEED + 2)
    w = as_array(output_of(fn, rng.normal(size=(2, 4)), rng.normal(size=(4, 4)), np.eye(4), _MASK))
    if w is None or w.shape != (2, 4) or has_nan(w):
        return None
    return w[_MASK], w[~_MASK], w.sum(-1)


#: the weights under a mask: which keys get weight, and whether the rows still sum to 1
_WEIGHTS = (
    (lambda allowed, masked, sums: np.abs(allowed).max() < 1e-12 and masked.min() > 0, Finding(
        "mask polarity flipped", "your weights are 0 on the keys the mask allows", "The convention is True = "
        "may attend. Which entries did you set to -inf?")),
    (lambda allowed, masked, sums: np.abs(masked).max() > 1e-12, lambda allowed, masked, sums: Finding(
        "masked keys get weight", "keys the mask forbids get nonzero weight (up to "
        f"{np.abs(masked).max():.3g}): their score was set to 0 or another finite value, or the mask was "
        "ignored", "exp(0) = 1: a score of 0 still gets weight. What score gets weight exactly 0?")),
    (lambda allowed, masked, sums: not close_to(sums, np.ones(2), 1e-6), Finding(
        "masked after the softmax without renormalizing", "your weights are 0 on masked keys but a row sums "
        "to less than 1", "Zeroing weights after the softmax leaves rows that no longer sum to 1. Mask the "
        "scores, before the softmax.")),
)


def _weights_step(fn, expected):
    w = _masked_weights(fn, expected)
    return None if w is None else first(_WEIGHTS, *w)


def _masked_logit_step(fn, expected):
    """A masked key that scores far above the allowed one: q k^T = [800, 1], the answer v[1] = 2."""
    out = as_array(output_of(fn, np.array([[1.0]]), np.array([[800.0], [1.0]]), np.array([[5.0], [2.0]]),
                             np.array([[False, True]])))
    if out is None or out.shape != (1, 1) or close_to(out, [[2.0]]):
        return None
    if close_to(out, [[5.0]]):
        return Finding("masked keys get weight", "a masked key that scores far above the others (800 vs 1) "
                       "takes all the weight: the mask did not remove it", "A masked score must become -inf "
                       "before the softmax (np.where(mask, s, -np.inf)); adding or multiplying by the bool "
                       "mask does not do that.")
    return Finding("a masked key's score still counts", "when a masked key scores far above the others (800 "
                   f"vs 1) your output is {out.ravel()[0]:.4g}, not 2: the masked score still entered the "
                   "computation (the row max taken before masking, or the softmax run before the mask), so "
                   "the allowed key's weight underflowed", "Mask the SCORES (set them to -inf) first, and "
                   "only then take the row max and the softmax; then a masked key cannot influence the "
                   "others, however large its score.")


def attention_masks(fn, expected):
    """The weights under a mask (polarity, masked keys' weight, the rows' sums), then a masked key
    that scores far above the allowed one."""
    return decide((_weights_step, _masked_logit_step), fn, expected)


def attention_broadcast_mask(fn, expected):
    """A mask (B, 1, S) that only broadcasts against scores (B, L, S), against the same mask
    spelled out to (B, L, S)."""
    rng = np.random.default_rng(RNG_SEED + 13)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    small = (np.arange(5) < np.array([4, 2])[:, None])[:, None, :]
    full = np.broadcast_to(small, (2, 3, 5)).copy()
    spelled, short = output_of(fn, q, k, v, full), output_of(fn, q, k, v, small)
    if isinstance(spelled, Raised):
        return None
    if not isinstance(short, Raised):
        return short_mask_finding(fn, (q, k, v), "the scores (B, L, S) = (2, 3, 5)")
    return Finding("a mask that only broadcasts is not handled", f"a (B, L, S) mask works, the same "
                   f"mask as (B, 1, S) raises {short.text}", "Boolean indexing (s[..., ~mask] = ...) "
                   "needs the mask's full shape. np.where(mask, s, -np.inf) broadcasts the mask "
                   "against the scores, as the contract allows.")


def short_mask_finding(fn, args, where, extra=None):
    """A causal (L, S) mask against the same mask spelled out to the scores' shape (``extra``
    axes in front, default the batch of q): a finding when the short one raises or differs."""
    q, k = args[0], args[1]
    L, S = q.shape[-2], k.shape[-2]
    short = np.arange(S)[None, :] <= np.arange(L)[:, None] + (S - L)
    lead = extra if extra is not None else q.shape[:-2]
    spelled = as_array(output_of(fn, *args, np.broadcast_to(short, (*lead, L, S)).copy()))
    got = output_of(fn, *args, short)
    if spelled is None or has_nan(spelled):
        return None
    a = as_array(got)
    if a is not None and a.shape == spelled.shape and close_to(a, spelled, 1e-9, 1e-12):
        return None
    how = (f"raises {got.text}" if isinstance(got, Raised) else "gives another output" if a is not None
           and a.shape == spelled.shape else f"gives shape {np.shape(got)}")
    return Finding("an (L, S) mask is not lined up with the scores", f"with {where}, the mask spelled "
                   f"out to {(*lead, L, S)} works, the same mask as (L, S) = {(L, S)} {how}",
                   "NumPy lines shapes up from the right: an (L, S) mask already broadcasts against "
                   "(..., L, S) scores as it is. An axis added in front of it (mask[:, None]) moves L "
                   "onto another axis; add axes only where the contract puts them.")


class _FullRow:
    """Attention with query 1 allowed no key (``out``, ``a`` as an array), after the same inputs
    with every query allowed some key (``raised_anyway`` when that raises too)."""

    def __init__(self, fn):
        rng = np.random.default_rng(RNG_SEED + 3)
        q, k, self.v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
        some = np.array([[True, True, False], [True, False, False]])
        self.raised_anyway = isinstance(output_of(fn, q, k, self.v, some), Raised)
        self.out = None if self.raised_anyway else output_of(
            fn, q, k, self.v, np.array([[True, True, False], [False, False, False]]))
        self.a = as_array(self.out)


#: a query that may attend to nothing: its output must be 0
_NO_KEY = (
    (lambda r: r.raised_anyway, STOP),                  # it raises anyway: not about the full row
    (lambda r: isinstance(r.out, Raised), lambda r: Finding(
        "error on a fully masked row", f"a query that may attend to nothing makes your function raise "
        f"{r.out.text}", "A row of all -inf scores must give an output of 0 (the contract): special-case "
        "rows whose max is -inf.")),
    (lambda r: r.a is None or r.a.shape != (2, 2), STOP),
    (lambda r: has_nan(r.a[1]), Finding(
        "NaN on a fully masked row", "a query that may attend to nothing gives NaN", "A row that may attend "
        "to nothing is all -inf: its max is -inf and -inf - (-inf) is NaN. The contract: such a row returns "
        "0; special-case it.")),
    (lambda r: close_to(r.a[1], r.v.mean(0), 1e-6), Finding(
        "a fully masked row attends uniformly (finite fill like -1e9)", "a query that may attend to nothing "
        "returns the mean of the values", "With a finite fill, a row with every key masked softmaxes to "
        "uniform weights over keys it may not see. It should attend to nothing (output 0).")),
    (lambda r: not close_to(r.a[1], np.zeros(2), 0, 1e-12), lambda r: Finding(
        "a fully masked row is not 0", f"a query that may attend to nothing returns {r.a[1]}", "The "
        "contract: a row with no allowed key returns 0.")),
)


def attention_full_row(fn, expected):
    """A query that may attend to nothing (the contract: its output is 0)."""
    return judge(_NO_KEY, _FullRow(fn))


def attention_stability(fn, expected):
    rng = np.random.default_rng(RNG_SEED + 4)
    q, k, v = 60 * rng.normal(size=(2, 4)), 60 * rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    for dtype, f in ((np.float64, 1.0), (np.float32, 0.3)):
        out = as_array(output_of(fn, (q * f).astype(dtype), (k * f).astype(dtype), v.astype(dtype)))
        if out is not None and out.shape == (2, 2) and not np.all(np.isfinite(out)):
            return Finding("no max subtraction (overflow)", f"with large scores ({np.dtype(dtype).name}, "
                           "|scores| ~ 10^2-10^3) your output has inf or NaN", "exp overflows (above 709 "
                           "in float64, 88 in float32) and inf/inf is NaN: shift each row by its max "
                           "first.")
    return None


# ======================================================================== attention backward
def backward_inputs():
    """The attention_backward probes' inputs, ``{probe_id: ((dout, q, k, v[, mask]), {})}``, whose
    reference gradients the build stores (probes.py's :data:`INPUTS`)."""
    rng = np.random.default_rng(RNG_SEED + 5)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[:, 2] = False
    full = np.ones((3, 5), bool)
    full[1] = False                                         # query 1 may attend to nothing
    q4, dout4 = rng.normal(size=(2, 3, 3, 4)), rng.normal(size=(2, 3, 3, 2))
    k1, v1 = rng.normal(size=(1, 5, 4)), rng.normal(size=(1, 5, 2))
    qp, kp, vp, doutp = (rng.normal(size=(3, n, d)) for n, d in ((3, 4), (5, 4), (5, 2), (3, 2)))
    padding = (np.arange(5) < np.array([5, 0, 2])[:, None])[:, None, :]     # (3, 1, 5)
    return {"plain": ((rng.normal(size=(3, 2)), q, k, v), {}),
            "masked_key": ((rng.normal(size=(3, 2)), q, k, v, mask), {}),
            "full_row": ((rng.normal(size=(3, 2)), q, k, v, full), {}),
            "shared2": ((dout4, q4, k, v), {}),             # k, v (S, d) for q (2, 3, L, d)
            "size_one": ((doutp, qp, k1, v1), {}),          # k, v (1, S, d) for q (3, L, d)
            "padding": ((doutp, qp, kp, vp, padding), {})}  # mask (B, 1, S), one row empty


_BWD_NAMES = ("dq", "dk", "dv")


def _bwd_outputs(fn, expected, key, factors=()):
    """:class:`Outputs` of dq, dk, dv on probe input ``key`` (None unless the call returned three
    outputs and the answer is stored), and the raw output."""
    (args, kwargs), ref = backward_inputs()[key], expected.get(key)
    out = output_of(fn, *args, **kwargs)
    if ref is None or not isinstance(out, (tuple, list)) or len(out) != 3:
        return None, out
    dout, q, k, v = args[:4]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    full = (q.shape, (*lead, *k.shape[-2:]), (*lead, *v.shape[-2:]))
    return Outputs(_BWD_NAMES, out, ref, factors, full), out


def _no_scale(o, name):
    """Output ``name`` is sqrt(d_k) times the answer: the scale is missing."""
    return o.kind(name) == "scale" and "missing" in o.wrong[name][1]


_UNDO = ("Undo the forward lines last to first: out = P v gives dv = P^T dout and dP = dout v^T; P = "
         "softmax(S) gives dS; S = q k^T * scale gives dq = dS k * scale and dk = dS^T q * scale.")
_SAME_PRODUCT = "Both q and k enter the scores through the same scaled product."
#: the unbatched, unmasked input: which of dq, dk, dv are wrong, and how
_PLAIN = (
    (lambda o: o.kind("dk") == "shape" and np.shape(o.output("dk")) == (3, 4),
     Finding("dk = dS q instead of dS^T q", "dk has shape (L, d_k), expected k's shape (S, d_k)", "dS is "
             "(L, S) and dk is (S, d_k): which transpose makes the key axis come first?")),
    (lambda o: o.kind("dv") is None and _no_scale(o, "dq") and _no_scale(o, "dk"),
     Finding("forgot 1/sqrt(d_k) in dq and dk", "dq and dk are sqrt(d_k) times too large", "The forward "
             "line s = q k^T * scale multiplies by a constant: its backward multiplies by it too.")),
    (lambda o: o.kind("dv") is None and o.kind("dq") is None and _no_scale(o, "dk"),
     Finding("forgot 1/sqrt(d_k) in dk only", "dk is sqrt(d_k) times too large", _SAME_PRODUCT)),
    (lambda o: o.kind("dv") is None and o.kind("dk") is None and _no_scale(o, "dq"),
     Finding("forgot 1/sqrt(d_k) in dq only", "dq is sqrt(d_k) times too large", _SAME_PRODUCT)),
    (lambda o: o.kind("dv") is None and o.kind("dq") == o.kind("dk") == "values",
     Finding("the softmax backward is wrong", "dv is right but dq and dk are not: the step from dP to dS",
             "dS = P * (dP - rowsum(dP * P)): every weight in a row shares the normalizer. Check it alone "
             "with the softmax_backward exercise.")),
    (lambda o: o.wrong, lambda o: Finding("wrong gradients", "on an unbatched, unmasked input (L=3, S=5, "
                                          f"d_k=4, d_v=2): {o.sentence()}", _UNDO)),
)


def _into_masked_key(o):
    """dk or dv of key 2, which every query's mask forbids, is not 0."""
    gk, gv = as_array(o.output("dk")), as_array(o.output("dv"))
    return gk is not None and gv is not None and gk.shape == (5, 4) and gv.shape == (5, 2) and (
        np.abs(gk[2]).max() > 1e-12 or np.abs(gv[2]).max() > 1e-12)


#: key 2 masked for every query
_MASKED = (
    (_into_masked_key, Finding("gradient flows into a masked key", "a key that no query may see gets a "
                               "nonzero dk or dv", "A masked key has weight 0 in the forward: the "
                               "backward must use the same masked weights P (0 there).")),
    (lambda o: o.wrong, lambda o: Finding("wrong gradients with a mask", "with key 2 masked for every "
                                          f"query: {o.sentence()}", "The backward uses the forward's "
                                          "masked weights P: compute them exactly as the forward does.")),
)


def _nan_in(o):
    return [n for n in o.names if o.kind(n) == "nan"]


#: query 1 allowed no key
_FULL_ROW = (
    (_nan_in, lambda o: Finding(
        "NaN for a query with no allowed key", f"with query 1 allowed no key, {' and '.join(_nan_in(o))} "
        f"{'has' if len(_nan_in(o)) == 1 else 'have'} NaN ({o.sentence()})", "A row of all -inf scores: "
        "its max is -inf and -inf - (-inf) is NaN, which the matmuls then spread to dk and dv. The "
        "contract: such a query's weights are 0 and its gradients 0; special-case rows whose max is -inf.")),
    (lambda o: o.wrong, lambda o: Finding(
        "wrong gradients for a query with no allowed key", f"with query 1 allowed no key: {o.sentence()}",
        "Such a query's weights are all 0: its output is 0 and constant, so it sends no gradient "
        "anywhere.")),
)

#: k, v or the mask broadcast (key, what) and the rules on how the gradients then differ
_BROADCAST = ("shared2", "k (5, 4) and v (5, 2) shared by q (2, 3, 3, 4)"), (
    "size_one", "k (1, 5, 4) and v (1, 5, 2) broadcast over q (3, 3, 4)")
_PADDING = (
    (lambda o, what: o.wrong, lambda o, what: Finding(
        "wrong gradients with a mask that only broadcasts", f"with {what}: {o.sentence()}", "np.where(mask, "
        "s, -np.inf) broadcasts the mask; the gradients keep q, k and v's shapes (the mask gets none).")),
)
_SUMMED_BACK = (
    (lambda o, what: o.wrong and o.kinds == {"extra_axes"}, lambda o, what: Finding(
        "broadcast gradients not summed back", f"with {what}: {o.sentence()}", "k and v were broadcast "
        "across the batch in the forward; a broadcast copies, so its backward sums: dk must have k's "
        "shape.")),
    (lambda o, what: o.kinds & {"kept_axes", "partial_sum", "shape", "extra_axes"}, lambda o, what: Finding(
        "broadcast gradients summed back to the wrong shape", f"with {what}: {o.sentence()}", "Sum over "
        "every axis broadcasting added (all the leading axes k lacks, without keepdims) and, with "
        "keepdims, over the axes where k has size 1: dk must have exactly k's shape.")),
    (lambda o, what: o.wrong, lambda o, what: Finding(
        "broadcast gradients summed back wrongly", f"with {what}, unbatched inputs being right: "
        f"{o.sentence()}", "Sum over the broadcast axes (dk.sum(axis=...)); a reshape before the sum "
        "regroups entries of different keys and features.")),
)


def _bwd_step(key, rules, what=None, first_input=False):
    """The step of :func:`attention_backward_probe` on probe input ``key``: its rule table on how
    dq, dk, dv differ. On the first input, outputs that are not three end the probe; on a
    broadcast one (``what`` says how), a raised error is a finding."""
    def step(fn, expected, factors):
        o, out = _bwd_outputs(fn, expected, key, factors if first_input else ())
        if o is None:
            return STOP if first_input else _raised_broadcast(out, what)
        return first(rules, *((o,) if what is None else (o, what)))
    return step


def _raised_broadcast(out, what):
    if what is None or not isinstance(out, Raised):
        return None
    return Finding("does not broadcast", f"with {what} it raises {out.text}", "Use np.swapaxes(x, -1, -2) "
                   "instead of x.T and np.where(mask, s, -np.inf) for the mask, then sum each gradient "
                   "over the axes that were broadcast.")


_BWD_STEPS = (_bwd_step("plain", _PLAIN, first_input=True), _bwd_step("masked_key", _MASKED),
              _bwd_step("full_row", _FULL_ROW),
              *(_bwd_step(key, _SUMMED_BACK, what) for key, what in _BROADCAST),
              _bwd_step("padding", _PADDING, "a padding mask (3, 1, 5) for scores (3, 3, 5)"))


def attention_backward_probe(fn, expected):
    """dq, dk, dv on an unbatched, unmasked input, then with a masked key, a query with no allowed
    key, and k, v or the mask broadcast: the first input on which they are wrong, and how."""
    r = np.sqrt(backward_inputs()["plain"][0][1].shape[-1])
    factors = ((r, "sqrt(d_k): the scale is missing"), (1 / r, "1/sqrt(d_k): scaled twice"),
               (r * r, "d_k"), (-1.0, "the wrong sign"))
    return decide(_BWD_STEPS, fn, expected, factors)


# ======================================================================== tiled
def tiled_inputs():
    """The tiled probes' inputs: ``q`` (3, 4), ``k`` (10, 4), ``v`` (10, 2) float64, and ``low``, a
    float32 ``(q, k, v)`` whose scores are all near -110 (``exp`` of them is 0 in float32)."""
    rng = np.random.default_rng(RNG_SEED + 7)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    # scores q k^T / sqrt(4) = 4 * (-55) / 2 = -110 (+- a little): exp(-110) is 0 in float32
    low = (np.full((2, 4), 1.0), np.full((6, 4), -55.0) + 0.1 * rng.normal(size=(6, 4)),
           rng.normal(size=(6, 2)))
    return {"q": q, "k": k, "v": v, "low": tuple(a.astype(np.float32) for a in low)}


def _alone_and_together(fn, q, k, v, *extra):
    """The outputs (after ``extra`` arguments: the tiled block_size) of all the query rows together,
    shape (L, d_v), and of each row alone, each (d_v,): ``(together, [alone, ...])``, None unless
    every output has its shape."""
    both = as_array(output_of(fn, q, k, v, *extra))
    alone = [as_array(output_of(fn, q[i:i + 1], k, v, *extra)) for i in range(len(q))]
    if both is None or both.shape != (len(q), v.shape[-1]) or any(
            a is None or a.shape != (1, v.shape[-1]) for a in alone):
        return None
    return both, [a[0] for a in alone]


def _coupled(both, alone):
    """The rows whose output together differs from their output alone."""
    return [i for i, a in enumerate(alone) if not close_to(both[i], a, 1e-7, 1e-10)]


def _shared_shift(fn, extra, running):
    """Rows on opposite scales (row 0's scores climb to ~+900, row 1's fall to ~-900): each row
    alone against both together. A correct function gives each row the same answer either way;
    one that shifts every row by one max (the whole array's, or a running one) does not.
    ``extra``: the arguments after (q, k, v); ``running``: the max is a running one (tiled)."""
    d = 4
    q = np.array([[1.0] * d, [-1.0] * d])
    k = (np.arange(10)[:, None] * 100.0 * 2 / d) * np.ones((1, d))
    v = np.random.default_rng(RNG_SEED + 12).normal(size=(10, 2))
    rows = _alone_and_together(fn, q, k, v, *extra)
    if rows is None or not all(np.all(np.isfinite(a)) for a in rows[1]) or not _coupled(*rows):
        return None
    (both, alone), i = rows, _coupled(*rows)[0]
    near = _alone_and_together(fn, q * np.array([[0.01], [0.02]]), k, v, *extra)   # rows on one scale
    kept = "running max and running sum" if running else "max and sum"
    if near is not None and _coupled(*near):
        coupled = ("a running sum or normalizer shared by the rows" if running else
                   "a max or a sum taken over the queries too, not over the keys alone")
        return Finding("the queries are not independent", "two queries together give other outputs than "
                       f"each alone, even on one scale (so more than a shared max couples them: {coupled})",
                       "Each query "
                       f"keeps its own {kept}, of shape (..., L, 1): reduce over the keys only, axis=-1 "
                       "with keepdims=True.")
    got = "NaN" if has_nan(both[i]) else f"{both[i]}"
    what = "one running max shared by all queries" if running else "one max shared by all queries"
    return Finding(what, f"row {i} alone gives {alone[i]}, but next to a row whose scores are ~900 higher "
                   f"it gives {got}: the rows share a shift",
                   f"Each query keeps its own {'running ' * running}max (shape (..., L, 1), s.max(-1, "
                   "keepdims=True)): a max shared by the rows makes exp underflow to 0 for every key of a "
                   "row far below it.")


def tiled_shared_max(fn, expected):
    """One max shared by the rows of the tiled forward (block_size 3), see :func:`_shared_shift`."""
    return _shared_shift(fn, (3,), running=True)


def attention_shared_max(fn, expected):
    """One max shared by the rows of Eq. (1) (the whole array's max), see :func:`_shared_shift`."""
    return _shared_shift(fn, (), running=False)


def _blocks_ok(fn, expected):
    """For each block size (5 and 10 divide S = 10; 3 and 4 leave a partial last block; 16 >= S),
    whether the tiled output equals the stored one (None unless every output has its shape)."""
    x, ref = tiled_inputs(), expected.get("blocks")
    outs = {B: as_array(output_of(fn, x["q"], x["k"], x["v"], B)) for B in (5, 10, 3, 4, 16)}
    if ref is None or not all(o is not None and o.shape == ref.shape for o in outs.values()):
        return None
    return {B: close_to(o, ref, 1e-7, 1e-10) for B, o in outs.items()}


def _rescale_differs(fn):
    """On scores that rise from block to block (each block raises the running max), two blocks of
    5 give another output than one block of 10."""
    qr = np.array([[1.0] * 4, [0.5] * 4])
    kr = np.arange(10)[:, None] * np.full((1, 4), 0.75)
    vr = np.random.default_rng(RNG_SEED + 14).normal(size=(10, 2))
    one, two = as_array(output_of(fn, qr, kr, vr, 10)), as_array(output_of(fn, qr, kr, vr, 5))
    return one is not None and two is not None and one.shape == two.shape and not close_to(
        one, two, 1e-7, 1e-10)


def _tiled_weights(fn, ok):
    """The weights (values v = I, block_size 4): keys no query weighs, then the scale of q k^T."""
    x = tiled_inputs()
    w = as_array(output_of(fn, x["q"], x["k"], np.eye(10, 11), 4))      # d_v = 11 differs from S
    if w is None or w.shape != (3, 11) or has_nan(w):
        return None
    dropped = [j for j in range(10) if np.all(w[:, j] == 0)]
    if dropped:
        return Finding("keys left out of the blocks", f"with block_size 4 and S = 10, keys {dropped} get "
                       "weight 0 from every query (values v = I show the weights)", "The blocks k[..., "
                       "j:j + block_size, :] for j in range(0, S, block_size) cover every key exactly "
                       "once, the last block possibly shorter.")
    return scale_finding(measure_scale(w[:, :10], x["q"], x["k"]), 4, 11, S=10)


def _divisors_only(fn, ok):
    """Right with block sizes that divide S, wrong with a partial last block."""
    return ok[5] and ok[10] and not (ok[3] and ok[4])


#: which block sizes give the stored output
_BLOCKS = (
    (lambda fn, ok: ok[10] and ok[16] and not (ok[5] or ok[3] or ok[4]), Finding(
        "the blocks are not combined correctly", "with one block (block_size >= S) your output is right, "
        "with several it is not", "Each block's exponents must be taken against ONE running max and "
        "summed into ONE running sum and output, rescaled by exp(m_old - m_new) when the max grows; "
        "averaging per-block softmaxes is not the softmax over all keys.")),
    (lambda fn, ok: _divisors_only(fn, ok) and _rescale_differs(fn), Finding(
        "the rescale when the running max grows is wrong", "on scores that rise from block to block (each "
        "block raises the running max), two blocks of 5 give a different output from one block of 10 (on "
        "another input where the first block holds the max they agree)", "When the max grows from m_old "
        "to m_new, what was summed so far was taken against m_old: multiply the running sum AND the "
        "output accumulator by exp(m_old - m_new) (<= 1).")),
    (_divisors_only, Finding(
        "the last, partial block is mishandled", "block sizes that divide S = 10 are right, 3 and 4 (a "
        "partial last block) are not", "range(0, S, B) with slices k[..., j:j + B, :] handles a shorter "
        "last block; S // B loops drop it.")),
    (lambda fn, ok: True, _tiled_weights),
)


def _blocks_step(fn, expected):
    ok = _blocks_ok(fn, expected)
    return None if ok is None else first(_BLOCKS, fn, ok)


def _max_never_updated(fn, expected):
    """A later block scores ~800 above the first: finite with one block, not when tiled."""
    qg = np.ones((2, 4))
    kg = np.repeat(np.array([0.0, 0.0, 0.0, 400.0, 400.0, 400.0]), 4).reshape(6, 4)   # scores 0, 800
    kg = kg + 0.1 * np.random.default_rng(RNG_SEED + 10).normal(size=(6, 4))
    vg = np.arange(12.0).reshape(6, 2)
    one, tiled = as_array(output_of(fn, qg, kg, vg, 6)), as_array(output_of(fn, qg, kg, vg, 3))
    if one is None or tiled is None or not np.all(np.isfinite(one)) or np.all(np.isfinite(tiled)):
        return None
    return Finding("running max never updated (max of the first block only)", "with one block your output "
                   "is finite, but when a later block scores ~800 above the first, the tiled output "
                   "overflows", "A later block can hold larger scores than the first: update m = max(m, "
                   "block max) at every block and rescale what was summed so far.")


def _max_started_at_zero(fn, expected):
    """Every score of a row about -110 (float32): NaN or 0, where the same scores of +110 are finite."""
    low = tiled_inputs()["low"]
    out = as_array(output_of(fn, *low, 2))
    if out is None or out.shape != (2, 2) or not (has_nan(out) or np.abs(out).max() == 0):
        return None
    hi = as_array(output_of(fn, low[0], -low[1], low[2], 2))
    if hi is None or not np.all(np.isfinite(hi)):
        return None
    return Finding("running max started at 0 instead of -inf", "when every score of a row is about -110 "
                   "(float32) your output is NaN or 0: exp(s - 0) underflows to 0 and the row divides 0 by "
                   "0", "Start the running max at -inf (np.full(..., -np.inf)) so the first block sets it "
                   "to that block's own max.")


def tiled_probe(fn, expected):
    """Block sizes that divide S, leave a partial block or cover S at once; the weights; a later
    block far above the first; a row whose every score is far below 0."""
    return decide((_blocks_step, _max_never_updated, _max_started_at_zero), fn, expected)
