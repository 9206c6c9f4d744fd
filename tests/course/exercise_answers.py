"""A correct answer to each of the 13 exercises, written here from the definitions.

Nothing here imports attention_np: each answer is the exercise's sentence of the paper (or of its
docstring) in plain NumPy, computed in float64 and returned in the inputs' dtype. A test that
holds the exercises' references, and the checker's verdicts, to these answers fails when a
reference is wrong, which a test of the references against themselves cannot do.

``ANSWERS`` maps each exercise name (``attention_np.exercises.EXERCISES``) to its answer.
"""

from __future__ import annotations

import numpy as np


def _dtype(*arrays):
    """The floating dtype the answer returns: the inputs' (float32 stays float32)."""
    return np.result_type(*(np.asarray(a).dtype for a in arrays), np.float32)


def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def _sum_to(g, shape):
    """Sum ``g`` over the axes broadcasting added or stretched to reach it from ``shape``."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


# --- basics -----------------------------------------------------------------------------------

def softmax(x):
    """``p_i = exp(x_i) / sum_j exp(x_j)`` over the last axis, shifted by the row's max so that
    exp never overflows; a row of ``-inf`` only (every entry masked) gives zeros."""
    (x64,) = _f64(x)
    m = np.max(x64, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x64 - m)
    total = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return p.astype(_dtype(x))


def softmax_backward(dp, p):
    """``dx_i = sum_j dp_j dp_j/dx_i = p_i (dp_i - sum_j dp_j p_j)`` (the Jacobian
    ``diag(p) - p p^T`` applied to ``dp``)."""
    dp64, p64 = _f64(dp, p)
    return (p64 * (dp64 - np.sum(dp64 * p64, axis=-1, keepdims=True))).astype(_dtype(dp, p))


def causal_mask(L, S, align):
    """Query i may see key j when j is not after it: ``j <= i`` with the first query on the first
    key (top_left), ``j <= i + S - L`` with the last query on the last key (bottom_right)."""
    shift = {"top_left": 0, "bottom_right": S - L}[align]
    return np.arange(S)[None, :] <= np.arange(L)[:, None] + shift


def padding_mask(lengths, S):
    """Key j of sequence b is real iff ``j < lengths[b]``; shape (B, 1, S), the 1 broadcasting over
    the queries of the scores (B, L, S)."""
    return (np.arange(S)[None, :] < np.asarray(lengths)[:, None])[:, None, :]


def sinusoidal(length, d_model):
    """§3.5: ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, ``PE[pos, 2i+1] = cos(...)``."""
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(0, d_model, 2):
            angle = pos / 10000.0 ** (i / d_model)
            pe[pos, i] = np.sin(angle)
            if i + 1 < d_model:
                pe[pos, i + 1] = np.cos(angle)
    return pe


# --- Eq. (1) ----------------------------------------------------------------------------------

def _weights(q, k, mask):
    """``softmax(q k^T / sqrt(d_k))`` over the keys, blocked keys removed (float64)."""
    s = np.einsum("...ld,...sd->...ls", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    return softmax(np.where(allowed, s, -np.inf))


def attention(q, k, v, mask=None):
    """Eq. (1): ``softmax(q k^T / sqrt(d_k)) v``; a query that may see no key gets zeros."""
    q64, k64, v64 = _f64(q, k, v)
    out = np.einsum("...ls,...sd->...ld", _weights(q64, k64, mask), v64)
    return out.astype(_dtype(q, k, v))


def attention_backward(dout, q, k, v, mask=None):
    """The chain rule through Eq. (1), ``s = q k^T / sqrt(d_k)``, ``w = softmax(s)``, ``out = w v``::

        dv = w^T dout,  dw = dout v^T,  ds = softmax_backward(dw, w),
        dq = ds k / sqrt(d_k),  dk = ds^T q / sqrt(d_k)

    each summed over the axes its input was broadcast along."""
    dout64, q64, k64, v64 = _f64(dout, q, k, v)
    c = 1 / np.sqrt(q64.shape[-1])
    w = _weights(q64, k64, mask)
    dv = np.einsum("...ls,...ld->...sd", w, dout64)
    ds = softmax_backward(np.einsum("...ld,...sd->...ls", dout64, v64), w)
    dq = c * np.einsum("...ls,...sd->...ld", ds, k64)
    dk = c * np.einsum("...ls,...ld->...sd", ds, q64)
    dt = _dtype(dout, q, k, v)
    return tuple(_sum_to(g, np.shape(x)).reshape(np.shape(x)).astype(dt)
                 for g, x in ((dq, q), (dk, k), (dv, v)))


def tiled_attention(q, k, v, block_size):
    """Tiling changes the order of the sums, not the result: Eq. (1) itself."""
    return attention(q, k, v)


# --- multi-head, §3.2.2 -----------------------------------------------------------------------

def split_heads(x, num_heads):
    """(..., L, h*d) -> (..., h, L, d): head i is feature columns ``i*d:(i+1)*d``."""
    x = np.asarray(x)
    d = x.shape[-1] // num_heads
    return np.stack([x[..., i * d:(i + 1) * d] for i in range(num_heads)], axis=-3)


def merge_heads(x):
    """(..., h, L, d) -> (..., L, h*d): ``Concat(head_1, ..., head_h)`` along the features."""
    x = np.asarray(x)
    return np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-1)


def _project(x, p, name, h, i):
    """Head i's projection: ``x W_i + b_i`` with W_i the i-th block of columns of ``W``."""
    W, b = p[f"W_{name}"], p[f"b_{name}"]
    d = W.shape[1] // h
    return x @ W[:, i * d:(i + 1) * d] + b[i * d:(i + 1) * d]


def _head_mask(mask, i):
    """Head i's mask: the scores are (..., h, L, S), so a mask of 3 or more dims has the heads (h
    or 1 of them) on its axis -3; a 2-D (L, S) mask is every head's."""
    if mask is None or np.ndim(mask) < 3:
        return mask
    m = np.asarray(mask)
    return m[..., min(i, m.shape[-3] - 1), :, :]


def mha_forward(query, key, value, params, num_heads, mask=None):
    """``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O + b_o``,
    ``head_i = Attention(Q W_i^Q + b_i^Q, K W_i^K + b_i^K, V W_i^V + b_i^V)``, one head at a time."""
    x = _f64(query, key, value)
    p = {n: np.asarray(a, np.float64) for n, a in params.items()}
    h = num_heads
    heads = [attention(_project(x[0], p, "q", h, i), _project(x[1], p, "k", h, i),
                       _project(x[2], p, "v", h, i), _head_mask(mask, i)) for i in range(h)]
    out = np.concatenate(heads, axis=-1) @ p["W_o"] + p["b_o"]
    return out.astype(_dtype(query, key, value, *params.values()))


def mha_backward(dout, query, key, value, params, num_heads):
    """The chain rule through :func:`mha_forward` (no mask), one head at a time:
    ``out = C W_o + b_o`` gives ``dC = dout W_o^T``, ``dW_o = C^T dout``, ``db_o = sum dout``;
    head i's block of ``dC`` goes through :func:`attention_backward`; each projection
    ``y = x W_i + b_i`` gives ``dx += dy W_i^T``, ``dW_i = x^T dy``, ``db_i = sum dy``."""
    dout64, *x = _f64(dout, query, key, value)
    p = {n: np.asarray(a, np.float64) for n, a in params.items()}
    h = num_heads
    d_v = p["W_v"].shape[1] // h
    qs = [_project(x[0], p, "q", h, i) for i in range(h)]
    ks = [_project(x[1], p, "k", h, i) for i in range(h)]
    vs = [_project(x[2], p, "v", h, i) for i in range(h)]
    concat = np.concatenate([attention(qs[i], ks[i], vs[i]) for i in range(h)], axis=-1)

    def flat(a):                                            # (..., n, d) -> (N, d)
        return a.reshape(-1, a.shape[-1])

    grads = {n: np.zeros_like(a) for n, a in p.items()}
    grads["W_o"] = flat(concat).T @ flat(dout64)
    grads["b_o"] = flat(dout64).sum(0)
    dconcat = dout64 @ p["W_o"].T
    dx = [np.zeros_like(a) for a in x]
    for i in range(h):
        dhead = dconcat[..., i * d_v:(i + 1) * d_v]
        dyq, dyk, dyv = attention_backward(dhead, qs[i], ks[i], vs[i])
        for j, (name, dy) in enumerate((("q", dyq), ("k", dyk), ("v", dyv))):
            W = p[f"W_{name}"]
            d = W.shape[1] // h
            cols = slice(i * d, (i + 1) * d)
            dx[j] += dy @ W[:, cols].T
            grads[f"W_{name}"][:, cols] = flat(x[j]).T @ flat(dy)
            grads[f"b_{name}"][cols] = flat(dy).sum(0)
    dt = _dtype(dout, query, key, value, *params.values())
    return (*(g.astype(dt) for g in dx), {n: g.astype(dt) for n, g in grads.items()})


def decode_step(x, k_cache, v_cache, params, num_heads):
    """One step of causal self-attention with a KV cache: project the new position, append its
    key and value last, let its query see every key (none is in its future), then ``W^O``."""
    p = {n: np.asarray(a, np.float64) for n, a in params.items()}
    x64, kc, vc = _f64(x, k_cache, v_cache)
    h = num_heads
    dt = _dtype(x, k_cache, v_cache, *params.values())
    k = np.concatenate([kc, np.stack([_project(x64, p, "k", h, i) for i in range(h)], -3)], axis=-2)
    v = np.concatenate([vc, np.stack([_project(x64, p, "v", h, i) for i in range(h)], -3)], axis=-2)
    heads = [attention(_project(x64, p, "q", h, i), k[..., i, :, :], v[..., i, :, :]) for i in range(h)]
    out = np.concatenate(heads, axis=-1) @ p["W_o"] + p["b_o"]
    return out.astype(dt), k.astype(dt), v.astype(dt)


ANSWERS = {
    "softmax": softmax,
    "softmax_backward": softmax_backward,
    "causal_mask": causal_mask,
    "padding_mask": padding_mask,
    "attention": attention,
    "attention_backward": attention_backward,
    "split_heads": split_heads,
    "merge_heads": merge_heads,
    "mha_forward": mha_forward,
    "mha_backward": mha_backward,
    "tiled_attention": tiled_attention,
    "decode_step": decode_step,
    "sinusoidal": sinusoidal,
}
