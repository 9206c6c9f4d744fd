"""Exercises beyond the paper: the online-softmax tiled forward and one KV-cache decode step."""

from __future__ import annotations

import numpy as np

from attention_np.exercises import generate
from attention_np.exercises.checker import D_MODEL_HINT, SCALE_HINT, Case, Exercise, Mistake
from attention_np.exercises.multihead_exercises import example_params
from attention_np.kernels.tiled import flash_attention_forward
from attention_np.paper.attention import sdpa_forward
from attention_np.paper.heads import merge_heads, split_heads


def ref_tiled_attention(q, k, v, block_size):
    """Eq. (1) over key blocks of ``block_size`` with an online softmax; q (..., L, d_k),
    k (..., S, d_k), v (..., S, d_v) -> (..., L, d_v)."""
    return flash_attention_forward(q, k, v, block_size=block_size)[0]


def _tiled_inputs(rng, z, key, family):
    L, S, d_k, d_v, batch = z["L"], z["S"], z["d_k"], z["d_v"], z["batch"]
    q, k = rng.normal(size=(*batch, L, d_k)), rng.normal(size=(*batch, S, d_k))
    unit = np.sqrt(d_k) / d_k                        # k entries of this size add ~mean(q) to a score
    if family == "huge":
        q, k = 30 * q, 30 * k
    elif family in ("peak", "later_larger", "low"):
        q = np.abs(q) + 0.5 if family != "low" else np.ones_like(q)
        if family == "peak":                         # one key at a random position ~1e3 above the rest
            k[..., int(rng.integers(S)), :] += 1000 * unit
        elif family == "later_larger":               # the scores grow block after block: the max moves
            k = k + 300 * unit * np.arange(S)[:, None]
        else:                                        # every score near -110 or -240
            k = rng.choice([-110.0, -240.0]) * unit + 0.2 * k
    elif family == "opposite":                       # one row's max in the last block, another's in the first
        q = np.where(np.arange(L)[:, None] % 2 == 0, 1.0, -1.0) * np.ones((*batch, L, d_k))
        k = 200 * unit * np.arange(S)[:, None] + 0.1 * k
    v = rng.normal(size=(*batch, S, d_v))
    return (*(a.astype(z["dtype"]) for a in (q, k, v)), z["block_size"])


TILED_SPEC = generate.Spec(
    "tiled_attention", tuple(generate.Axis(n, high=hi) for n, hi in (
        ("L", 4), ("S", 11), ("d_k", 4), ("d_v", 4), ("block_size", 6))),
    differ=(("L", "S"), ("d_k", "d_v"), ("block_size", "S")), equal=(("block_size", "S"),), lead=3,
    conditions=(("block_size divides S", lambda z: z["S"] % z["block_size"] == 0),),
    build=_tiled_inputs, measure=lambda a: {
        "L": a[0].shape[-2], "S": a[1].shape[-2], "d_k": a[0].shape[-1], "d_v": a[2].shape[-1],
        "block_size": a[3], "batch": a[0].shape[:-2], "dtype": a[0].dtype},
    clauses=(generate.Clause("shapes"), generate.Clause("block_size"),
             generate.Clause("extreme", ("huge", "peak", "later_larger", "low")),
             generate.Clause("per_query_max", ("opposite",), pins={},
                             require=lambda z: z["L"] >= 2 and z["S"] > z["block_size"],
                             excludes=("L=1", "S=1", "block_size>S", "block_size=S")),
             generate.Clause("returns")))


def _tiled_cases(seed=8):
    rng = np.random.default_rng(seed)
    return generate.draw(TILED_SPEC, seed, None if seed == 8 else 8) + [
        Case("per-query maxima: one row's max in the last block, another's in the first",
             _opposite_rows(rng), clauses=("per_query_max",)),
        Case("float32, every score of a row near -110", _low_scores(rng, -110.0), dtype=np.float32,
             clauses=("extreme",)),
        Case("float32, scores near -240", _low_scores(rng, -240.0), dtype=np.float32, clauses=("extreme",)),
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
    ref_tiled_attention, _tiled_cases, spec=TILED_SPEC, mistakes=[
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


def _decode_inputs(rng, z, key, family):
    B, h, t, dt = z["B"], z["h"], z["t"], z["dtype"]
    p = example_params(rng, z["d_model"], h, d_k=z["d_k"], d_v=z["d_v"], dtype=dt)
    c = 30 if family == "huge" else 1                    # scores ~1e3: exp overflows unless shifted
    return ((c * rng.normal(size=(B, 1, z["d_model"]))).astype(dt),
            (c * rng.normal(size=(B, h, t, z["d_k"]))).astype(dt),
            rng.normal(size=(B, h, t, z["d_v"])).astype(dt), p, h)


DECODE_SPEC = generate.Spec(
    "decode_step", tuple(generate.Axis(n, low=lo, high=hi) for n, lo, hi in (
        ("B", 1, 3), ("d_model", 1, 6), ("h", 1, 3), ("t", 0, 4), ("d_k", 1, 3), ("d_v", 1, 3))),
    differ=(("d_k", "d_v"), ("h*d_k", "d_model")), build=_decode_inputs,
    measure=lambda a: {"B": a[0].shape[0], "d_model": a[0].shape[-1], "h": a[4], "t": a[1].shape[-2],
                       "d_k": a[1].shape[-1], "d_v": a[2].shape[-1], "h*d_k": a[3]["W_q"].shape[1],
                       "dtype": a[0].dtype},
    clauses=(generate.Clause("inputs"), generate.Clause("empty_cache", pins={"t": 0}),
             generate.Clause("extreme", ("huge",)), generate.Clause("returns")))


def _decode_cases(seed=9):
    return generate.draw(DECODE_SPEC, seed, None if seed == 9 else 9)


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
    ref_decode_step, _decode_cases, outputs=("out", "k_cache", "v_cache"), spec=DECODE_SPEC, mistakes=[
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
