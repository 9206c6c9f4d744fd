"""Exercises on Eq. (1): its forward and its backward."""

from __future__ import annotations

import numpy as np

from attention_np.exercises.checker import SCALE_HINT, UNWEIGHTED_HINT, Case, Exercise, Mistake
from attention_np.paper.attention import sdpa_backward, sdpa_forward
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.paper.softmax import softmax


def ref_attention(q, k, v, mask=None):
    """Eq. (1): q (..., L, d_k), k (..., S, d_k), v (..., S, d_v), bool mask broadcastable to
    (..., L, S) with True = may attend -> (..., L, d_v); a fully masked row gives zeros."""
    return sdpa_forward(q, k, v, mask)[0]


def _qkv(rng, L, S, d_k, d_v, batch=(), dtype=np.float64):
    return tuple(rng.normal(size=(*batch, n, d)).astype(dtype) for n, d in ((L, d_k), (S, d_k), (S, d_v)))


def _sizes(rng, seed, default):
    """(L, S, d_k, d_v): ``default`` for the public cases, four other distinct sizes for the
    hidden ones (so L != S and d_k != d_v there too)."""
    if seed == default[0]:
        return default[1]
    return tuple(int(n) for n in rng.choice(np.arange(2, 8), 4, replace=False))


def _attention_cases(seed=2):
    rng = np.random.default_rng(seed)
    L, S, d_k, d_v = _sizes(rng, seed, (2, (3, 5, 4, 2)))
    q, k, v = _qkv(rng, L, S, d_k, d_v)
    masked = rng.random((L, S)) < 0.7
    masked[:, 0] = True
    full = masked.copy()
    full[1] = False                                      # query 1 may attend to nothing
    qb, kb, vb = _qkv(rng, 4, 4, 8, 8, batch=(2, 3))
    qp, kp, vp = _qkv(rng, L, S, d_k, d_v, batch=(3,))
    lengths = np.array([S, 0, 2])                        # the second sequence is empty
    padding = (np.arange(S) < lengths[:, None])[:, None, :]          # (B, 1, S)
    return [
        Case(f"L={L} != S={S}, d_k={d_k} != d_v={d_v}", (q, k, v), clauses=("shapes", "L_ne_S", "returns")),
        Case("batch (2, 3), d_k = d_v = 8", (qb, kb, vb), clauses=("returns",)),
        Case("with a mask", (q, k, v, masked), clauses=("masked_zero", "finite")),
        Case("a fully masked row (its output must be 0)", (q, k, v, full), clauses=("fully_masked",)),
        Case("broadcasting: k, v shared across the batch", (qb, kb[0, 0], vb[0, 0]), clauses=("broadcast",)),
        Case("broadcasting: k, v (3, S, d) for q (2, 3, L, d)", (qb, kb[0], vb[0]), clauses=("broadcast",)),
        Case("an (L, S) mask shared by a batch (B, L, S)", (qp, kp, vp, full),
             clauses=("mask_broadcast", "fully_masked")),
        Case("a padding mask (B, 1, S) for scores (B, L, S), one sequence empty", (qp, kp, vp, padding),
             clauses=("mask_broadcast", "fully_masked")),
        Case("huge logits (|scores| ~ 1e3)", (30 * q, 30 * k, v), clauses=("extreme",)),
        Case("a masked key scores far above the others",
             (np.array([[1.0]]), np.array([[800.0 + 100 * rng.random()], [1.0]]),
              rng.normal(size=(2, 1)), np.array([[False, True]])), clauses=("masked_zero", "extreme")),
        Case("L = 1 (one query)", (q[:1], k, v, masked[:1]), clauses=("L_1",)),
        Case("float32", _qkv(rng, L, S, d_k, d_v, dtype=np.float32), dtype=np.float32, clauses=("dtype",)),
        Case("float32, a padding mask (B, 1, S)", (*(x.astype(np.float32) for x in (qp, kp, vp)), padding),
             dtype=np.float32, clauses=("dtype", "mask_broadcast")),
    ]


def _attn(q, k, v, mask=None, *, scale=None, axis=-1, fill=-np.inf, stable=True,
          polarity=True, weights=False):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) * float(1 / np.sqrt(d_k) if scale is None else scale)
    if mask is not None:
        keep = mask if polarity else ~mask
        s = np.where(keep, s, fill)
    if stable:
        p = softmax(s, axis=axis)
    else:
        e = np.exp(s)
        p = e / e.sum(axis, keepdims=True)
    return p if weights else p @ v


ATTENTION = Exercise(
    "attention", "attention(q, k, v, mask=None)",
    "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (Eq. (1), §3.2.1)",
    ref_attention, _attention_cases, mistakes=[
        Mistake("no 1/sqrt(d_k)", lambda q, k, v, m=None: _attn(q, k, v, m, scale=1.0), SCALE_HINT),
        Mistake("divided by d_k instead of sqrt(d_k)",
                lambda q, k, v, m=None: _attn(q, k, v, m, scale=1 / q.shape[-1]),
                "q . k sums d_k products of unit variance: its variance is d_k. Dividing by what "
                "brings the variance back to 1?"),
        Mistake("scaled by sqrt(d_v) instead of sqrt(d_k)",
                lambda q, k, v, m=None: _attn(q, k, v, m, scale=1 / np.sqrt(v.shape[-1])),
                "The scores are dot products of queries and keys: whose width sets their size?"),
        Mistake("softmax over the wrong axis (over queries)",
                lambda q, k, v, m=None: _attn(q, k, v, m, axis=-2),
                "Each query distributes its attention over the keys: the weights of one query "
                "(one row) sum to 1."),
        Mistake("no max subtraction (overflow)",
                lambda q, k, v, m=None: _attn(q, k, v, m, stable=False),
                "With large scores exp overflows to inf and inf/inf is NaN: shift each row first."),
        Mistake("mask polarity flipped", lambda q, k, v, m=None: _attn(q, k, v, m, polarity=False),
                "The convention is True = may attend. Which entries did you set to -inf?"),
        Mistake("masked with 0 instead of -inf", lambda q, k, v, m=None: _attn(q, k, v, m, fill=0.0),
                "exp(0) = 1: a score of 0 still gets weight. What score gets weight exactly 0?"),
        Mistake("masked after the softmax without renormalizing",
                lambda q, k, v, m=None: _attn(q, k, v, None, weights=True) @ v if m is None
                else (_attn(q, k, v, None, weights=True) * m) @ v,
                "Zeroing weights after the softmax leaves rows that no longer sum to 1. Mask "
                "the scores, before the softmax."),
        Mistake("NaN on a fully masked row",
                lambda q, k, v, m=None: _attn(q, k, v, m, stable=False)
                if m is not None else _attn(q, k, v),
                "A row that may attend to nothing is all -inf: its max is -inf and -inf - (-inf) "
                "is NaN. Decide what such a row returns (the library returns 0) and special-case it."),
        Mistake("a fully masked row attends uniformly (finite fill like -1e9)",
                lambda q, k, v, m=None: _attn(q, k, v, m, fill=-1e9),
                "With a finite fill, a row with every key masked softmaxes to uniform weights "
                "over keys it may not see. It should attend to nothing (output 0)."),
        Mistake("returned the attention weights instead of the output",
                lambda q, k, v, m=None: _attn(q, k, v, m, weights=True),
                "Eq. (1) ends with '... V': the weights average the values."),
    ])


# ---------------------------------------------------------------- backward
def ref_attention_backward(dout, q, k, v, mask=None):
    """(dq, dk, dv) of Eq. (1), each with the shape of its input (summed over broadcast axes)."""
    return sdpa_backward(dout, sdpa_forward(q, k, v, mask)[1])


def _fd(q, k, v, mask, dout):
    q, k, v = q.copy(), k.copy(), v.copy()

    def loss():
        return float((dout * sdpa_forward(q, k, v, mask)[0]).sum())
    return tuple(numerical_gradient(loss, x) for x in (q, k, v))


def _backward_cases(seed=3):
    rng = np.random.default_rng(seed)
    L, S, d_k, d_v = _sizes(rng, seed, (3, (3, 5, 4, 2)))
    q, k, v = _qkv(rng, L, S, d_k, d_v)
    dout = rng.normal(size=(L, d_v))
    mask = rng.random((L, S)) < 0.6
    mask[:, 0] = True
    full = mask.copy()
    full[1] = False                                      # query 1 may attend to nothing
    qb, kb, vb = _qkv(rng, 4, 4, 3, 3, batch=(2,))
    doutb = rng.normal(size=(2, 4, 3))
    q4, k4, v4 = _qkv(rng, L, S, d_k, d_v, batch=(2, 3))              # q (2, 3, L, d_k)
    dout4 = rng.normal(size=(2, 3, L, d_v))
    qp, kp, vp = _qkv(rng, L, S, d_k, d_v, batch=(3,))
    doutp = rng.normal(size=(3, L, d_v))
    padding = (np.arange(S) < np.array([S, 0, 2])[:, None])[:, None, :]   # (B, 1, S), one empty
    q32 = tuple(x.astype(np.float32) for x in (q, k, v))
    return [
        Case(f"L={L} != S={S}, d_k={d_k} != d_v={d_v}", (dout, q, k, v), clauses=("shapes", "L_ne_S")),
        Case("with a mask", (dout, q, k, v, mask)),
        Case("batch 2, L = S = 4", (doutb, qb, kb, vb)),
        Case("broadcasting: k, v shared across the batch", (doutb, qb, kb[0], vb[0]),
             clauses=("broadcast",)),
        Case("broadcasting: k, v (S, d) for q (2, 3, L, d): two axes fewer", (dout4, q4, k4[0, 0], v4[0, 0]),
             clauses=("broadcast",)),
        Case("broadcasting: k, v (3, S, d) for q (2, 3, L, d)", (dout4, q4, k4[0], v4[0]),
             clauses=("broadcast",)),
        Case("broadcasting: k, v with an axis of size 1, (1, S, d) for q (3, L, d)",
             (doutp, qp, kp[:1], vp[:1]), clauses=("size_one",)),
        Case("a fully masked row (its gradients must be 0)", (dout, q, k, v, full),
             clauses=("fully_masked",)),
        Case("gradcheck with a fully masked row", (dout, q, k, v, full),
             expected=_fd(q, k, v, full, dout), tol=(1e-6, 1e-8), clauses=("fully_masked", "gradient")),
        Case("an (L, S) mask shared by a batch (B, L, S)", (doutp, qp, kp, vp, full),
             clauses=("mask_broadcast", "fully_masked")),
        Case("a padding mask (B, 1, S), one sequence empty", (doutp, qp, kp, vp, padding),
             clauses=("mask_broadcast", "fully_masked")),
        Case("L = 1 (one query)", (dout[:1], q[:1], k, v, mask[:1]), clauses=("L_1",)),
        Case("gradcheck: central differences of Eq. (1)", (dout, q, k, v, mask),
             expected=_fd(q, k, v, mask, dout), tol=(1e-6, 1e-8), clauses=("gradient",)),
        Case("float32", (dout.astype(np.float32), *q32), dtype=np.float32, clauses=("dtype",)),
        Case("float32, k, v shared across the batch", tuple(x.astype(np.float32) for x in
                                                            (doutb, qb, kb[0], vb[0])),
             dtype=np.float32, clauses=("dtype", "broadcast")),
    ]


def _bwd(dout, q, k, v, m=None, *, scale_q=True, scale_k=True, full_jacobian=True,
         sum_back=True, dk_from_s=True, weighted=True):
    s_ = float(1 / np.sqrt(q.shape[-1]))
    s = q @ np.swapaxes(k, -1, -2) * s_
    if m is not None:
        s = np.where(m, s, -np.inf)
    p = softmax(s)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - ((dp * p) if weighted else dp).sum(-1, keepdims=True)) if full_jacobian \
        else p * (1 - p) * dp
    dq = ds @ k * (s_ if scale_q else 1.0)
    dk = (np.swapaxes(ds, -1, -2) @ q if dk_from_s else ds @ q) * (s_ if scale_k else 1.0)
    if sum_back:
        dk = dk.reshape(-1, *k.shape).sum(0) if dk.shape != k.shape else dk
        dv = dv.reshape(-1, *v.shape).sum(0) if dv.shape != v.shape else dv
    return dq, dk, dv


ATTENTION_BACKWARD = Exercise(
    "attention_backward", "attention_backward(dout, q, k, v, mask=None)",
    "Backward of out = softmax(q k^T / sqrt(d_k)) v: returns (dq, dk, dv)",
    ref_attention_backward, _backward_cases, outputs=("dq", "dk", "dv"), mistakes=[
        Mistake("forgot 1/sqrt(d_k) in dq and dk",
                lambda *a: _bwd(*a, scale_q=False, scale_k=False),
                "The forward line s = q k^T * scale multiplies by a constant: its backward "
                "multiplies by it too."),
        Mistake("forgot 1/sqrt(d_k) in dk only", lambda *a: _bwd(*a, scale_k=False),
                "Both q and k enter the scores through the same scaled product."),
        Mistake("softmax backward kept only the diagonal",
                lambda *a: _bwd(*a, full_jacobian=False),
                "dS = P * (dP - rowsum(dP * P)): every weight in a row shares the normalizer."),
        Mistake("sum without the weights p", lambda *a: _bwd(*a, weighted=False), UNWEIGHTED_HINT),
        Mistake("broadcast gradients not summed back", lambda *a: _bwd(*a, sum_back=False),
                "k and v were broadcast across the batch in the forward; a broadcast copies, so "
                "its backward sums: dk must have k's shape."),
        Mistake("dk = dS q instead of dS^T q", lambda *a: _bwd(*a, dk_from_s=False),
                "dS is (L, S) and dk is (S, d_k): which transpose makes the key axis come first?"),
    ])
