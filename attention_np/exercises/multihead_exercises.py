"""Exercises on multi-head attention (§3.2.2): split and merge heads, forward and backward."""

from __future__ import annotations

import numpy as np

from attention_np.exercises import generate
from attention_np.exercises.checker import D_MODEL_HINT, Case, Exercise, Mistake
from attention_np.paper.attention import sdpa_forward
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.paper.multihead import mha_backward, mha_forward
from attention_np.paper.params import init_mha_params


def ref_split_heads(x, num_heads):
    """(..., L, h*d) -> (..., h, L, d); head i is feature columns [i*d, (i+1)*d)."""
    return np.ascontiguousarray(split_heads(x, num_heads))


def ref_merge_heads(x):
    """(..., h, L, d) -> (..., L, h*d), the paper's Concat(head_1, ..., head_h)."""
    return merge_heads(x)


_HEAD_AXES = (generate.Axis("h", high=4), generate.Axis("L", high=5), generate.Axis("d", high=4))


def _split_measure(a):
    x, h = a
    return {"L": x.shape[-2], "h": h, "d": x.shape[-1] // h, "h*d": x.shape[-1], "batch": x.shape[:-2],
            "dtype": x.dtype}


SPLIT_SPEC = generate.Spec(
    "split_heads", _HEAD_AXES, differ=(("h", "d"),), equal=(("L", "h"), ("L", "h*d")), lead=3,
    build=lambda rng, z, key, family: (rng.normal(size=(*z["batch"], z["L"], z["h"] * z["d"])).astype(
        z["dtype"]), z["h"]),
    measure=_split_measure, clauses=(generate.Clause("batch"), generate.Clause("heads")))

MERGE_SPEC = generate.Spec(
    "merge_heads", _HEAD_AXES, differ=(("h", "d"),), equal=(("L", "h"),), lead=3,
    build=lambda rng, z, key, family: (rng.normal(size=(*z["batch"], z["h"], z["L"], z["d"])).astype(
        z["dtype"]),),
    measure=lambda a: {"h": a[0].shape[-3], "L": a[0].shape[-2], "d": a[0].shape[-1],
                       "batch": a[0].shape[:-3], "dtype": a[0].dtype},
    clauses=(generate.Clause("inverse"), generate.Clause("batch")))


def _split_cases(seed=4):
    return generate.draw(SPLIT_SPEC, seed, None if seed == 4 else 4)


def _merge_cases(seed=5):
    return generate.draw(MERGE_SPEC, seed, None if seed == 5 else 5)


def _split_interleaved(x, h):
    *b, L, f = x.shape
    return np.swapaxes(np.swapaxes(x.reshape(*b, L, f // h, h), -1, -2), -2, -3)


def _merge_interleaved(x):
    *b, h, L, d = x.shape
    return np.moveaxis(x, -3, -1).reshape(*b, L, h * d)


SPLIT_HEADS = Exercise(
    "split_heads", "split_heads(x, num_heads)",
    "head_i = Attention(Q W_i^Q, ...): with W^Q = [W_1^Q ... W_h^Q], head i owns feature columns "
    "[i*d_k, (i+1)*d_k) of Q W^Q  (§3.2.2)",
    ref_split_heads, _split_cases, spec=SPLIT_SPEC, mistakes=[
        Mistake("head split transposed (heads interleaved)", _split_interleaved,
                "Head i should own a CONTIGUOUS block of d_k columns: reshape the last axis as "
                "(h, d_k), not (d_k, h)."),
        Mistake("reshape without the transpose",
                lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], x.shape[-1] // h),
                "A reshape keeps the memory order: (L, h*d) -> (h, L, d) mixes positions into "
                "heads. Split the feature axis first, then move the head axis."),
    ])

MERGE_HEADS = Exercise(
    "merge_heads", "merge_heads(x)",
    "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O  (§3.2.2)",
    ref_merge_heads, _merge_cases, spec=MERGE_SPEC, mistakes=[
        Mistake("merge transposed (heads interleaved)", _merge_interleaved,
                "Concat puts head 1's d_v features first, then head 2's: a block per head."),
        Mistake("reshape without the transpose",
                lambda x: x.reshape(*x.shape[:-3], x.shape[-2], x.shape[-3] * x.shape[-1]),
                "Move the head axis next to the feature axis before the reshape."),
    ])


# ---------------------------------------------------------------- multi-head forward
def ref_mha_forward(query, key, value, params, num_heads, mask=None):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_o + b_o, head_i = Attention(Q W_q + b_q, ...).

    query (..., L, d_model), key/value (..., S, d_model), params from init_mha_params."""
    return mha_forward(query, key, value, params, num_heads=num_heads, mask=mask)[0]


def example_params(rng, d_model, h, d_k=None, dtype=np.float64, d_v=None):
    """Parameters of init_mha_params with nonzero biases (so a forgotten bias shows)."""
    p = init_mha_params(d_model, h, d_k=d_k, d_v=d_k if d_v is None else d_v, bias=True, rng=rng)
    for name in p:
        if name.startswith("b_"):
            p[name] = 0.1 * rng.normal(size=p[name].shape)   # nonzero biases, to be seen
    return {n: a.astype(dtype) for n, a in p.items()}


#: the sizes of multi-head attention: W_q, W_k (d_model, h*d_k), W_v (d_model, h*d_v)
MHA_AXES = tuple(generate.Axis(n, high=hi) for n, hi in (("B", 3), ("L", 4), ("S", 5), ("d_model", 6),
                                                          ("h", 3), ("d_k", 3), ("d_v", 3)))
MHA_DIFFER = (("L", "S"), ("d_k", "d_v"), ("h*d_k", "d_model"))


def mha_sizes(query, key, p, h):
    """The sizes of a multi-head call, read from its arguments."""
    return {"B": query.shape[0], "L": query.shape[-2], "S": key.shape[-2], "d_model": query.shape[-1],
            "h": h, "d_k": p["W_q"].shape[1] // h, "d_v": p["W_v"].shape[1] // h,
            "h*d_k": p["W_q"].shape[1], "dtype": query.dtype}


def _mha_inputs(rng, z, key, family):
    """query, key, value, params, h (and a mask) for one clause and family, or None."""
    B, L, S, d_model, h, dt = z["B"], z["L"], z["S"], z["d_model"], z["h"], z["dtype"]
    p = example_params(rng, d_model, h, d_k=z["d_k"], d_v=z["d_v"], dtype=dt)
    x = rng.normal(size=(B, L, d_model)).astype(dt)
    if key == "self":
        args = (x, x, x, p, h)
    else:
        y = rng.normal(size=(B, S, d_model)).astype(dt)
        value = rng.normal(size=(B, S, d_model)).astype(dt) if family == "kv_distinct" else y
        args = (x, y, value, p, h)
    S = args[1].shape[1]
    if family == "huge":                                 # scores ~1e3: exp overflows unless shifted
        args = (*(30 * a for a in args[:3]), *args[3:])
    if family == "empty_row":                            # (B, 1, 1, S), one sequence of length 0
        lengths = rng.integers(0, S + 1, size=(B, 1, 1, 1))
        lengths[rng.integers(B)] = 0
        return (*args, np.arange(S) < lengths)
    if family == "shared":                               # (L, S) for every sequence and head
        return (*args, _some_true(rng, (L, S)))
    if family == "per_sequence":                         # (B, 1, L, S)
        return (*args, _some_true(rng, (B, 1, L, S)))
    if family == "padding":                              # (B, 1, 1, S), every length >= 1
        return (*args, np.arange(S) < rng.integers(1, S + 1, size=(B, 1, 1, 1)))
    return args


def _some_true(rng, shape, p=0.6):
    """A random bool mask of ``shape`` with at least one True in each row (last axis)."""
    m = rng.random(shape) < p
    return m | (np.arange(shape[-1]) == rng.integers(shape[-1], size=shape[:-1])[..., None])


_C = generate.Clause
MHA_SPEC = generate.Spec(
    "mha_forward", MHA_AXES, differ=MHA_DIFFER, build=_mha_inputs,
    measure=lambda a: mha_sizes(a[0], a[1], a[3], a[4]), clauses=(
        _C("self", excludes=("L<S", "L>S")), _C("cross", ("kv_same", "kv_distinct")),
        _C("d_k", require=lambda z: z["h*d_k"] != z["d_model"]), _C("mask", ("shared",)),
        _C("mask_head_axis", ("per_sequence", "padding")), _C("extreme", ("huge",)),
        _C("fully_masked", ("empty_row",)), _C("returns")))


def _mha_cases(seed=6):
    return generate.draw(MHA_SPEC, seed, None if seed == 6 else 6)


def _mha(query, key, value, p, h, mask=None, *, out_proj=True, scale_dm=False, split=split_heads,
         biases=True):
    b = (lambda n: p[n]) if biases else (lambda n: 0.0)
    q = split(query @ p["W_q"] + b("b_q"), h)
    k = split(key @ p["W_k"] + b("b_k"), h)
    v = split(value @ p["W_v"] + b("b_v"), h)
    scale = float(1 / np.sqrt(query.shape[-1])) if scale_dm else None
    heads = sdpa_forward(q, k, v, mask, scale=scale)[0]
    concat = merge_heads(heads)
    return concat @ p["W_o"] + b("b_o") if out_proj else concat


MHA_FORWARD = Exercise(
    "mha_forward", "mha_forward(query, key, value, params, num_heads, mask=None)",
    "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, "
    "V W_i^V)  (§3.2.2)",
    ref_mha_forward, _mha_cases, spec=MHA_SPEC, mistakes=[
        Mistake("output projection forgotten", lambda *a: _mha(*a, out_proj=False),
                "The formula ends with '... W^O': the concatenated heads are projected once more."),
        Mistake("scaled by sqrt(d_model) instead of sqrt(d_k)", lambda *a: _mha(*a, scale_dm=True),
                D_MODEL_HINT),
        Mistake("head split transposed (heads interleaved)", lambda *a: _mha(*a, split=_split_interleaved),
                "Head i owns a contiguous block of d_k columns of Q W^Q."),
        Mistake("projection biases forgotten", lambda *a: _mha(*a, biases=False),
                "params holds b_q, b_k, b_v, b_o: each projection is x W + b."),
        Mistake("a single head (no split)", lambda *a: _mha(*a[:4], 1, *a[5:]),
                "With one head of width h*d_k the softmax averages over all features together; "
                "split into num_heads heads, each with its own softmax."),
    ])


# ---------------------------------------------------------------- multi-head backward
def ref_mha_backward(dout, query, key, value, params, num_heads):
    """(dquery, dkey, dvalue, grads): grads a dict with the keys of ``params``."""
    return mha_backward(dout, mha_forward(query, key, value, params, num_heads=num_heads)[1])


def _fd_mha(dout, query, key, value, p, h):
    arrays = {"query": query.copy(), "key": key.copy(), "value": value.copy(),
              **{n: a.copy() for n, a in p.items()}}

    def loss():
        a = arrays
        out = mha_forward(a["query"], a["key"], a["value"], {n: a[n] for n in p}, num_heads=h)[0]
        return float((dout * out).sum())
    g = {n: numerical_gradient(loss, x) for n, x in arrays.items()}
    return g["query"], g["key"], g["value"], {n: g[n] for n in p}


def _mha_backward_inputs(rng, z, key, family):
    args = _mha_inputs(rng, z, key, family)
    return (rng.normal(size=args[0].shape).astype(z["dtype"]), *args)


MHA_BACKWARD_SPEC = generate.Spec(
    "mha_backward", MHA_AXES, differ=MHA_DIFFER, build=_mha_backward_inputs,
    measure=lambda a: mha_sizes(a[1], a[2], a[4], a[5]), clauses=(
        _C("cross", ("kv_same", "kv_distinct")), _C("gradient"), _C("bias_sum"),
        _C("self", excludes=("L<S", "L>S"))))


def _mha_backward_cases(seed=7):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    p = example_params(rng, 4, 2, d_k=3, d_v=1)
    dout = rng.normal(size=(2, 3, 4))
    return generate.draw(MHA_BACKWARD_SPEC, seed, None if seed == 7 else 7) + [
        Case("gradcheck: central differences of mha_forward (d_k=3, d_v=1, d_model=4, h=2)",
             (dout, x, y, y, p, 2), expected=_fd_mha(dout, x, y, y, p, 2), tol=(1e-6, 1e-8),
             clauses=("gradient", "bias_sum"))]


def _mha_bwd_wrong(dout, query, key, value, p, h, *, sum_bias=True, w_transposed=False,
                   db_k=None):
    dq, dk, dv, g = ref_mha_backward(dout, query, key, value, p, h)
    if not sum_bias:
        g = dict(g, b_o=dout.sum(-2))          # (B, d_model): summed over positions only
    if w_transposed:
        g = {n: (a.T if n.startswith("W_") and a.shape[0] == a.shape[1] else a) for n, a in g.items()}
    if db_k == "like_b_q":
        g = dict(g, b_k=g["b_q"])
    return dq, dk, dv, g


MHA_BACKWARD = Exercise(
    "mha_backward", "mha_backward(dout, query, key, value, params, num_heads)",
    "The backward of MultiHead: each forward line undone, last first",
    ref_mha_backward, _mha_backward_cases, outputs=("dquery", "dkey", "dvalue", "grads"),
    spec=MHA_BACKWARD_SPEC, mistakes=[
        Mistake("bias gradient not summed over the batch", lambda *a: _mha_bwd_wrong(*a, sum_bias=False),
                "b_o was added to every position of every sequence: its gradient sums dout over "
                "all of them."),
        Mistake("weight gradients transposed", lambda *a: _mha_bwd_wrong(*a, w_transposed=True),
                "For y = x W with W of shape (d_in, d_out), dW must have W's shape: which of "
                "x^T dy and dy^T x is (d_in, d_out)?"),
        Mistake("nonzero gradient for b_k", lambda *a: _mha_bwd_wrong(*a, db_k="like_b_q"),
                "Adding b_k adds q_i . b_k to every score of row i: a constant per row, which "
                "softmax ignores. What does that make dL/db_k?"),
    ])
