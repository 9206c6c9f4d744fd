"""By-definition oracles, written here from the paper and never imported from attention_np.

A test that holds the library to one of these cannot pass on a bug that every path of the
library shares (a default scale of 1/d_k, a softmax over the wrong axis, a causal mask one
position off, heads split in the wrong order). They are slow on purpose: one head at a time,
central differences one entry at a time; keep the shapes small.

Conventions (API.md): masks are True = attend; a row whose keys are all blocked has weights 0
and output 0; ``is_causal`` is top-left aligned (query i sees keys j <= i).
"""

from __future__ import annotations

import numpy as np


def softmax_rows(x):
    """Softmax over the last axis as the definition writes it: ``exp(x - max) / sum``, float64."""
    e = np.exp(np.asarray(x, np.float64) - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, mask=None, *, bias=None, is_causal=False, scale=None):
    """Eq. (1): ``softmax(q k^T / sqrt(d_k) + bias) v`` over the keys, masked keys removed.

    q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) -> (out (..., L, d_v), weights (..., L, S)).
    """
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    d_k = q.shape[-1]
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / np.sqrt(d_k) if scale is None else scale
    scores = np.einsum("...ld,...sd->...ls", q, k) * scale          # (..., L, S)
    if bias is not None:
        scores = scores + bias
    allowed = np.ones(scores.shape, bool)
    if mask is not None:
        allowed = allowed & mask
    if is_causal:
        allowed = allowed & (np.arange(S)[None, :] <= np.arange(L)[:, None])
    # softmax over the keys, one row at a time: exp(s - max) / sum over the allowed keys
    scores = np.where(allowed, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(allowed, np.exp(scores - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return np.einsum("...ls,...sd->...ld", weights, v), weights


def attention_and_gradients(q, k, v, dout, mask=None, *, bias=None, is_causal=False, scale=None,
                            groups=1):
    """Eq. (1) and its gradients by the chain rule, for an oracle of a framework's backward.

    ``groups`` query heads share each key/value head (grouped-query attention: k and v are
    repeated along the head axis, their gradients summed back over each group). With
    ``w = softmax(s)``, ``s = scale * q k^T``, ``out = w v``::

        dv = w^T dout,   dw = dout v^T,   ds = w * (dw - sum_keys(dw * w)),
        dq = scale * ds k,   dk = scale * ds^T q

    Returns [out, dq, dk, dv].
    """
    q, k, v, dout = (np.asarray(a, np.float64) for a in (q, k, v, dout))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    kk, vv = np.repeat(k, groups, axis=-3), np.repeat(v, groups, axis=-3)
    out, w = attention(q, kk, vv, mask, bias=bias, is_causal=is_causal, scale=scale)
    dv = np.einsum("...ls,...ld->...sd", w, dout)
    dw = np.einsum("...ld,...sd->...ls", dout, vv)
    ds = w * (dw - np.sum(dw * w, axis=-1, keepdims=True))
    dq = scale * np.einsum("...ls,...sd->...ld", ds, kk)
    dk = scale * np.einsum("...ls,...ld->...sd", ds, q)
    def ungroup(g):                                     # (..., H, S, d) -> (..., H_kv, S, d)
        return g.reshape(*g.shape[:-3], g.shape[-3] // groups, groups, *g.shape[-2:]).sum(-3)
    return [out, dq, ungroup(dk), ungroup(dv)]


def multihead(query, key, value, p, h, mask=None, *, is_causal=False):
    """§3.2.2: ``Concat(head_1, ..., head_h) W^O + b_o``, ``head_i = Attention(Q W_i^Q, K W_i^K,
    V W_i^V)``, one head at a time with head i owning columns ``i*d_k:(i+1)*d_k`` (API.md).

    ``mask`` broadcasts against (B, h, L, S); a head axis in it is indexed per head.
    Returns (out (..., L, d_model), weights (..., h, L, S)).
    """
    d_k, d_v = p["W_q"].shape[1] // h, p["W_v"].shape[1] // h
    heads, weights = [], []
    for i in range(h):
        cq, cv = slice(i * d_k, (i + 1) * d_k), slice(i * d_v, (i + 1) * d_v)
        q = query @ p["W_q"][:, cq] + p.get("b_q", np.zeros(h * d_k))[cq]
        k = key @ p["W_k"][:, cq] + p.get("b_k", np.zeros(h * d_k))[cq]
        v = value @ p["W_v"][:, cv] + p.get("b_v", np.zeros(h * d_v))[cv]
        m = None
        if mask is not None:
            m = np.asarray(mask)
            if m.ndim >= 3 and m.shape[-3] == h:                   # a per-head mask
                m = np.take(m, i, axis=-3)
            elif m.ndim >= 3:
                m = np.take(m, 0, axis=-3)                           # broadcast over heads
        out, w = attention(q, k, v, m, is_causal=is_causal)
        heads.append(out)
        weights.append(w)
    out = np.concatenate(heads, axis=-1) @ p["W_o"] + p.get("b_o", 0.0)
    return out, np.stack(weights, axis=-3)


def numerical_gradient(f, x, eps=1e-6):
    """d f / d x by central differences, one entry at a time (``f() -> float``, ``x`` changed in place
    and restored)."""
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f()
        x[i] = old - eps
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def gradients_by_definition(forward, arrays, dout, eps=1e-6):
    """Central differences of ``sum(forward() * dout)`` for each array of ``arrays`` (changed in
    place and restored): what any correct backward must return, from the forward alone."""
    return [numerical_gradient(lambda: float(np.sum(forward() * dout)), a, eps) for a in arrays]
