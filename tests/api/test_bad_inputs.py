"""Bad input, table-driven: one row per argument of each public function and kind of badness.

Each row calls a public function with one bad argument (everything else valid) and asserts the
exception type and that the message names the argument. ``test_row_count`` reports the table's
size and the split of outcomes (the numbers quoted in the issue's closing note).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import attention_np as an
from attention_np.kernels import reference
from attention_np.kernels.tiled import flash_attention_backward, flash_attention_forward
from attention_np.studies.additive import additive_attention_backward, additive_attention_forward

R = np.random.default_rng(0)
Q, K, V = R.standard_normal((2, 3, 4)), R.standard_normal((2, 5, 4)), R.standard_normal((2, 5, 6))
DOUT = R.standard_normal((2, 3, 6))
X = R.standard_normal((2, 3, 8))
P = an.init_mha_params(8, 2, rng=0)
PS, PS3 = dict(P, sinks=np.zeros(2)), dict(P, sinks=np.zeros(3))      # sink logits: right, wrong h
P32 = {n: p.astype(np.float32) for n, p in P.items()}
AP = an.init_additive_params(4, rng=0)
W, BIAS = R.standard_normal((8, 5)), np.zeros(5)

ATTENTION = {
    "sdpa_forward": an.sdpa_forward,
    "reference.sdpa_forward": reference.sdpa_forward,
    "flash_attention_forward": flash_attention_forward,
    "scaled_dot_product_attention": an.scaled_dot_product_attention,
    "additive_attention_forward": lambda q, k, v, mask=None, **kw: additive_attention_forward(
        q, k, v, AP, mask, **{n: a for n, a in kw.items() if n == "is_causal"}),
}
BAD_ARRAYS = [  # (what, value maker from the good array, exception)
    ("str", lambda a: "abc", TypeError),
    ("None", lambda a: None, TypeError),
    ("int dtype", lambda a: a.astype(np.int64), TypeError),
    ("bool dtype", lambda a: a > 0, TypeError),
    ("1-D", lambda a: a[0, 0], ValueError),
    ("0-d", lambda a: a[0, 0, 0], ValueError),
    ("float32 vs float64", lambda a: a.astype(np.float32), TypeError),
]
BAD_SCALES = [("str", "abc", TypeError), ("array", np.ones(2), TypeError),
              ("NaN", float("nan"), ValueError), ("inf", float("inf"), ValueError),
              ("-inf", -np.inf, ValueError), ("bool", True, TypeError), ("list", [1.0], TypeError)]
# (None is "not given" in both homes of dropout_p, the keyword and the spec: tests/api/test_one_home.py)
BAD_DROPOUT = [("bool", True, TypeError), ("NaN", np.nan, ValueError),
               ("1.5", 1.5, ValueError), ("-0.1", -0.1, ValueError), ("str", "0.1", TypeError)]
BAD_MASKS = [("float", np.ones((3, 5)), TypeError), ("int", np.ones((3, 5), int), TypeError),
             ("wrong L, S", np.ones((4, 5), bool), ValueError),
             ("extra batch that does not broadcast", np.ones((3, 3, 5), bool), ValueError)]


def _rows():
    rows = []
    good = {"q": Q, "k": K, "v": V}
    for fname, fn in ATTENTION.items():
        for arg in ("q", "k", "v"):
            for what, make, exc in BAD_ARRAYS:
                args = dict(good, **{arg: make(good[arg])})
                rows.append((f"{fname}-{arg}-{what}", lambda f=fn, a=args: f(**a), exc, arg))
        for what, m, exc in BAD_MASKS:
            rows.append((f"{fname}-mask-{what}", lambda f=fn, m=m: f(Q, K, V, mask=m), exc, "mask"))
        if not fname.startswith("additive"):
            for what, s, exc in BAD_SCALES:
                rows.append((f"{fname}-scale-{what}", lambda f=fn, s=s: f(Q, K, V, scale=s),
                             exc, "scale"))
    # shapes that disagree between q, k, v
    for fname, fn in ATTENTION.items():
        rows.append((f"{fname}-S differs", lambda f=fn: f(Q, K, V[:, :4]), ValueError, "S="))
    for fname in ("sdpa_forward", "reference.sdpa_forward", "flash_attention_forward"):
        rows.append((f"{fname}-d_k differs", lambda f=ATTENTION[fname]: f(Q, K[..., :3], V),
                     ValueError, "d_k"))
    for what, b, exc in [("bool", np.ones((3, 5), bool), TypeError),
                         ("wrong shape", np.zeros((4, 5)), ValueError)]:
        for fname in ("sdpa_forward", "reference.sdpa_forward"):
            rows.append((f"{fname}-bias-{what}", lambda f=ATTENTION[fname], b=b: f(Q, K, V, bias=b),
                         exc, "bias"))
    for what, p, exc in BAD_DROPOUT:
        rows.append((f"sdpa_forward-dropout_p-{what}", lambda p=p: an.sdpa_forward(Q, K, V,
                                                                                   spec=an.AttentionSpec(dropout_p=p)),
                     exc, "dropout_p"))
        rows.append((f"mha_forward-dropout_p-{what}",
                     lambda p=p: an.mha_forward(X, X, X, P, spec=an.AttentionSpec(dropout_p=p), num_heads=2),
                     exc, "dropout_p"))
    rows += [
        ("sdpa_forward-rng-str", lambda: an.sdpa_forward(
            Q, K, V, rng="x", spec=an.AttentionSpec(dropout_p=0.1)), TypeError, "rng"),
        ("sdpa_forward-dropout_mask-float",
         lambda: an.sdpa_forward(Q, K, V, dropout_mask=np.ones((3, 5)),
                                 spec=an.AttentionSpec(dropout_p=0.1)), TypeError,
         "dropout_mask"),
        ("flash-block_size-0", lambda: flash_attention_forward(Q, K, V, block_size=0), ValueError,
         "block_size"),
        ("flash-block_size-float", lambda: flash_attention_forward(Q, K, V, block_size=2.0), ValueError,
         "block_size"),
    ]
    # the variants: windows, lengths, soft-capping, sinks, RoPE, position biases, decode options
    # (the fused and tiled kernels take the window and soft-cap in the spec, checked when it is made)
    for fname in ("sdpa_forward", "reference.sdpa_forward", "flash_attention_forward"):
        for what, w in (("one number", 2), ("negative", (-1, 0)), ("float", (1.5, 0)), ("triple", (1, 1, 1))):
            f = reference.sdpa_forward if fname.startswith("reference") else ATTENTION[fname]
            rows.append((f"{fname}-window-{what}",
                         lambda f=f, w=w: f(Q, K, V, spec=an.AttentionSpec(window=w)), ValueError, "window"))
    for what, kw in (("q_lengths float", dict(q_lengths=np.array([1.0, 2.0]))),
                     ("kv_lengths > S", dict(kv_lengths=np.array([1, 6]))),
                     ("kv_lengths negative", dict(kv_lengths=np.array([-1, 2])))):
        rows.append((f"lengths_mask-{what}", lambda kw=kw: an.lengths_mask(**kw, L=3, S=5),
                     ValueError, what.split()[0]))
    for what, c, exc in (("0", 0.0, ValueError), ("negative", -2.0, ValueError), ("inf", np.inf, ValueError),
                         ("str", "2", TypeError), ("bool", True, TypeError)):
        for fname in ("sdpa_forward", "flash_attention_forward"):
            rows.append((f"{fname}-softcap-{what}",
                         lambda f=ATTENTION[fname], c=c: f(Q, K, V, spec=an.AttentionSpec(softcap=c)),
                         exc, "softcap"))
    Qh = Q[:, None]
    rows += [
        ("sdpa_sinks_forward-sinks-wrong h", lambda: an.sdpa_sinks_forward(Qh, Qh, Qh, np.zeros(2)),
         ValueError, "sinks"),
        ("sdpa_sinks_forward-sinks-int", lambda: an.sdpa_sinks_forward(Qh, Qh, Qh, np.zeros(1, int)),
         TypeError, "sinks"),
        ("apply_rope-positions-float", lambda: an.apply_rope(Q, np.arange(3.0)), TypeError, "positions"),
        ("apply_rope-positions-length", lambda: an.apply_rope(Q, np.arange(4)), ValueError, "positions"),
        ("apply_rope-layout", lambda: an.apply_rope(Q, np.arange(3), layout="neox"), ValueError, "layout"),
        ("apply_rope-rotary_dim-odd", lambda: an.apply_rope(Q, np.arange(3), rotary_dim=3), ValueError,
         "rotary_dim"),
        ("apply_rope-theta-0", lambda: an.apply_rope(Q, np.arange(3), theta=0.0), ValueError, "theta"),
        ("rope_angles-d-odd", lambda: an.rope_angles(np.arange(3), 5), ValueError, "d"),
        ("sliding_window_mask-left-negative", lambda: an.sliding_window_mask(3, 4, left=-1), ValueError,
         "left"),
        ("alibi_slopes-0", lambda: an.alibi_slopes(0), ValueError, "num_heads"),
        ("t5_relative_buckets-float", lambda: an.t5_relative_buckets(np.ones(3)), TypeError,
         "relative_position"),
        ("relative_position_bias-bucket-out-of-range",
         lambda: an.relative_position_bias(np.ones((4, 2)), np.array([[4]])), ValueError, "buckets"),
        ("mha_forward-rope-str", lambda: an.mha_forward(X, X, X, P, spec=an.AttentionSpec(rope="half"),
                                                        num_heads=2),
         ValueError, "rope"),
        ("mha_forward-qk_norm-one-weight", lambda: an.mha_forward(X, X, X, dict(P, q_norm=np.ones(4)),
                                                                  num_heads=2), ValueError, "k_norm"),
        ("flash-sinks-wrong h", lambda: flash_attention_forward(Qh, Qh, Qh, sinks=np.zeros(2)),
         ValueError, "sinks"),
        ("flash-sinks-int", lambda: flash_attention_forward(Qh, Qh, Qh, sinks=np.zeros(1, int)),
         TypeError, "sinks"),
        ("flash-sinks-no-head-axis", lambda: flash_attention_forward(Q[0], Q[0], Q[0], sinks=np.zeros(3)),
         ValueError, "sinks"),
        ("mha_forward-sinks-wrong-shape", lambda: an.mha_forward(X, X, X, PS3, num_heads=2),
         ValueError, "sinks"),
        ("mha_forward-sinks-int", lambda: an.mha_forward(X, X, X, dict(P, sinks=np.zeros(2, int)),
                                                         num_heads=2), TypeError, "sinks"),
        ("mha_forward-sinks-float32", lambda: an.mha_forward(X, X, X, dict(P, sinks=np.zeros(2, np.float32)),
                                                             num_heads=2), TypeError, "sinks"),
        ("mha_forward-sinks-reference", lambda: an.mha_forward(
            X, X, X, PS, spec=an.AttentionSpec(kernel="reference"), num_heads=2), ValueError, "sinks"),
        ("mha_forward-sinks-dropout", lambda: an.mha_forward(
            X, X, X, PS, spec=an.AttentionSpec(dropout_p=0.1), num_heads=2), ValueError, "sinks"),
        ("mha_decode_step-sinks-wrong-shape", lambda: an.mha_decode_step(X, PS3, an.KVCache(4), num_heads=2),
         ValueError, "sinks"),
        ("mha_decode_step-mask-float", lambda: an.mha_decode_step(X, P, an.KVCache(4), num_heads=2,
                                                                  mask=np.ones((1, 3))), TypeError, "mask"),
        ("mha_decode_step-bias-shape", lambda: an.mha_decode_step(X, P, an.KVCache(4), num_heads=2,
                                                                  bias=np.ones((3, 5))), ValueError, "bias"),
    ]
    # backwards: dout and cache
    caches = {
        "sdpa_backward": (an.sdpa_backward, an.sdpa_forward(Q, K, V)[1], DOUT),
        "reference.sdpa_backward": (reference.sdpa_backward, reference.sdpa_forward(Q, K, V)[1], DOUT),
        "flash_attention_backward": (flash_attention_backward, flash_attention_forward(Q, K, V)[1], DOUT),
        "additive_attention_backward": (additive_attention_backward,
                                        additive_attention_forward(Q, K, V, AP)[1], DOUT),
        "mha_backward": (an.mha_backward, an.mha_forward(X, X, X, P, num_heads=2)[1], X),
    }
    for fname, (bwd, cache, dout) in caches.items():
        rows += [
            (f"{fname}-dout-None", lambda b=bwd, c=cache: b(None, c), TypeError, "dout"),
            (f"{fname}-dout-str", lambda b=bwd, c=cache: b("abc", c), TypeError, "dout"),
            (f"{fname}-dout-shape", lambda b=bwd, c=cache, d=dout: b(d[:, :2], c), ValueError, "dout"),
            (f"{fname}-dout-float32", lambda b=bwd, c=cache, d=dout: b(d.astype(np.float32), c),
             TypeError, "dout"),
            (f"{fname}-dout-int", lambda b=bwd, c=cache, d=dout: b(d.astype(int), c), TypeError, "dout"),
            (f"{fname}-cache-None", lambda b=bwd, d=dout: b(d, None), TypeError, "cache"),
            (f"{fname}-cache-dict", lambda b=bwd, d=dout: b(d, {}), TypeError, "cache"),
        ]
        for other, (_, other_cache, _) in caches.items():
            if other != fname:
                rows.append((f"{fname}-cache-from-{other}",
                             lambda b=bwd, c=other_cache, d=dout: b(d, c), TypeError, "forward"))
    # multi-head
    rows += [
        ("mha_forward-params-None", lambda: an.mha_forward(X, X, X, None, num_heads=2), TypeError, "params"),
        ("mha_forward-params-list", lambda: an.mha_forward(X, X, X, [P["W_q"]], num_heads=2),
         TypeError, "params"),
        ("mha_forward-params-list-entry",
         lambda: an.mha_forward(X, X, X, dict(P, W_q=P["W_q"].tolist()), num_heads=2), TypeError, "W_q"),
        ("mha_forward-params-missing", lambda: an.mha_forward(
            X, X, X, {n: p for n, p in P.items() if n != "W_o"}, num_heads=2), ValueError, "W_o"),
        ("mha_forward-params-float32", lambda: an.mha_forward(X, X, X, P32, num_heads=2),
         TypeError, "params"),
        ("mha_forward-num_heads-0", lambda: an.mha_forward(X, X, X, P, num_heads=0), ValueError, "num_heads"),
        ("mha_forward-num_heads-3", lambda: an.mha_forward(X, X, X, P, num_heads=3), ValueError, "num_heads"),
        ("mha_forward-num_heads-str", lambda: an.mha_forward(X, X, X, P, num_heads="2"),
         ValueError, "num_heads"),
        ("mha_forward-query-1-D", lambda: an.mha_forward(X[0, 0], X, X, P, num_heads=2), ValueError, "query"),
        ("mha_forward-key-int", lambda: an.mha_forward(X, X.astype(int), X, P, num_heads=2),
         TypeError, "key"),
        ("mha_forward-value-width", lambda: an.mha_forward(X, X, X[..., :7], P, num_heads=2),
         ValueError, "value"),
        ("mha_forward-kernel", lambda: an.mha_forward(X, X, X, P, spec=an.AttentionSpec(kernel="fast"),
                                                      num_heads=2),
         ValueError, "kernel"),
        ("mha_forward-scale-NaN", lambda: an.mha_forward(X, X, X, P, num_heads=2, scale=np.nan),
         ValueError, "scale"),
        ("mha_forward-mask-float", lambda: an.mha_forward(X, X, X, P, num_heads=2, mask=np.ones((3, 3))),
         TypeError, "mask"),
        ("init_mha_params-d_model-0", lambda: an.init_mha_params(0, 2), ValueError, "d_model"),
        ("init_mha_params-num_heads-0", lambda: an.init_mha_params(8, 0), ValueError, "num_heads"),
        ("init_mha_params-not-divisible", lambda: an.init_mha_params(8, 3), ValueError, "num_heads"),
        ("init_mha_params-d_k-0", lambda: an.init_mha_params(8, 2, d_k=0), ValueError, "d_k"),
        ("init_mha_params-d_v-float", lambda: an.init_mha_params(8, 2, d_v=2.0), ValueError, "d_v"),
        ("init_mha_params-kdim-0", lambda: an.init_mha_params(8, 2, kdim=0), ValueError, "kdim"),
        ("init_mha_params-num_kv_heads-0", lambda: an.init_mha_params(8, 2, num_kv_heads=0), ValueError,
         "num_kv_heads"),
        ("init_mha_params-num_kv_heads-3", lambda: an.init_mha_params(12, 6, num_kv_heads=4), ValueError,
         "num_kv_heads"),
        ("init_mha_params-dtype-int", lambda: an.init_mha_params(8, 2, dtype=int), TypeError, "dtype"),
        ("init_mha_params-qk_norm-str", lambda: an.init_mha_params(8, 2, qk_norm="yes"), TypeError,
         "qk_norm"),
        ("init_mha_params-sinks-array", lambda: an.init_mha_params(8, 2, sinks=np.zeros(2)),
         TypeError, "sinks"),
        ("init_mha_params-rng-str", lambda: an.init_mha_params(8, 2, rng="x"), TypeError, "rng"),
    ]
    # linear
    rows += [
        ("linear_forward-W-wrong rows", lambda: an.linear_forward(X, W[:5]), ValueError, "W"),
        ("linear_forward-W-1-D", lambda: an.linear_forward(X, W[:, 0]), ValueError, "W"),
        ("linear_forward-W-int", lambda: an.linear_forward(X, W.astype(int)), TypeError, "W"),
        ("linear_forward-W-float32", lambda: an.linear_forward(X, W.astype(np.float32)), TypeError, "W"),
        ("linear_forward-x-int", lambda: an.linear_forward(X.astype(int), W), TypeError, "x"),
        ("linear_forward-x-0-d", lambda: an.linear_forward(np.float64(1), W), ValueError, "x"),
        ("linear_forward-x-None", lambda: an.linear_forward(None, W), TypeError, "x"),
        ("linear_forward-b-shape", lambda: an.linear_forward(X, W, np.zeros(4)), ValueError, "b"),
        ("linear_forward-b-float32", lambda: an.linear_forward(X, W, BIAS.astype(np.float32)),
         TypeError, "b"),
        ("linear_backward-dy-shape", lambda: an.linear_backward(np.ones((2, 3, 4)), X, W, True),
         ValueError, "dy"),
        ("linear_backward-dy-float32", lambda: an.linear_backward(
            np.ones((2, 3, 5), np.float32), X, W, True), TypeError, "dy"),
        ("linear_backward-W-shape", lambda: an.linear_backward(np.ones((2, 3, 5)), X, W[:4], True),
         ValueError, "W"),
        ("linear_backward-has_bias-None", lambda: an.linear_backward(np.ones((2, 3, 5)), X, W, None),
         TypeError, "has_bias"),
        ("glorot_uniform-fan_in-0", lambda: an.glorot_uniform(np.random.default_rng(0), 0, 3),
         ValueError, "fan_in"),
        ("glorot_uniform-fan_out-0", lambda: an.glorot_uniform(np.random.default_rng(0), 3, 0),
         ValueError, "fan_out"),
        ("glorot_uniform-fans-0-0", lambda: an.glorot_uniform(np.random.default_rng(0), 0, 0),
         ValueError, "fan_in"),
        ("glorot_uniform-rng-int", lambda: an.glorot_uniform(0, 3, 3), TypeError, "rng"),
    ]
    # softmax
    rows += [
        ("softmax-x-0-d", lambda: an.softmax(np.float64(1.0)), ValueError, "x"),
        ("softmax-x-int", lambda: an.softmax(np.arange(3)), TypeError, "x"),
        ("softmax-x-str", lambda: an.softmax("abc"), TypeError, "x"),
        ("softmax-axis-out of range", lambda: an.softmax(Q, axis=3), ValueError, "axis"),
        ("softmax-axis-float", lambda: an.softmax(Q, axis=1.0), ValueError, "axis"),
        ("softmax-where-float", lambda: an.softmax(Q, where=np.ones(4)), TypeError, "where"),
        ("softmax-where-shape", lambda: an.softmax(Q, where=np.ones(5, bool)), ValueError, "where"),
        ("softmax_backward-dp-shape", lambda: an.softmax_backward(Q[0], Q), ValueError, "dp"),
        ("softmax_backward-dp-float32", lambda: an.softmax_backward(Q.astype(np.float32), Q),
         TypeError, "dp"),
        ("softmax_backward-p-int", lambda: an.softmax_backward(Q, Q.astype(int)), TypeError, "p"),
        ("softmax_backward-axis", lambda: an.softmax_backward(Q, Q, axis=5), ValueError, "axis"),
    ]
    # masks and heads
    rows += [
        ("causal_mask-L--1", lambda: an.causal_mask(-1), ValueError, "L"),
        ("causal_mask-L-float", lambda: an.causal_mask(2.0), ValueError, "L"),
        ("causal_mask-S--1", lambda: an.causal_mask(2, -1), ValueError, "S"),
        ("causal_mask-align", lambda: an.causal_mask(2, align="left"), ValueError, "align"),
        ("padding_mask-lengths-float", lambda: an.padding_mask([1.5, 2.0]), ValueError, "lengths"),
        ("padding_mask-lengths-2-D", lambda: an.padding_mask([[1, 2]]), ValueError, "lengths"),
        ("padding_mask-lengths-negative", lambda: an.padding_mask([-1, 2]), ValueError, "lengths"),
        ("padding_mask-S-too small", lambda: an.padding_mask([3, 2], S=2), ValueError, "S="),
        ("mask_from_blocked-float", lambda: an.mask_from_blocked(np.ones(3)), TypeError, "blocked"),
        ("split_heads-num_heads-3", lambda: an.split_heads(X, 3), ValueError, "num_heads"),
        ("split_heads-num_heads-0", lambda: an.split_heads(X, 0), ValueError, "num_heads"),
        ("split_heads-x-1-D", lambda: an.split_heads(X[0, 0], 2), ValueError, "x"),
        ("merge_heads-x-2-D", lambda: an.merge_heads(X[0]), ValueError, "x"),
    ]
    # KV cache
    rows += [
        ("KVCache-max_len-0", lambda: an.KVCache(0), ValueError, "max_len"),
        ("KVCache-max_len-None", lambda: an.KVCache(None), ValueError, "max_len"),
        ("KVCache.k-empty", lambda: an.KVCache(3).k, ValueError, "KVCache.k"),
        ("KVCache.v-empty", lambda: an.KVCache(3).v, ValueError, "KVCache.v"),
        ("KVCache.append-k_new-1-D", lambda: an.KVCache(3).append(np.ones(4), np.ones(4)), ValueError,
         "k_new"),
        ("KVCache.append-k_new-int", lambda: an.KVCache(3).append(np.ones((1, 4), int), np.ones((1, 4))),
         TypeError, "k_new"),
        ("KVCache.append-dtype mismatch on empty cache",
         lambda: an.KVCache(3).append(np.ones((1, 4)), np.ones((1, 4), np.float32)), TypeError, "v_new"),
        ("KVCache.append-T mismatch", lambda: an.KVCache(3).append(np.ones((1, 4)), np.ones((2, 4))),
         ValueError, "v_new"),
        ("KVCache.append-too long", lambda: an.KVCache(1).append(np.ones((2, 4)), np.ones((2, 4))),
         ValueError, "max_len"),
        ("mha_decode_step-cache-None", lambda: an.mha_decode_step(X, P, None, num_heads=2),
         TypeError, "kv_cache"),
        ("mha_decode_step-scale-str", lambda: an.mha_decode_step(X, P, an.KVCache(4), num_heads=2,
                                                                 scale="abc"), TypeError, "scale"),
        ("mha_decode_step-num_heads-0", lambda: an.mha_decode_step(X, P, an.KVCache(4), num_heads=0),
         ValueError, "num_heads"),
        ("mha_decode_step-params-None", lambda: an.mha_decode_step(X, None, an.KVCache(4), num_heads=2),
         TypeError, "params"),
    ]
    # specs and options checked when made, not at the first use; d_k = 0; gradcheck's numbers
    for what, kw, exc, name in [
            ("RoPE-theta--1", dict(theta=-1), ValueError, "theta"),
            ("RoPE-theta-0", dict(theta=0.0), ValueError, "theta"),
            ("RoPE-theta-NaN", dict(theta=np.nan), ValueError, "theta"),
            ("RoPE-theta-inf", dict(theta=np.inf), ValueError, "theta"),
            ("RoPE-theta-bool", dict(theta=True), TypeError, "theta"),
            ("RoPE-theta-str", dict(theta="1e4"), TypeError, "theta"),
            ("RoPE-layout", dict(layout="neox"), ValueError, "layout"),
            ("RoPE-layout-list", dict(layout=["half"]), ValueError, "layout"),
            ("RoPE-rotary_dim-0", dict(rotary_dim=0), ValueError, "rotary_dim"),
            ("RoPE-rotary_dim-odd", dict(rotary_dim=3), ValueError, "rotary_dim"),
            ("RoPE-rotary_dim-bool", dict(rotary_dim=True), ValueError, "rotary_dim"),
            ("RoPE-rotary_dim-float", dict(rotary_dim=4.0), ValueError, "rotary_dim"),
            ("RoPE-scaling-factor-0", dict(scaling={"rope_type": "linear", "factor": 0.0}), ValueError,
             "factor"),
            ("RoPE-scaling-list", dict(scaling=[("rope_type", "linear")]), ValueError, "scaling")]:
        rows.append((what, lambda kw=kw: an.RoPE(**kw), exc, name))
    for what, kw, exc, name in [
            # the paper's options are keywords of the call, not fields (0.3): named, whatever the value
            ("AttentionSpec-is_causal", dict(is_causal=True), TypeError, "is_causal"),
            ("AttentionSpec-scale", dict(scale=0.5), TypeError, "scale"),
            ("AttentionSpec-num_heads", dict(num_heads=2), TypeError, "num_heads"),
            ("AttentionSpec-enable_gqa-str", dict(enable_gqa="yes"), TypeError, "enable_gqa"),
            ("AttentionSpec-enable_gqa-1", dict(enable_gqa=1), TypeError, "enable_gqa"),
            ("AttentionSpec-dropout_p-None", dict(dropout_p=None), TypeError, "dropout_p"),
            ("AttentionSpec-qk_norm-list", dict(qk_norm=["rms"]), ValueError, "qk_norm"),
            ("AttentionSpec-qk_norm_eps-inf", dict(qk_norm_eps=np.inf), ValueError, "qk_norm_eps"),
            ("AttentionSpec-qk_norm_eps-bool", dict(qk_norm_eps=True), ValueError, "qk_norm_eps"),
            ("AttentionSpec-qk_norm_eps-NaN", dict(qk_norm_eps=np.nan), ValueError, "qk_norm_eps"),
            ("AttentionSpec-kernel-list", dict(kernel=["fused"]), ValueError, "kernel"),
            ("AttentionSpec-dropout_p-2", dict(dropout_p=2.0), ValueError, "dropout_p"),
            ("AttentionSpec-rope-theta--1", dict(rope={"theta": -1}), ValueError, "theta")]:
        rows.append((what, lambda kw=kw: an.AttentionSpec(**kw), exc, name))
    Q0, K0 = Q[..., :0], K[..., :0]
    rows += [
        ("sdpa_forward-d_k-0", lambda: an.sdpa_forward(Q0, K0, V), ValueError, "d_k"),
        ("reference.sdpa_forward-d_k-0", lambda: reference.sdpa_forward(Q0, K0, V), ValueError, "d_k"),
        ("flash_attention_forward-d_k-0", lambda: flash_attention_forward(Q0, K0, V), ValueError, "d_k"),
        ("paper.sdpa_forward-d_k-0", lambda: an.paper.sdpa_forward(Q0, K0, V), ValueError, "d_k"),
        ("scaled_dot_product_attention-d_k-0", lambda: an.scaled_dot_product_attention(Q0, K0, V),
         ValueError, "d_k"),
        ("mha_forward-d_k-0", lambda: an.mha_forward(X, X, X, dict(P, W_q=P["W_q"][:, :0],
                                                                    W_k=P["W_k"][:, :0],
                                                                    b_q=P["b_q"][:0], b_k=P["b_k"][:0]),
                                                     num_heads=2), ValueError, "d_k"),
    ]
    GC = (an.sdpa_forward, an.sdpa_backward, (Q, K, V))
    for what, kw, exc, name in [("eps-0", dict(eps=0), ValueError, "eps"),
                                ("eps-negative", dict(eps=-1e-6), ValueError, "eps"),
                                ("eps-NaN", dict(eps=np.nan), ValueError, "eps"),
                                ("eps-str", dict(eps="1e-6"), TypeError, "eps"),
                                ("atol--1", dict(atol=-1), ValueError, "atol"),
                                ("atol-inf", dict(atol=np.inf), ValueError, "atol"),
                                ("rtol-NaN", dict(rtol=np.nan), ValueError, "rtol"),
                                ("rtol-bool", dict(rtol=True), TypeError, "rtol"),
                                ("seed--1", dict(seed=-1), ValueError, "seed"),
                                ("seed-float", dict(seed=0.5), ValueError, "seed")]:
        rows.append((f"gradcheck-{what}", lambda kw=kw: an.gradcheck(*GC, **kw), exc, name))
    rows.append(("numerical_gradient-eps-0", lambda: an.numerical_gradient(lambda: 0.0, Q.copy(), eps=0),
                 ValueError, "eps"))
    # additive
    rows += [
        ("additive_attention_forward-params-None", lambda: additive_attention_forward(Q, K, V, None),
         TypeError, "params"),
        ("additive_attention_forward-params-W_q shape", lambda: additive_attention_forward(
            Q, K, V, dict(AP, W_q=AP["W_q"][:3])), ValueError, "W_q"),
        ("init_additive_params-d_q-0", lambda: an.init_additive_params(0), ValueError, "d_q"),
    ]
    return rows


ROWS = _rows()


def _names_it(label: str, error: Exception, name: str) -> None:
    # the argument's name as a word ("q", not the q in "queries")
    assert re.search(rf"(?<![A-Za-z_]){re.escape(name)}(?![a-z_])", str(error)), f"{label}: {error}"


@pytest.mark.parametrize("label, call, exc, name", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_refused_with_a_message_naming_it(label, call, exc, name):
    with pytest.raises(exc) as info:
        call()
    _names_it(label, info.value, name)


def test_row_count():
    kinds = {}
    for _, _, exc, _, *_ in ROWS:
        kinds[exc.__name__] = kinds.get(exc.__name__, 0) + 1
    print(f"\n{len(ROWS)} bad inputs: {kinds}")
    assert len(ROWS) >= 250


# ---- nothing changes when a call is refused; no returned array aliases a cache ----

def test_failed_append_leaves_an_empty_cache_empty():
    cache = an.KVCache(3)
    with pytest.raises(TypeError, match="v_new"):
        cache.append(np.ones((1, 4)), np.ones((1, 4), np.float32))
    assert cache.length == 0 and cache.nbytes == 0      # nothing allocated by the failed call
    cache.append(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32))   # float32 still fine
    assert cache.k.dtype == np.float32


@pytest.mark.parametrize("bad", [dict(scale="abc"), dict(scale=np.nan), dict(num_heads=3),
                                 dict(params=PS3)])
def test_failed_decode_step_does_not_touch_the_cache(bad):
    cache = an.KVCache(8)
    x = R.standard_normal((2, 3, 8))
    an.mha_decode_step(x, P, cache, num_heads=2)
    k0, v0 = cache.k.copy(), cache.v.copy()
    kw = dict(dict(num_heads=2, params=P), **bad)
    with pytest.raises((TypeError, ValueError)):
        an.mha_decode_step(x[:, :1], kw.pop("params"), cache, **kw)
    assert cache.length == 3
    np.testing.assert_array_equal(cache.k, k0)
    np.testing.assert_array_equal(cache.v, v0)


@pytest.mark.parametrize("fwd, bwd", [
    (an.sdpa_forward, an.sdpa_backward),
    (reference.sdpa_forward, reference.sdpa_backward),
    (flash_attention_forward, flash_attention_backward),
    (lambda q, k, v: additive_attention_forward(q, k, v, AP), additive_attention_backward),
], ids=["fused", "reference", "tiled", "additive"])
def test_editing_the_returned_out_does_not_change_the_backward(fwd, bwd):
    out, cache = fwd(Q, K, V)
    want = bwd(DOUT, cache)
    out[...] = 1e6                                     # the caller edits what it was given
    got = bwd(DOUT, cache)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, dict):
            for n in w:
                np.testing.assert_array_equal(g[n], w[n])
        else:
            np.testing.assert_array_equal(g, w)


# --- found by the first fuzzer (now tests/fuzz_signatures.py, tests/api/test_fuzz_signatures.py) ---

@pytest.mark.parametrize("flag", [False, True])
def test_decode_step_refuses_is_causal_before_the_cache_changes(flag):
    cache = an.KVCache(8)
    with pytest.raises(TypeError, match="got is_causal=: decoding is causal"):
        an.mha_decode_step(X[:, :1], P, cache, num_heads=2, is_causal=flag)
    assert cache.length == 0


@pytest.mark.parametrize("step", ["self", "cross"])
@pytest.mark.parametrize("x, exc", [("abc", TypeError), (np.ones((2, 1, 8), int), TypeError),
                                    (np.ones(8), ValueError), (np.ones((2, 1, 9)), ValueError)])
def test_decode_steps_name_x(step, x, exc):
    with pytest.raises(exc, match=r"\bx\b"):
        if step == "self":
            an.mha_decode_step(x, P, an.KVCache(4), num_heads=2)
        else:
            an.mha_cross_decode_step(x, P, an.cross_kv_cache(X, P, num_heads=2), num_heads=2)


@pytest.mark.parametrize("fwd", list(ATTENTION.values()) + [an.paper.sdpa_forward],
                         ids=list(ATTENTION) + ["paper.sdpa_forward"])
def test_d_v_zero_is_refused(fwd):
    with pytest.raises(ValueError, match="d_v"):
        fwd(Q, K, V[..., :0])


def test_sinks_d_v_zero_is_refused():
    with pytest.raises(ValueError, match="d_v"):
        an.sdpa_sinks_forward(Q[:, None], K[:, None], V[:, None, :, :0], np.zeros(1))


@pytest.mark.parametrize("kw, exc", [(dict(L=True), TypeError), (dict(L=-1), ValueError),
                                     (dict(S=1.5), ValueError), (dict(S="5"), ValueError),
                                     (dict(S=np.nan), ValueError)])
def test_lengths_mask_names_L_and_S(kw, exc):
    name = next(iter(kw))
    with pytest.raises((TypeError, ValueError), match=rf"\b{name}\b"):
        an.lengths_mask(q_lengths=[2, 3], kv_lengths=[4, 5], **kw)


def test_softmax_axis_bool_is_refused():
    with pytest.raises(ValueError, match="axis"):
        an.softmax(Q, axis=True)


@pytest.mark.parametrize("rng, exc", [("seed", TypeError), (1.5, TypeError), (True, TypeError),
                                      (-1, ValueError)])
def test_sdpa_rng_is_checked_even_without_dropout(rng, exc):
    with pytest.raises(exc, match="rng"):
        an.sdpa_forward(Q, K, V, rng=rng)


@pytest.mark.parametrize("x", [np.float64(1.0), 1.0, np.ones(3, int), [1.0, 2.0]])
def test_numerical_gradient_needs_the_array_loss_reads(x):
    with pytest.raises(TypeError, match=r"\bx\b"):
        an.numerical_gradient(lambda: 0.0, x)


@pytest.mark.parametrize("flag", ["no", 1, 1.5, None])
def test_t5_buckets_bidirectional_is_a_bool(flag):
    with pytest.raises(TypeError, match="bidirectional"):
        an.t5_relative_buckets(an.relative_positions(3, 4), bidirectional=flag)
