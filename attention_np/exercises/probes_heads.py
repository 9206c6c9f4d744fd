"""Behaviour probes of the heads, multi-head attention and the decode step (see probes.py)."""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised
from .probes_attention import short_mask_finding
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
    moved,
    named_scale,
    output_of,
    outputs_of,
)

# ======================================================================== heads

def _fixed_axes(raw, one, shape, words, hint):
    """The unbatched call raised while the same input with one leading axis of size 1 gives
    ``shape``: the function works only for a fixed number of axes."""
    return isinstance(raw, Raised) and one is not None and one.shape == shape and Finding(
        "works only for a fixed number of axes", f"{words} raises {raw.text}", hint) or None


def _batch_axes(fn, x, answer, args, words, hint):
    """Right on ``x``: a batch of two copies, the second offset by ``x.size``, must give the answer
    and the answer offset (the measure "right unbatched, and with batch axes?")."""
    b = output_of(fn, np.stack([x, x + x.size]), *args)
    want = np.stack([answer, answer + x.size])
    if close_to(as_array(b), want):
        return None
    got = b.text if isinstance(b, Raised) else f"shape {np.shape(b)}"
    return Finding("does not work with batch axes", f"{words} gives {got}" + (
        " with the wrong values" if np.shape(b) == want.shape else ""), hint)


def _same_values_other_shape(out, want):
    """The answer's values in the answer's memory order, under another shape (axes of size 1 added or
    dropped, leading axes folded)."""
    return want is not None and out.shape != want.shape and out.size == want.size and close_to(
        out.ravel(), want.ravel())


def _axes_finding(out, shape, want, given, expected, spelled):
    return Finding("leading axes added, dropped or folded", f"{given} = {shape} gives shape {out.shape} with "
                   f"the right values in the right order, expected {expected} = {want}", "Keep x's leading "
                   f"axes as they are, whatever their number (none included): reshape({spelled}); "
                   "reshape(-1, ...) folds them into one and adds one when there are none, np.squeeze drops "
                   "every axis of size 1.")


_L, _H, _D = 4, 2, 3
_SPLIT_X = np.arange(_L * _H * _D, dtype=float).reshape(_L, _H * _D)
_NAMES = {_H: "h", _L: "L", _D: "d"}
#: split_heads on (L, h*d) = (4, 6), h = 2: the shape it returns, then which known wrong answer it is
_SPLIT = (
    (lambda out, fn, e: out.shape == (_L, _H, _D), Finding(
        "head axis not moved", "the output has shape (L, h, d), expected (h, L, d)", "After the reshape to "
        "(..., L, h, d), swap the two axes before the last.")),
    (lambda out, fn, e: out.shape == (_H, _L // _H, _H * _D) and close_to(out, _SPLIT_X.reshape(out.shape)),
     lambda out, fn, e: Finding(
         "split along the positions", f"(L, h*d) = {_SPLIT_X.shape} gives {out.shape}: head i holds a block "
         "of positions with all their features", "The heads split the FEATURE axis (the last): every head "
         "sees every position, with d = h*d / h of its features.")),
    (lambda out, fn, e: out.shape != (_H, _L, _D) and sorted(out.shape) == sorted((_H, _L, _D)),
     lambda out, fn, e: Finding("axes in the wrong order", f"(L, h*d) = {_SPLIT_X.shape} with h = {_H} gives "
                            f"shape {out.shape} = ({', '.join(_NAMES[n] for n in out.shape)}), expected (h, "
                            f"L, d) = {(_H, _L, _D)}", "After the reshape to (..., L, h, d), swap the head "
                            "and position axes: swapaxes(-3, -2), not the last axis.")),
    (lambda out, fn, e: _same_values_other_shape(out, e.get("split")), lambda out, fn, e: _axes_finding(
        out, _SPLIT_X.shape, (_H, _L, _D), "(L, h*d)", "(h, L, d)", "*x.shape[:-2], L, h, d")),
    (lambda out, fn, e: out.shape != (_H, _L, _D), STOP),
    (lambda out, fn, e: close_to(out, np.swapaxes(np.swapaxes(_SPLIT_X.reshape(_L, _D, _H), -1, -2), -2, -3)),
     Finding("head split transposed (heads interleaved)", "head 0 gets columns 0, h, 2h, ... instead of a "
             "contiguous block", "Head i should own a CONTIGUOUS block of d_k columns: reshape the last axis "
             "as (h, d_k), not (d_k, h).")),
    (lambda out, fn, e: close_to(out, _SPLIT_X.reshape(_H, _L, _D)), Finding(
        "reshape without the transpose", "a plain reshape to (h, L, d) mixes positions into heads", "A "
        "reshape keeps the memory order: split the feature axis first, (L, h, d), then move the head "
        "axis.")),
    (lambda out, fn, e: close_to(out, e.get("split")), lambda out, fn, e: _batch_axes(
        fn, _SPLIT_X, e["split"], (_H,), "(L, h*d) works but a batch (2, L, h*d)", "Count axes from the "
        "end (swapaxes(-2, -3), reshape(*x.shape[:-1], h, d)) so any leading axes pass through.")),
)


def split_probe(fn, expected):
    """split_heads on (L, h*d) (and one batch axis of size 1 when that raises): its shape, which
    known wrong answer it is, then a batch."""
    raw = output_of(fn, _SPLIT_X.copy(), _H)
    out = as_array(raw)
    if out is None:
        return _fixed_axes(
            raw, as_array(output_of(fn, _SPLIT_X[None], _H)), (1, _H, _L, _D), "a batch (1, L, h*d) works "
            "but (L, h*d)", "Count axes from the end (reshape(*x.shape[:-1], h, d), swapaxes(-2, -3)) so "
            "the function works with any number of leading axes, none included.") or _square_only(fn, raw)
    return judge(_SPLIT, out, fn, expected)


def _square_only(fn, raw):
    """(L, h*d) = (4, 6) raised, while (6, 6), where L = h*d, gives the shape (h, L, d): the head
    width is taken from the positions' axis."""
    square = as_array(output_of(fn, np.arange(36.0).reshape(6, 6), _H))
    return isinstance(raw, Raised) and square is not None and square.shape == (_H, 6, 3) and Finding(
        "head width taken from the wrong axis", f"(L, h*d) = (6, 6) works but (L, h*d) = {_SPLIT_X.shape} "
        f"raises {raw.text}: the function works only when L = h*d", "d = x.shape[-1] // num_heads: "
        "the head width comes from the LAST axis (the features), not from L = x.shape[-2].") or None


_MERGE_X = np.arange(_H * _L * _D, dtype=float).reshape(_H, _L, _D)


def _mixed_positions(out, fn, e):
    """The rows of a merged output that hold values of other positions (every value being there)."""
    if close_to(out, e.get("merge")) or not np.array_equal(np.sort(out.ravel()), _MERGE_X.ravel()):
        return []
    positions = (out.astype(int) // _D) % _L              # x's values encode (head, position, feature)
    return [i for i in range(_L) if set(positions[i].tolist()) != {i}]


def _mixed_finding(out, fn, e):
    i = _mixed_positions(out, fn, e)[0]
    held = sorted(set(((out.astype(int) // _D) % _L)[i].tolist()))
    return Finding("positions mixed in the merge", f"every value is there, but row {i} of the output holds "
                   f"values of positions {held} (it must hold position {i}'s features of every head)", "A "
                   "reshape keeps the memory order: first move the head axis next to the feature axis, "
                   "swapaxes(-3, -2) giving (..., L, h, d), then merge the last two.")


#: merge_heads on (h, L, d) = (2, 4, 3): its shape, which known wrong answer it is, then a batch
_MERGE = (
    (lambda out, fn, e: out.shape in ((_H * _L, _D), (_H, _L * _D)), lambda out, fn, e: Finding(
        "merge to the wrong shape", f"(h, L, d) = {_MERGE_X.shape} gives {out.shape}, expected (L, h*d) = "
        f"{(_L, _H * _D)}", "Move the head axis next to the feature axis, then merge the two.")),
    (lambda out, fn, e: _same_values_other_shape(out, e.get("merge")), lambda out, fn, e: _axes_finding(
        out, _MERGE_X.shape, (_L, _H * _D), "(h, L, d)", "(L, h*d)", "*x.shape[:-3], L, h * d")),
    (lambda out, fn, e: out.shape != (_L, _H * _D), STOP),
    (lambda out, fn, e: close_to(out, np.moveaxis(_MERGE_X, 0, -1).reshape(_L, _H * _D)), Finding(
        "merge transposed (heads interleaved)", "the merged features alternate between heads", "Concat puts "
        "head 1's d_v features first, then head 2's: a block per head.")),
    (lambda out, fn, e: close_to(out, _MERGE_X.reshape(_L, _H * _D)), Finding(
        "reshape without the transpose", "a plain reshape mixes positions and heads", "Move the head axis "
        "next to the feature axis before the reshape.")),
    (_mixed_positions, _mixed_finding),
    (lambda out, fn, e: close_to(out, e.get("merge")), lambda out, fn, e: _batch_axes(
        fn, _MERGE_X, e["merge"], (), "(h, L, d) works but a batch (2, h, L, d)", "Count axes from the "
        "end (swapaxes(-2, -3)) so any leading axes pass through; list(x) and x[i] split the FIRST axis, "
        "which is the batch.")),
)


def merge_probe(fn, expected):
    """merge_heads on (h, L, d) (and one batch axis of size 1 when that raises): its shape, which
    known wrong answer it is, then a batch."""
    raw = output_of(fn, _MERGE_X.copy())
    out = as_array(raw)
    if out is None:
        return _fixed_axes(
            raw, as_array(output_of(fn, _MERGE_X[None])), (1, _L, _H * _D), "a batch (1, h, L, d) works but "
            "(h, L, d)", "Count axes from the end (swapaxes(-3, -2), reshape(*x.shape[:-3], L, h * d)) so "
            "the function works with any number of leading axes, none included.")
    return judge(_MERGE, out, fn, expected)


# ======================================================================== multi-head
def mha_inputs():
    """The multi-head probes' inputs ``(x, y, params, h)``: ``x`` (2, 3, 4), ``y`` (2, 5, 4), the
    weights and biases of ``d_model = 4``, and ``h = 2`` heads."""
    rng = np.random.default_rng(RNG_SEED + 11)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d)), p, h


_DELTA = np.array([0.5, -1.0, 2.0, 0.25])


def _moved_output(fn, name):
    """The output with parameter ``name`` moved by :data:`_DELTA` (the measure "move one parameter")."""
    x, y, p, h = mha_inputs()
    return as_array(output_of(fn, *moved((x, y, y, p, h), 3, name, _DELTA)))


def _uniform_step(fn, expected, base):
    """W_q = W_k = 0 (every score equal), W_v = W_o = I, zero biases: the output must be the
    mean of the values; when it is not, what it is instead (or nothing to say: the probe ends)."""
    x, y, p, h = mha_inputs()
    d = x.shape[-1]
    plain = {**{f"W_{n}": np.zeros((d, d)) for n in "qk"}, "W_v": np.eye(d), "W_o": np.eye(d),
             **{f"b_{n}": np.zeros(d) for n in "qkvo"}}
    mean = as_array(output_of(fn, x, y, y, plain, h))
    want = np.broadcast_to(y.mean(-2, keepdims=True), x.shape)
    if mean is None or mean.shape != base.shape or close_to(mean, want):
        return None
    return _uniform_finding(mean, want) or STOP


def _bias_step(name, moves_by, what):
    """Moving bias ``name`` by a vector must move the output by ``moves_by(params, vector)``."""
    def step(fn, expected, base):
        out, want = _moved_output(fn, name), moves_by(mha_inputs()[2], _DELTA)
        if out is None or out.shape != base.shape or close_to(out - base, np.broadcast_to(
                want, base.shape), 1e-6, 1e-9):
            return None
        ignored = close_to(out, base)
        return Finding("projection biases forgotten" if ignored else f"{name} used wrongly", f"moving {name} "
                       f"by a vector moves your output by {'nothing' if ignored else 'something else'} (it "
                       f"must move by {what})", "params holds b_q, b_k, b_v, b_o: each projection is x W "
                       "+ b.")
    return step


def _b_q_step(fn, expected, base):
    moved_q = _moved_output(fn, "b_q")
    return moved_q is not None and close_to(moved_q, base) and Finding(
        "projection biases forgotten", "moving b_q by a vector changes nothing in your output (it must: b_q "
        "shifts every query, so every score)", "params holds b_q, b_k, b_v, b_o: each projection is x W + "
        "b.") or None


def _one_head_step(fn, expected, base):
    one = expected.get("one_head")
    return one is not None and close_to(base, one) and Finding(
        "a single head (no split)", f"your output with num_heads = {mha_inputs()[3]} is the output of one "
        "head", "With one head of width h*d_k the softmax averages over all features together; split into "
        "num_heads heads, each with its own softmax.") or None


_MHA_STEPS = (_uniform_step, _bias_step("b_o", lambda p, delta: delta, "that vector"),
              _bias_step("b_v", lambda p, delta: delta @ p["W_o"], "that vector times W_o"),
              lambda fn, expected, base: _mha_scale(fn), _b_q_step, _one_head_step)


def mha_probe(fn, expected):
    """Equal scores (the mean of the values), each bias moved, the scale of each head, one head."""
    x, y, p, h = mha_inputs()
    base = as_array(output_of(fn, x, y, y, p, h))
    if base is None or base.shape != x.shape or has_nan(base):
        return None
    return decide(_MHA_STEPS, fn, expected, base)


def _uniform_finding(got, want):
    """What an output that is not the mean of the values under equal scores does, measured: the
    mean times a constant (weights that do not sum to 1), or not even that (the heads mix
    positions or features)."""
    setup = "with W_q = W_k = 0 (every score equal), W_v = W_o = I and zero biases"
    c = float((got * want).sum() / (want * want).sum())
    if abs(c) < 1e-6:                   # 0: the values never reached the output; nothing about weights
        return None
    if close_to(got, c * want):
        return Finding("the attention weights do not sum to 1", f"{setup}, your output is {c:.4g} times "
                       "the mean of the values", "Each query's weights over the keys are a softmax over "
                       "the LAST axis of the scores: exp(s - max) divided by its sum over that axis.")
    return Finding("heads split or merged wrongly", f"{setup}, your output is not the mean of the "
                   "values at every query (nor a multiple of it): the heads mix positions or features",
                   "split_heads: reshape (B, L, h*d) to (B, L, h, d), THEN swap to (B, h, L, d); "
                   "merge_heads undoes it in reverse.")


def mha_mask(fn, expected):
    """An (L, S) mask against the same mask spelled out to (B, 1, L, S); then a (B, 1, L, S) mask
    against the same mask without its head axis, (B, L, S), which only a function that adds a head
    axis to every mask handles."""
    x, y, p, h = mha_inputs()
    return short_mask_finding(fn, (x, y, y, p, h), f"query (2, 3, d_model), key and value (2, 5, "
                              f"d_model) and {h} heads", extra=(x.shape[0], 1)) or _head_axis_added(fn)


def _head_axis_added(fn):
    x, y, p, h = mha_inputs()
    B, L, S = x.shape[0], x.shape[1], y.shape[1]
    causal = np.arange(S)[None, :] <= np.arange(L)[:, None] + (S - L)
    with_axis = np.broadcast_to(causal, (B, 1, L, S)).copy()
    got, without = output_of(fn, x, y, y, p, h, with_axis), as_array(output_of(fn, x, y, y, p, h,
                                                                             with_axis[:, 0]))
    a = as_array(got)
    if without is None or without.shape != x.shape or has_nan(without) or (
            a is not None and a.shape == x.shape and not has_nan(a)):
        return None
    how = f"raises {got.text}" if isinstance(got, Raised) else f"gives shape {np.shape(got)}"
    return Finding("a head axis added to a mask that has one", f"a (B, 1, L, S) = {with_axis.shape} mask, "
                   f"as the contract gives it, {how}; the same mask without its head axis, {(B, L, S)}, "
                   "works", "The mask already broadcasts to the scores (B, h, L, S), as (L, S), (B, 1, L, "
                   "S) or (B, 1, 1, S): use it as it is, np.where(mask, s, -np.inf); mask[:, None] moves "
                   "its axes onto the wrong ones of the scores.")


def _mha_scale(fn):
    """The scale the submission applies to each head's q k^T, measured where every size differs from
    d_k = 3 (d_model / h = 8, d_model = 16, h * d_k = 6, d_k^2 = 9, L = 4, S = d_v = 5, h * d_v = 10,
    B = 2): W_v and W_o identities (six features of d_model dropped) and one-hot values make the
    output each head's attention weights."""
    rng = np.random.default_rng(RNG_SEED + 15)
    B, L, S, dm, h, dk = 2, 4, 5, 16, 2, 3
    dv = S
    p = {"W_q": rng.normal(size=(dm, h * dk)) / 2, "W_k": rng.normal(size=(dm, h * dk)) / 2,
         "W_v": np.eye(dm, h * dv), "W_o": np.eye(h * dv, dm), "b_q": np.zeros(h * dk),
         "b_k": np.zeros(h * dk), "b_v": np.zeros(h * dv), "b_o": np.zeros(dm)}
    query, key = rng.normal(size=(B, L, dm)), rng.normal(size=(B, S, dm))
    value = np.zeros((B, S, dm))
    for i in range(h):
        value[:, :, i * dv:i * dv + S] = np.eye(S)          # head i's value of key j: e_j
    out = as_array(output_of(fn, query, key, value, p, h))
    if out is None or out.shape != (B, L, dm) or has_nan(out):
        return None
    q, k = query @ p["W_q"], key @ p["W_k"]
    heads = [(b, slice(i * dv, i * dv + S), slice(i * dk, (i + 1) * dk)) for b in range(B) for i in range(h)]
    cs = [measure_scale(out[b, :, w], q[b, :, c], k[b, :, c]) for b, w, c in heads]   # one for all, or none
    if any(c is None for c in cs) or not np.allclose(cs, cs[0], rtol=1e-6):
        return None
    return head_scale_finding(cs[0], dm, h, dk)


def head_scale_finding(c, dm, h, dk):
    """The finding for ``c``, the scale measured on each head's q k^T (None when it is
    1/sqrt(d_k)), on an input where d_k, d_model / h, d_model and h * d_k all differ."""
    want = 1 / np.sqrt(dk)
    if abs(c - want) <= 1e-6 * want:
        return None
    if abs(c) <= 1e-9:
        return Finding("every key gets the same weight (the scores have no effect)", f"with d_model = {dm}, "
                       f"num_heads = {h} and d_k = {dk}, each head's weights are uniform over the keys, "
                       "whatever the scores", "The weights are softmax(q k^T / sqrt(d_k)) over the keys: a "
                       "scale of 0, or a max taken over the wrong axis (each score minus itself), flattens "
                       "them; the row max is s.max(axis=-1, keepdims=True).")
    hint = "d_k is one head's width: W_q.shape[1] // num_heads, which need not be d_model / num_heads."
    name, hint = named_scale(c, (
        (1.0, "no 1/sqrt(d_k)", hint),
        (1 / dk, "divided by d_k instead of sqrt(d_k)", "q . k sums d_k products of unit variance: its "
         "variance is d_k, and dividing by sqrt(d_k) brings it back to 1."),
        (np.sqrt(dk), "multiplied by sqrt(d_k) instead of dividing", "Eq. (1) divides the scores by "
         "sqrt(d_k)."),
        (1 / np.sqrt(dm), "scaled by sqrt(d_model) instead of sqrt(d_k)", hint),
        (1 / np.sqrt(dm / h), "d_k taken as d_model / num_heads", hint),
        (1 / np.sqrt(h * dk), "scaled by sqrt(h * d_k) (all heads' width) instead of one head's d_k", hint)),
        ("wrong scale", hint))
    return Finding(name, f"with d_model = {dm}, num_heads = {h} and W_q of width h * d_k = {h * dk}, "
                   f"each head's scores are multiplied by {c:.4g}; Eq. (1) uses 1/sqrt(d_k) = "
                   f"{want:.4g} (d_k = W_q.shape[1] // num_heads = {dk})", hint)


def _grads_of(fn, key):
    """The submission's (dquery, dkey, dvalue, grads) on probe input ``key`` (None unless it
    returned four outputs)."""
    return outputs_of(fn, 4, *mha_backward_inputs()[key][0])


def _summed(grads, ref):
    """Each of dquery, dkey, dvalue is the sum of the three answers (query = key = value)."""
    total = ref[0] + ref[1] + ref[2]
    return all(close_to(as_array(x), total) for x in grads[:3])


#: self-attention (query = key = value): the fourth output and the three input gradients
_SELF = (
    (lambda out, ref: not isinstance(out[3], dict), lambda out, ref: Finding(
        "grads is not a dict", f"the fourth output is a {type(out[3]).__name__}", "Return (dquery, dkey, "
        "dvalue, grads) with grads a dict with the keys of params (W_q, b_q, ..., W_o, b_o).")),
    (lambda out, ref: set(ref[3]) - set(out[3]), lambda out, ref: Finding(
        "grads has missing keys", f"grads has no {sorted(set(ref[3]) - set(out[3]))}", "One gradient per "
        "parameter, with the same keys as params.")),
    (_summed, Finding("the three input gradients summed", "with query = key = value you return the sum of "
                      "the three gradients for each of them", "The contract: dquery, dkey and dvalue are "
                      "the gradients through each argument alone, even when they are the same array (the "
                      "caller adds them).")),
)


def _self_step(fn, expected):
    out, ref = _grads_of(fn, "self"), expected.get("self")
    return STOP if out is None or ref is None else first(_SELF, out, ref)


def _every_gradient(fn, expected, key):
    """:class:`Outputs` of every gradient (dquery, dkey, dvalue, then dW_k, db_k, ... in params'
    sorted order) on probe input ``key`` (None unless four outputs with a dict of grads)."""
    out, ref = _grads_of(fn, key), expected.get(key)
    if out is None or ref is None or not isinstance(out[3], dict):
        return None
    keys = sorted(ref[3])
    r, B = np.sqrt(6.0), 3                                   # d_k = 6, batch 3 on this input
    factors = ((r, "sqrt(d_k)"), (1 / r, "1/sqrt(d_k)"), (1 / B, "1/B, a mean over the batch"),
               (float(B), "B"))
    return Outputs(["dquery", "dkey", "dvalue"] + [f"d{n}" for n in keys],
                   out[:3] + [out[3].get(n) for n in keys], list(ref[:3]) + [ref[3][n] for n in keys],
                   factors)


def _one_head_right(fn, expected):
    """Every gradient is right with num_heads = 1 (the same input as one head of d_k = 12)."""
    o = _every_gradient(fn, expected, "one_head")
    return o is not None and not o.wrong


_WHERE = "on cross-attention with every size distinct (B=3, L=4, S=7, d_model=5, h=2, d_k=6)"
_INPUT_OF = {"dquery": "q", "dkey": "k", "dvalue": "v"}
_BIAS_SUM = "A bias is added to every position of every sequence"
#: cross-attention with every size distinct: which gradients are wrong, and how
_DISTINCT = (
    (lambda o, fn, e: set(o.wrong) == {"db_k"} and as_array(o.output("db_k")) is not None
     and o.kind("db_k") != "zero", lambda o, fn, e: Finding(
        "nonzero gradient for b_k", f"your db_k is not 0 ({_WHERE}: {o.sentence()})", "Adding b_k adds "
        "q_i . b_k to every score of row i: a constant per row, which softmax ignores. What does that "
        "make dL/db_k?")),
    (lambda o, fn, e: o.kinds == {"scale"} and o.all_say("(sqrt(d_k))")
     and not {"dvalue", "dW_v", "db_v", "dW_o", "db_o"} & set(o.wrong), lambda o, fn, e: Finding(
        "forgot 1/sqrt(d_k) in the attention backward", f"{_WHERE}: {o.sentence()}", "The scores are q "
        "k^T * 1/sqrt(d_k): the backward multiplies dq and dk by the same constant, and everything "
        "computed from them (dquery, dkey, dW_q, dW_k, db_q) inherits it.")),
    (lambda o, fn, e: o.only("db_") and o.kinds == {"scale"} and o.all_say("a mean over the batch"),
     lambda o, fn, e: Finding(
        "bias gradients averaged over the batch", f"{_WHERE}: {o.sentence()}", f"{_BIAS_SUM}, and the "
        "loss sums over them: its gradient SUMS over the batch and the positions (no mean).")),
    (lambda o, fn, e: o.only("dW_") and o.kinds == {"extra_axes"}, lambda o, fn, e: Finding(
        "weight gradients not summed over the batch", f"{_WHERE}: {o.sentence()}", "Every sequence of "
        "the batch uses the same W: its gradient sums the per-sequence x^T dy over the batch, giving W's "
        "shape.")),
    (lambda o, fn, e: set(o.wrong) <= set(_INPUT_OF), lambda o, fn, e: Finding(
        "input gradients wrong after their projection", f"{_WHERE}: {o.sentence()}: dW and db of the same "
        "projection are right, so the gradient of x W + b is right and only its last step, back to the "
        "input, is wrong", "For y = x W + b, dx = dy W^T with the SAME projection's W (W_q for the "
        "query, W_k for the key, W_v for the value).")),
    (lambda o, fn, e: o.only("db_") and any(len(np.shape(o.output(n))) == 2 and np.shape(o.output(n))[0]
                                            == 3 for n in o.wrong), lambda o, fn, e: Finding(
        "bias gradient not summed over the batch", f"{_WHERE}: {o.sentence()}", f"{_BIAS_SUM}: its "
        "gradient sums over all of them (batch and positions).")),
    (lambda o, fn, e: o.only("db_") and o.kinds == {"scale"}, lambda o, fn, e: Finding(
        f"{', '.join(sorted(o.wrong))} off by a constant factor (a mean instead of a sum?)",
        f"{_WHERE}: {o.sentence()}", f"{_BIAS_SUM}: its gradient is the SUM of the gradient of x W + b "
        "over the batch and the positions, not a mean.")),
    (lambda o, fn, e: o.only("db_"), lambda o, fn, e: Finding(
        "bias gradient summed over the wrong axes", f"{_WHERE}: {o.sentence()}", f"{_BIAS_SUM}: its "
        "gradient sums the gradient of x W + b over the batch and the positions, keeping the feature "
        "axis (heads and their features, in the merged order).")),
    (lambda o, fn, e: o.only("dW_") and o.kinds == {"transposed"}, lambda o, fn, e: Finding(
        "weight gradients transposed" if {"dW_q", "dW_k", "dW_v", "dW_o"} <= set(o.wrong) else
        f"{', '.join(sorted(o.wrong))} transposed", f"{_WHERE}: {o.sentence()}", "For y = x W with W of "
        "shape (d_in, d_out), dW must have W's shape: which of x^T dy and dy^T x is (d_in, d_out)?")),
    (lambda o, fn, e: o.only("dW_") and o.kinds == {"permuted"}, lambda o, fn, e: Finding(
        "heads in the wrong order", f"{_WHERE}: {o.sentence()}", "Head i owns the columns [i*d_k, "
        "(i+1)*d_k) of W_q, W_k, W_v and the rows of W_o: merge the head gradients back in the order "
        "split_heads took them.")),
    (lambda o, fn, e: _backward_scale(fn) is not None, lambda o, fn, e: _backward_scale(fn)),
    (lambda o, fn, e: _one_head_right(fn, e), lambda o, fn, e: Finding(
        "head gradients split or merged wrongly", f"with num_heads = 1 every gradient is right; with 2 "
        f"heads, {_WHERE}: {o.sentence()}", "The backward of merge_heads is split_heads and the backward "
        "of split_heads is merge_heads: reshape AND swap the head and position axes, in the order the "
        "forward used.")),
    (lambda o, fn, e: True, lambda o, fn, e: Finding(
        "wrong gradients", f"{_WHERE}: {o.sentence()}", "Undo mha_forward's lines last to first: the "
        "output projection, the merge (its backward is a split), attention, the split (its backward is a "
        "merge), the three input projections; compare each gradient with central differences to find "
        "the first wrong line.")),
)


def _backward_scale(fn):
    """The scale the backward's forward applies to each head's q k^T, read off dvalue: W_v and W_o
    identities (two features of d_model dropped), zero biases and dout one-hot per query in each
    head (query i's gradient is e_i), so head h's block of dvalue is P_h^T. Measured where every
    size differs from d_k = 6 (d_model / h = 5, d_model = 10, h * d_k = 12, h * d_v = 8, d_v = 4,
    L = 3, S = 7, B = 2); the finding of :func:`head_scale_finding`, None when the weights are not a
    softmax."""
    rng = np.random.default_rng(RNG_SEED + 18)
    B, L, S, dm, h, dk, dv = 2, 3, 7, 10, 2, 6, 4
    p = {"W_q": rng.normal(size=(dm, h * dk)) / 2, "W_k": rng.normal(size=(dm, h * dk)) / 2,
         "W_v": np.eye(dm, h * dv), "W_o": np.eye(h * dv, dm), "b_q": np.zeros(h * dk),
         "b_k": np.zeros(h * dk), "b_v": np.zeros(h * dv), "b_o": np.zeros(dm)}
    query, key, value = (rng.normal(size=(B, n, dm)) for n in (L, S, S))
    dout = np.zeros((B, L, dm))
    for i in range(h):
        dout[:, :, i * dv:i * dv + L] = np.eye(L)           # head i's gradient at query j: e_j
    got = outputs_of(fn, 4, dout, query, key, value, p, h)
    dval = as_array(got[2]) if got else None
    if dval is None or dval.shape != (B, S, dm) or has_nan(dval):
        return None
    q, k = query @ p["W_q"], key @ p["W_k"]
    cs = [measure_scale(dval[b, :, i * dv:i * dv + L].T, q[b, :, i * dk:(i + 1) * dk],
                        k[b, :, i * dk:(i + 1) * dk]) for b in range(B) for i in range(h)]
    if any(c is None for c in cs) or not np.allclose(cs, cs[0], rtol=1e-6):
        return None
    return head_scale_finding(cs[0], dm, h, dk)


def _distinct_step(fn, expected):
    o = _every_gradient(fn, expected, "distinct")
    return None if o is None or not o.wrong else first(_DISTINCT, o, fn, expected)


def mha_backward_probe(fn, expected):
    """Self-attention (the outputs' structure, the three input gradients kept apart), then
    cross-attention with every size distinct: which gradients are wrong, and how."""
    return decide((_self_step, _distinct_step), fn, expected)


# ======================================================================== decode step
class _Decoded:
    """One decode step on the probe's input, measured: ``out`` its three outputs (None unless
    three), ``kn`` and ``vn`` the returned caches as arrays, ``ref`` the stored answer."""

    def __init__(self, fn, expected):
        self.fn, self.args, self.ref = fn, decode_inputs()["step"][0], expected.get("step")
        self.out = outputs_of(fn, 3, *self.args)
        self.kn, self.vn = (as_array(self.out[1]), as_array(self.out[2])) if self.out else (None, None)

    def shaped(self):
        """The returned k_cache has the answer's shape."""
        return self.kn is not None and self.kn.shape == self.ref[1].shape

    def new_wrong(self):
        """Which of the appended key and value (of the right cache shape) differ from the answer."""
        return [n for n, got, want in (("key", self.kn, self.ref[1]), ("value", self.vn, self.ref[2]))
                if got is not None and got.shape == want.shape and not close_to(got[..., -1:, :],
                                                                               want[..., -1:, :])]

    def bias_ignored(self):
        """Moving b_k changes nothing in the returned k_cache."""
        d = self.args[0].shape[-1]
        shifted = outputs_of(self.fn, 3, *moved(self.args, 3, "b_k", np.arange(1.0, d + 1)))
        ks = as_array(shifted[1]) if shifted else None
        return ks is not None and self.kn is not None and close_to(ks, self.kn)


def _new_entry_finding(c):
    ignored = c.bias_ignored()
    note = " (moving b_k changes nothing in the returned cache)" if ignored else ""
    return Finding("projection biases forgotten" if ignored else "the new key or value is wrong",
                   f"the cached positions are kept but the appended {' and '.join(c.new_wrong())} differ "
                   f"from x W + b split into heads{note}", "The new position's key is split_heads(x W_k + "
                   "b_k) and its value split_heads(x W_v + b_v), exactly as mha_forward projects them.")


#: the returned caches: the cached positions kept in order, one appended, and what is appended
_CACHE = (
    (lambda c: c.shaped() and close_to(c.kn[..., 1:, :], c.args[1]) and close_to(
        c.kn[..., :1, :], c.ref[1][..., -1:, :]), Finding(
        "new key and value prepended to the cache", "the new key is first in the returned cache", "The "
        "cache must stay in position order: append at the end.")),
    (lambda c: c.shaped() and not close_to(c.kn[..., :-1, :], c.args[1]), Finding(
        "the cached keys changed", "the first t entries of the returned k_cache are not the cache you were "
        "given", "Append the new position: np.concatenate([k_cache, k_new], axis=-2).")),
    (lambda c: c.kn is not None and not c.shaped(), lambda c: Finding(
        "cache of the wrong shape", f"the returned k_cache has shape {c.kn.shape}, expected "
        f"{c.ref[1].shape} (t + 1 positions)", "Append exactly one position along the time axis (-2).")),
    (lambda c: c.new_wrong(), _new_entry_finding),
)


def _empty_cache(fn, expected):
    """The first step (an empty cache) raises, a later one does not."""
    x, kc, vc, p, h = args = decode_inputs()["step"][0]
    empty, full = output_of(fn, x, kc[..., :0, :], vc[..., :0, :], p, h), output_of(fn, *args)
    return isinstance(empty, Raised) and not isinstance(full, Raised) and Finding(
        "attended before appending the new key and value", f"with an empty cache (the first step) your "
        f"function raises {empty.text}", "Position t may attend to itself (j <= t): append its key and "
        "value first; then even the first step has one key.") or None


def _cache_step(fn, expected):
    c = _Decoded(fn, expected)
    return first(_CACHE, c) if c.out and c.ref is not None else None


def _decode_weights(fn, expected):
    """The weights, read off: one head, the new value 0 (W_v = 0), cached values one-hot, W_o = I;
    they must sum to at most 1 over the cached keys (the new key takes the rest)."""
    rng = np.random.default_rng(RNG_SEED + 16)
    d, t = 4, 3
    pw = {"W_q": rng.normal(size=(d, d)), "W_k": rng.normal(size=(d, d)), "W_v": np.zeros((d, d)),
          "W_o": np.eye(d), **{f"b_{n}": np.zeros(d) for n in "qkvo"}}
    vc1 = np.eye(t, d)[None, None]                          # (1, 1, t, d): cached value j = e_j
    got = outputs_of(fn, 3, rng.normal(size=(1, 1, d)), rng.normal(size=(1, 1, t, d)), vc1, pw, 1)
    o = as_array(got[0]) if got else None
    if o is None or o.shape != (1, 1, d) or has_nan(o) or np.abs(o[0, 0, t:]).max() >= 1e-9:
        return None
    w = o[0, 0, :t]                 # the weights of the t cached keys (the rest is 0: our values)
    if w.sum() <= 1 + 1e-9 and not np.any(w < -1e-12):
        return None
    return Finding("weights do not sum to 1 over the keys", f"with values that show the weights, the query "
                   f"gives the {t} cached keys weights {np.round(w, 4).tolist()} (sum {w.sum():.4g}); with "
                   "its own key they must sum to 1", "The softmax runs over the keys: the LAST axis of the "
                   "(B, h, 1, t + 1) scores, not the query axis (of size 1).")


def _decode_scale(fn, expected):
    """The scale of each head's scores, measured where every size differs from d_k = 6 (d_model / h
    = 5, d_model = 10, h * d_k = 12, S = t + 1 = 4, d_v = 3, B = 2, L = 1): the new value 0 (W_v = 0),
    the cached values one-hot, W_o = I, so the output is each head's weights of the t cached keys
    (the new key has the rest)."""
    rng = np.random.default_rng(RNG_SEED + 17)
    B, dm, h, dk, t = 2, 10, 2, 6, 3
    pw = {"W_q": rng.normal(size=(dm, h * dk)) / 6, "W_k": rng.normal(size=(dm, h * dk)) / 6,
          "W_v": np.zeros((dm, h * t)), "W_o": np.eye(h * t, dm), "b_q": np.zeros(h * dk),
          "b_k": np.zeros(h * dk), "b_v": np.zeros(h * t), "b_o": np.zeros(dm)}
    x, kc = rng.normal(size=(B, 1, dm)), rng.normal(size=(B, h, t, dk))
    vc = np.broadcast_to(np.eye(t), (B, h, t, t)).copy()   # cached value j = e_j
    got = outputs_of(fn, 3, x, kc, vc, pw, h)
    o = as_array(got[0]) if got else None
    if o is None or o.shape != (B, 1, dm) or has_nan(o):
        return None
    q, k_new = x[:, 0] @ pw["W_q"], x[:, 0] @ pw["W_k"]     # (B, h * dk) each
    cs = []
    for b in range(B):
        for i in range(h):
            w, cols = o[b, 0, i * t:(i + 1) * t], slice(i * dk, (i + 1) * dk)
            cs.append(measure_scale(np.append(w, 1 - w.sum())[None], q[b:b + 1, cols],
                                    np.concatenate([kc[b, i], k_new[b:b + 1, cols]])))
    if any(c is None for c in cs) or not np.allclose(cs, cs[0], rtol=1e-6):
        return None
    return head_scale_finding(cs[0], dm, h, dk)


def decode_probe(fn, expected):
    """The first step's empty cache, the returned caches, the weights read off, then their scale."""
    return decide((_empty_cache, _cache_step, _decode_weights, _decode_scale), fn, expected)


def mha_backward_inputs():
    """The mha_backward probes' inputs, ``{probe_id: ((dout, query, key, value, params, h), {})}``:
    self-attention, and cross-attention with every size distinct as two heads and as one."""
    rng = np.random.default_rng(RNG_SEED + 8)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    x = rng.normal(size=(2, 3, d))
    q, kv = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 7, 5))
    pd = {f"W_{n}": rng.normal(size=(5, 12)) / 3 for n in "qkv"}
    pd["W_o"] = rng.normal(size=(12, 5)) / 3
    pd.update({f"b_{n}": 0.1 * rng.normal(size=(12,)) for n in "qkv"})
    pd["b_o"] = 0.1 * rng.normal(size=(5,))
    dout = rng.normal(size=(3, 4, 5))
    return {"self": ((rng.normal(size=(2, 3, d)), x, x, x, p, h), {}),
            "distinct": ((dout, q, kv, kv, pd, 2), {}),
            "one_head": ((dout, q, kv, kv, pd, 1), {})}         # the same, as one head of d_k = 12


def decode_inputs():
    """The decode_step probe's inputs, ``{"step": ((x (2, 1, 4), k_cache, v_cache (2, 2, 3, 2),
    params, h = 2), {})}``."""
    rng = np.random.default_rng(RNG_SEED + 9)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return {"step": ((rng.normal(size=(2, 1, d)), rng.normal(size=(2, h, 3, d // h)),
                      rng.normal(size=(2, h, 3, d // h)), p, h), {})}


