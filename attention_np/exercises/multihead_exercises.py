"""Exercises on multi-head attention (§3.2.2): split and merge heads, forward and backward."""

from __future__ import annotations

import numpy as np

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


def _split_cases(seed=4):
    rng = np.random.default_rng(seed)
    return [Case("(5, 6), h=2", (rng.normal(size=(5, 6)), 2), clauses=("heads",)),
            Case("(2, 3, 8), h=4", (rng.normal(size=(2, 3, 8)), 4), clauses=("batch",)),
            Case("(2, 3, 5, 6), h=3 (two leading axes)", (rng.normal(size=(2, 3, 5, 6)), 3),
                 clauses=("batch",)),
            Case("(4, 4), h=2 (square)", (rng.normal(size=(4, 4)), 2), clauses=("heads",)),
            Case("(2, 6), h=2 (L = h)", (rng.normal(size=(2, 6)), 2), clauses=("heads",)),
            Case("float32 (3, 4), h=2", (rng.normal(size=(3, 4)).astype(np.float32), 2),
                 dtype=np.float32, clauses=("dtype",))]


def _merge_cases(seed=5):
    rng = np.random.default_rng(seed)
    return [Case("(2, 5, 3)", (rng.normal(size=(2, 5, 3)),), clauses=("inverse",)),
            Case("(2, 4, 3, 2)", (rng.normal(size=(2, 4, 3, 2)),), clauses=("batch",)),
            Case("(3, 2, 4, 5, 2) (two leading axes)", (rng.normal(size=(3, 2, 4, 5, 2)),),
                 clauses=("batch",)),
            Case("(2, 2, 2)", (rng.normal(size=(2, 2, 2)),), clauses=("inverse",)),
            Case("float32 (2, 3, 2)", (rng.normal(size=(2, 3, 2)).astype(np.float32),),
                 dtype=np.float32, clauses=("dtype",))]


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
    ref_split_heads, _split_cases, [
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
    ref_merge_heads, _merge_cases, [
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


def example_params(rng, d_model, h, d_k=None, dtype=np.float64):
    """Parameters of init_mha_params with nonzero biases (so a forgotten bias shows)."""
    p = init_mha_params(d_model, h, d_k=d_k, d_v=d_k, bias=True, rng=rng)
    for name in p:
        if name.startswith("b_"):
            p[name] = 0.1 * rng.normal(size=p[name].shape)   # nonzero biases, to be seen
    return {n: a.astype(dtype) for n, a in p.items()}


def _mha_cases(seed=6):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8))
    p = example_params(rng, 8, 2)
    p3 = example_params(rng, 8, 4, d_k=3)
    mask = rng.random((3, 5)) < 0.6
    mask[:, 0] = True
    per_batch = np.stack([mask, rng.random((3, 5)) < 0.6])[:, None]     # (B, 1, L, S)
    per_batch[..., 0] = True
    return [
        Case("self-attention, B=2, L=3, h=2", (x, x, x, p, 2), clauses=("self", "returns")),
        Case("cross-attention, L=3 != S=5", (x, y, y, p, 2), clauses=("cross",)),
        Case("h=4 with d_k=3 (h*d_k != d_model)", (x, y, y, p3, 4), clauses=("d_k",)),
        Case("with a mask (L, S)", (x, y, y, p, 2, mask), clauses=("mask",)),
        Case("a mask per sequence (B, 1, L, S)", (x, y, y, p, 2, per_batch), clauses=("mask_head_axis",)),
        Case("a padding mask (B, 1, 1, S)",
             (x, y, y, p, 2, np.arange(5) < np.array([5, 2])[:, None, None, None]),
             clauses=("mask_head_axis",)),
        Case("float32", (x.astype(np.float32), y.astype(np.float32), y.astype(np.float32),
                         {n: a.astype(np.float32) for n, a in p.items()}, 2), dtype=np.float32,
             clauses=("dtype",)),
    ]


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
    ref_mha_forward, _mha_cases, [
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


def _mha_backward_cases(seed=7):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    p = example_params(rng, 4, 2)
    dout = rng.normal(size=(2, 3, 4))
    # every size distinct (B=3, L=4, S=7, d_model=5, h=2, d_k=6): a sum over the wrong axes,
    # or heads taken in the wrong order, cannot give the right shape and values by coincidence
    xd, yd = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 7, 5))
    pd = example_params(rng, 5, 2, d_k=6)
    doutd = rng.normal(size=(3, 4, 5))
    f32 = tuple(a.astype(np.float32) for a in (dout, x, y))
    return [
        Case("cross-attention, B=2, L=3, S=5, h=2", (dout, x, y, y, p, 2), clauses=("cross",)),
        Case("self-attention (the three gradients are returned separately)", (dout, x, x, x, p, 2),
             clauses=("self",)),
        Case("every size distinct: B=3, L=4, S=7, d_model=5, h=2, d_k=6", (doutd, xd, yd, yd, pd, 2),
             clauses=("cross", "bias_sum")),
        Case("gradcheck: central differences of mha_forward", (dout, x, y, y, p, 2),
             expected=_fd_mha(dout, x, y, y, p, 2), tol=(1e-6, 1e-8), clauses=("gradient", "bias_sum")),
        Case("float32", (*f32, f32[2], {n: a.astype(np.float32) for n, a in p.items()}, 2),
             dtype=np.float32, clauses=("dtype",)),
    ]


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
    ref_mha_backward, _mha_backward_cases, outputs=("dquery", "dkey", "dvalue", "grads"), mistakes=[
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
