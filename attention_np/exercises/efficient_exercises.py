"""Exercises beyond the paper: the online-softmax tiled forward and one KV-cache decode step."""

from __future__ import annotations

import numpy as np

from attention_np.exercises.checker import D_MODEL_HINT, SCALE_HINT, Case, Exercise, Mistake
from attention_np.exercises.multihead_exercises import example_params
from attention_np.kernels.tiled import flash_attention_forward
from attention_np.paper.attention import sdpa_forward
from attention_np.paper.heads import merge_heads, split_heads


def ref_tiled_attention(q, k, v, block_size):
    """Eq. (1) over key blocks of ``block_size`` with an online softmax; q (..., L, d_k),
    k (..., S, d_k), v (..., S, d_v) -> (..., L, d_v)."""
    return flash_attention_forward(q, k, v, block_size=block_size)[0]


def _tiled_cases(seed=8):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    qb, kb, vb = (rng.normal(size=(2, 5, 3)) for _ in range(3))
    grow = np.linspace(0, 40, 10)[:, None] * np.ones((1, 4))        # later keys score higher
    return [
        Case("L=3, S=10, block 4 (a partial last block)", (q, k, v, 4), clauses=("block_size", "returns")),
        Case("batch 2, block 2", (qb, kb, vb, 2), clauses=("shapes",)),
        Case("one block (block_size >= S)", (q, k, v, 16), clauses=("block_size",)),
        Case("scores growing block after block (the max moves)", (q, grow + k, v, 3),
             clauses=("extreme",)),
        Case("per-query maxima: one row's max in the last block, another's in the first",
             _opposite_rows(rng), clauses=("per_query_max",)),
        Case("huge logits", (30 * q, 30 * k, v, 4), clauses=("extreme",)),
        Case("float32", (q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), 4),
             dtype=np.float32, clauses=("dtype",)),
        Case("float32, every score of a row near -110", _low_scores(rng, -110.0), dtype=np.float32,
             clauses=("extreme",)),
        Case("float32, scores near -240", _low_scores(rng, -240.0), dtype=np.float32, clauses=("extreme",)),
        Case("L = 1 (one query)", (q[:1], k, v, 3), clauses=("shapes",)),
    ]


def _opposite_rows(rng, S=10, d=4):
    """q, k, v, 3 where row 0's scores climb from 0 to ~900 over the keys and row 1's fall from 0
    to ~-900: row 0's max is in the last block, row 1's in the first. A running max shared by
    the rows leaves row 1 with exp(-900) = 0 everywhere (0 / 0)."""
    q = np.array([[1.0] * d, [-1.0] * d])
    k = (np.arange(S)[:, None] * 100.0 * 2 / d) * np.ones((1, d)) + 0.1 * rng.normal(size=(S, d))
    return q, k, rng.normal(size=(S, 2)), 3


def _low_scores(rng, level, L=2, S=6, d=4):
    """float32 q, k, v whose scores q k^T / sqrt(d) are all within ~1 of ``level``."""
    q = np.ones((L, d))
    k = level * np.sqrt(d) / d + 0.2 * rng.normal(size=(S, d))
    return (q.astype(np.float32), k.astype(np.float32), rng.normal(size=(S, 2)).astype(np.float32), 2)


def _tiled(q, k, v, B, *, rescale_l=True, rescale_acc=True, update_max=True, divide=True,
           scaled=True):
    scale = float(1 / np.sqrt(q.shape[-1])) if scaled else 1.0
    S = k.shape[-2]
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)   # running max   (..., L, 1)
    l = np.zeros_like(m)                                       # running sum   (..., L, 1)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for j in range(0, S, B):                                   # loop over key blocks (not positions)
        s = q @ np.swapaxes(k[..., j:j + B, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(-1, keepdims=True)) if (update_max or j == 0) else m
        p = np.exp(s - m_new)
        alpha = np.exp(m - m_new)
        l = (alpha * l if rescale_l else l) + p.sum(-1, keepdims=True)
        acc = (alpha * acc if rescale_acc else acc) + p @ v[..., j:j + B, :]
        m = m_new
    return acc / l if divide else acc


TILED_ATTENTION = Exercise(
    "tiled_attention", "tiled_attention(q, k, v, block_size)",
    "Eq. (1) without the (L, S) matrix: keep a running max m, a running sum l and a running "
    "output per query, and rescale them by exp(m_old - m_new) when the max grows",
    ref_tiled_attention, _tiled_cases, [
        Mistake("online softmax without the rescale of the running sum",
                lambda *a: _tiled(*a, rescale_l=False),
                "When the max grows, every exponent summed so far was taken against the old max: "
                "the sum must be multiplied by exp(m_old - m_new) too."),
        Mistake("online softmax without the rescale of the output accumulator",
                lambda *a: _tiled(*a, rescale_acc=False),
                "The running output is a sum of exp(s - m_old) v: when m changes, it changes too."),
        Mistake("running max never updated (max of the first block only)",
                lambda *a: _tiled(*a, update_max=False),
                "A later block can hold larger scores than the first: exp overflows unless the "
                "max keeps up."),
        Mistake("no 1/sqrt(d_k)", lambda *a: _tiled(*a, scaled=False), SCALE_HINT),
        Mistake("forgot the final division by the running sum",
                lambda *a: _tiled(*a, divide=False),
                "The accumulator holds sum_j exp(s_j - m) v_j; softmax divides by sum_j exp(s_j - m)."),
    ])


# ---------------------------------------------------------------- KV-cache decode step
def ref_decode_step(x, k_cache, v_cache, params, num_heads):
    """One decoding step of causal multi-head self-attention with a KV cache.

    x (B, 1, d_model), the new position; k_cache (B, h, t, d_k), v_cache (B, h, t, d_v), the
    projected keys and values of the t earlier positions. Returns (out (B, 1, d_model),
    k_cache (B, h, t+1, d_k), v_cache (B, h, t+1, d_v)), the new position appended last.
    """
    p, h = params, num_heads
    q = split_heads(x @ p["W_q"] + p["b_q"], h)                             # (B, h, 1, d_k)
    k = np.concatenate([k_cache, split_heads(x @ p["W_k"] + p["b_k"], h)], axis=-2)
    v = np.concatenate([v_cache, split_heads(x @ p["W_v"] + p["b_v"], h)], axis=-2)
    heads = sdpa_forward(q, k, v)[0]               # the newest position may see every key
    return merge_heads(heads) @ p["W_o"] + p["b_o"], k, v


def _decode_cases(seed=9):
    rng = np.random.default_rng(seed)
    p = example_params(rng, 8, 2)
    x = rng.normal(size=(2, 1, 8))
    kc, vc = rng.normal(size=(2, 2, 4, 4)), rng.normal(size=(2, 2, 4, 4))
    return [Case("B=2, h=2, t=4 cached positions", (x, kc, vc, p, 2), clauses=("inputs", "returns")),
            Case("the first step (empty cache)", (x, kc[..., :0, :], vc[..., :0, :], p, 2),
                 clauses=("empty_cache",)),
            Case("float32", (x.astype(np.float32), kc.astype(np.float32), vc.astype(np.float32),
                             {n: a.astype(np.float32) for n, a in p.items()}, 2), dtype=np.float32,
                 clauses=("dtype",))]


def _decode(x, kc, vc, p, h, *, append=True, top_left=False, out_proj=True, prepend=False,
            scale_dm=False):
    q = split_heads(x @ p["W_q"] + p["b_q"], h)
    kn, vn = split_heads(x @ p["W_k"] + p["b_k"], h), split_heads(x @ p["W_v"] + p["b_v"], h)
    k = np.concatenate([kn, kc] if prepend else [kc, kn], axis=-2)
    v = np.concatenate([vn, vc] if prepend else [vc, vn], axis=-2)
    scale = float(1 / np.sqrt(x.shape[-1])) if scale_dm else None
    if append:
        heads = sdpa_forward(q, k, v, is_causal=top_left, scale=scale)[0]
    else:
        if not kc.shape[-2]:
            raise ValueError("attention over an empty cache")
        heads = sdpa_forward(q, kc, vc)[0]
    out = merge_heads(heads)
    return (out @ p["W_o"] + p["b_o"] if out_proj else out), k, v


DECODE_STEP = Exercise(
    "decode_step", "decode_step(x, k_cache, v_cache, params, num_heads)",
    "The decoder is auto-regressive (§3): position t attends to positions <= t, whose keys and "
    "values were computed at earlier steps and can be cached",
    ref_decode_step, _decode_cases, outputs=("out", "k_cache", "v_cache"), mistakes=[
        Mistake("attended before appending the new key and value",
                lambda *a: _decode(*a, append=False),
                "Position t may attend to itself (j <= t): append its key and value first."),
        Mistake("causal mask wrongly aligned (top-left with one query)",
                lambda *a: _decode(*a, top_left=True),
                "With L = 1 query and S = t + 1 keys, a top-left causal mask lets the query see "
                "key 0 only. The one query is the LAST position: bottom-right, i.e. no mask."),
        Mistake("scaled by sqrt(d_model) instead of sqrt(d_k)", lambda *a: _decode(*a, scale_dm=True),
                D_MODEL_HINT),
        Mistake("output projection forgotten", lambda *a: _decode(*a, out_proj=False),
                "The decode step computes the same MultiHead(...) as the full forward: ... W^O."),
        Mistake("new key and value prepended to the cache", lambda *a: _decode(*a, prepend=True),
                "The output is right (attention is order-blind without a mask) but the cache "
                "must stay in position order: append at the end."),
    ])
