"""A corpus of bad calls written from the public signatures and docstrings alone (session 43).

Each row is one call a hostile but fair user might make: one argument wrong (a bool for a number,
a float for a count, a numpy scalar or 0-d array where a flag or count goes, NaN, inf, a huge
value, an axis off by one, a broadcastable mask on the wrong axis, swapped L/S, an int, complex,
object or float16 array, params of one model with a config of another, a cache from another
layer), with everything else valid. ``names`` are the words of which the error message must
contain one (the argument, or the two arguments that disagree). Rows with ``state`` also take a
fingerprint of what the call may change (a cache, params, an optimizer state) before and after.

The rows are built lazily (``rows()``) so that importing this module costs nothing; the tests in
``test_bad_calls_unseen.py`` run them. Expensive fixtures (MiniLM's weights, torch and flax
modules) are built once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BadCall:
    sub: str  # the subpackage, for the table
    label: str
    names: tuple  # the message must name one of these
    setup: object  # () -> (call, fingerprint or None)


def _fp(obj):
    """A comparable fingerprint of arrays, dicts of arrays, caches and optimizer states."""
    if isinstance(obj, np.ndarray):
        return ("a", obj.shape, str(obj.dtype), obj.tobytes())
    if isinstance(obj, dict):
        return tuple((k, _fp(v)) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0])))
    if isinstance(obj, (list, tuple)):
        return tuple(_fp(v) for v in obj)
    if hasattr(obj, "length") and hasattr(obj, "append"):  # a KVCache
        if obj.length == 0:
            return ("kv", 0)
        return ("kv", obj.length, _fp(np.array(obj.k)), _fp(np.array(obj.v)))
    if hasattr(obj, "m") and hasattr(obj, "t"):  # an AdamState
        return ("adam", obj.t, _fp(obj.m), _fp(obj.v))
    return repr(obj)


_ROWS: list = []


def _add(sub, label, names, fn, /, *args, **kwargs):
    def setup():
        return (lambda: fn(*args, **kwargs)), None
    _ROWS.append(BadCall(sub, label, tuple(names.split()), setup))


def _add_state(sub, label, names, setup):
    _ROWS.append(BadCall(sub, label, tuple(names.split()), setup))


def _rng():
    return np.random.default_rng(0)


def _arr(*shape, dtype=np.float64):
    return _rng().standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------------------------
# attention_np: the paper's names and the variants exported at the top level
# ----------------------------------------------------------------------------------------------

def _top():
    import attention_np as an

    B, h, L, S, d, dv = 2, 3, 4, 5, 8, 6
    q, k, v = _arr(B, h, L, d), _arr(B, h, S, d), _arr(B, h, S, dv)
    x = _arr(2, 3)
    T = "top"

    # softmax / softmax_backward
    _add(T, "softmax axis=True", "axis", an.softmax, x, axis=True)
    _add(T, "softmax axis=1.0", "axis", an.softmax, x, axis=1.0)
    _add(T, "softmax axis=2 of a 2-d x", "axis", an.softmax, x, axis=2)
    _add(T, "softmax axis='-1'", "axis", an.softmax, x, axis="-1")
    _add(T, "softmax of a complex array", "x", an.softmax, x.astype(complex))
    _add(T, "softmax of an object array", "x", an.softmax, x.astype(object))
    _add(T, "softmax of an int array", "x", an.softmax, np.arange(6).reshape(2, 3))
    _add(T, "softmax of a 0-d array", "x axis", an.softmax, np.array(1.0))
    _add(T, "softmax where= float array", "where", an.softmax, x, where=np.ones((2, 3)))
    _add(T, "softmax where= (3, 2) for x (2, 3)", "where", an.softmax, x, where=np.ones((3, 2), bool))
    _add(T, "softmax where= (2, 1, 3): would broadcast x up", "where", an.softmax, x,
         where=np.ones((2, 1, 3), bool))
    _add(T, "softmax_backward dp (2, 4) vs p (2, 3)", "dp p", an.softmax_backward, _arr(2, 4), an.softmax(x))
    _add(T, "softmax_backward dp int", "dp", an.softmax_backward, np.ones((2, 3), int), an.softmax(x))
    _add(T, "softmax_backward axis=None", "axis", an.softmax_backward, x, an.softmax(x), axis=None)

    # masks
    for bad, label in [(-1, "-1"), (2.5, "2.5"), (True, "True"), ("3", "'3'"), (None, "None"),
                       (np.float64(3.0), "np.float64(3.0)"), (np.array([3]), "array([3])")]:
        _add(T, f"causal_mask L={label}", "L", an.causal_mask, bad)
    _add(T, "causal_mask S=-2", "S", an.causal_mask, 3, -2)
    _add(T, "causal_mask S=np.nan", "S", an.causal_mask, 3, np.nan)
    _add(T, "causal_mask align='bottom-right'", "align", an.causal_mask, 3, align="bottom-right")
    _add(T, "causal_mask align=None", "align", an.causal_mask, 3, align=None)
    _add(T, "padding_mask lengths float [1.5, 2]", "lengths", an.padding_mask, np.array([1.5, 2.0]), 3)
    _add(T, "padding_mask lengths [-1, 2]", "lengths", an.padding_mask, np.array([-1, 2]), 3)
    _add(T, "padding_mask lengths [4] > S=3", "lengths S", an.padding_mask, np.array([4]), 3)
    _add(T, "padding_mask lengths 2-d", "lengths", an.padding_mask, np.array([[1, 2]]), 3)
    _add(T, "padding_mask S=True", "S", an.padding_mask, np.array([1, 2]), True)
    _add(T, "padding_mask lengths bool", "lengths", an.padding_mask, np.array([True, False]), 3)
    _add(T, "mask_from_blocked float", "blocked", an.mask_from_blocked, np.zeros((2, 2)))
    _add(T, "mask_from_blocked int 0/1", "blocked", an.mask_from_blocked, np.zeros((2, 2), int))
    _add(T, "sliding_window_mask left=-1", "left", an.sliding_window_mask, 4, left=-1)
    _add(T, "sliding_window_mask left=1.5", "left", an.sliding_window_mask, 4, left=1.5)
    _add(T, "sliding_window_mask right=True", "right", an.sliding_window_mask, 4, right=True)
    _add(T, "sliding_window_mask L=0.0", "L", an.sliding_window_mask, 0.0, left=1)
    _add(T, "sliding_window_mask align='left'", "align", an.sliding_window_mask, 4, left=1, align="left")
    _add(T, "lengths_mask q_lengths [5] > L=4", "q_lengths L", an.lengths_mask, np.array([5]), None, 4, 4)
    _add(T, "lengths_mask kv_lengths float", "kv_lengths", an.lengths_mask, None, np.array([1.0, 2.0]))
    _add(T, "lengths_mask neither given", "q_lengths kv_lengths", an.lengths_mask)
    _add(T, "lengths_mask batches 2 vs 3", "q_lengths kv_lengths", an.lengths_mask,
         np.array([1, 2]), np.array([1, 2, 3]))
    _add(T, "lengths_mask L=-1", "L", an.lengths_mask, np.array([0]), None, -1)
    _add(T, "lengths_mask S=2.0", "S", an.lengths_mask, None, np.array([1]), None, 2.0)

    # Eq. (1)
    for fn in (an.scaled_dot_product_attention, an.sdpa_forward, an.flash_attention_forward):
        n = fn.__name__
        _add(T, f"{n} q int", "q", fn, q.astype(int), k, v)
        _add(T, f"{n} k complex", "k", fn, q, k.astype(complex), v)
        _add(T, f"{n} v object", "v", fn, q, k, v.astype(object))
        _add(T, f"{n} q 1-d", "q", fn, q[0, 0, 0], k, v)
        _add(T, f"{n} k d_k 9 vs q 8", "q k d_k", fn, q, _arr(B, h, S, d + 1), v)
        _add(T, f"{n} v S=6 vs k S=5", "k v S", fn, q, k, _arr(B, h, S + 1, dv))
        _add(T, f"{n} batch 2 vs 3", "q k", fn, q, _arr(3, h, S, d), _arr(3, h, S, dv))
        _add(T, f"{n} mask float", "mask", fn, q, k, v, np.ones((L, S)))
        _add(T, f"{n} mask int 0/1", "mask", fn, q, k, v, np.ones((L, S), int))
        _add(T, f"{n} mask (S, L) swapped", "mask", fn, q, k, v, np.ones((S, L), bool))
        _add(T, f"{n} mask (L+1, S)", "mask", fn, q, k, v, np.ones((L + 1, S), bool))
        _add(T, f"{n} mask (B, h, L, S, 1) rank 5", "mask", fn, q, k, v, np.ones((B, h, L, S, 1), bool))
        _add(T, f"{n} is_causal=1", "is_causal", fn, q, k, v, is_causal=1)
        _add(T, f"{n} is_causal='no'", "is_causal", fn, q, k, v, is_causal="no")
        _add(T, f"{n} is_causal=np.array([True])", "is_causal", fn, q, k, v, is_causal=np.array([True]))
        for bad, label in [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf"), ("1", "'1'"),
                           (True, "True"), (np.array([1.0, 2.0]), "array of 2"), (1j, "1j")]:
            _add(T, f"{n} scale={label}", "scale", fn, q, k, v, scale=bad)
        if fn is not an.scaled_dot_product_attention:
            _add(T, f"{n} bias int", "bias", fn, q, k, v, bias=np.ones((L, S), int))
            _add(T, f"{n} bias (S, L)", "bias", fn, q, k, v, bias=np.zeros((S, L)))
            _add(T, f"{n} bias complex", "bias", fn, q, k, v, bias=np.zeros((L, S), complex))
            _add(T, f"{n} spec='fused'", "spec", fn, q, k, v, spec="fused")
            _add(T, f"{n} spec=dict", "spec", fn, q, k, v, spec={"window": (1, 0)})
    _add(T, "sdpa_forward dropout_mask (L, S) with dropout_p 0", "dropout_mask", an.sdpa_forward, q, k, v,
         dropout_mask=np.ones((S, L), bool), spec=an.AttentionSpec(dropout_p=0.5))
    _add(T, "sdpa_forward rng='x' with dropout", "rng", an.sdpa_forward, q, k, v, rng="x",
         spec=an.AttentionSpec(dropout_p=0.5))
    _add(T, "sdpa_forward rng=1.5 with dropout", "rng", an.sdpa_forward, q, k, v, rng=1.5,
         spec=an.AttentionSpec(dropout_p=0.5))
    for bad, label in [(0, "0"), (-1, "-1"), (1.5, "1.5"), (True, "True"), ("64", "'64'")]:
        _add(T, f"flash_attention_forward block_size={label}", "block_size", an.flash_attention_forward,
             q, k, v, block_size=bad)

    out, cache = an.sdpa_forward(q, k, v)
    _, fcache = an.flash_attention_forward(q, k, v)
    _add(T, "sdpa_backward dout (.., L, d_v+1)", "dout", an.sdpa_backward, _arr(B, h, L, dv + 1), cache)
    _add(T, "sdpa_backward dout int", "dout", an.sdpa_backward, np.ones(out.shape, int), cache)
    _add(T, "sdpa_backward cache=None", "cache", an.sdpa_backward, out, None)
    _add(T, "sdpa_backward a FlashCache", "cache", an.sdpa_backward, out, fcache)
    _add(T, "sdpa_backward return_dbias=np.int64(1)", "return_dbias", an.sdpa_backward, out, cache,
         return_dbias=np.int64(1))
    _add(T, "flash_attention_backward an SDPACache", "cache", an.flash_attention_backward, out, cache)
    _add(T, "flash_attention_backward dout (L, d_v) wrong rank", "dout", an.flash_attention_backward,
         out[0, 0], fcache)
    _add(T, "flash_attention_backward return_dbias='no'", "return_dbias", an.flash_attention_backward,
         out, fcache, return_dbias="no")

    # sinks
    sinks = np.zeros(h)
    _add(T, "sdpa_sinks_forward sinks (h+1,)", "sinks", an.sdpa_sinks_forward, q, k, v, np.zeros(h + 1))
    _add(T, "sdpa_sinks_forward sinks int", "sinks", an.sdpa_sinks_forward, q, k, v, np.zeros(h, int))
    _add(T, "sdpa_sinks_forward sinks (h, 1) wrong rank", "sinks", an.sdpa_sinks_forward, q, k, v,
         np.zeros((h, 1)))
    _add(T, "sdpa_sinks_forward sinks None", "sinks", an.sdpa_sinks_forward, q, k, v, None)
    _, scache = an.sdpa_sinks_forward(q, k, v, sinks)
    _add(T, "sdpa_sinks_backward an SDPACache", "cache", an.sdpa_sinks_backward, out, cache)
    _add(T, "sdpa_sinks_backward dout wrong shape", "dout", an.sdpa_sinks_backward, out[..., :-1], scache)
    _add(T, "flash_attention_forward sinks (h-1,)", "sinks", an.flash_attention_forward, q, k, v,
         sinks=np.zeros(h - 1))

    # heads and projections
    xm = _arr(2, 4, 12)
    for bad, label in [(0, "0"), (-3, "-3"), (5, "5 (not dividing 12)"), (2.0, "2.0"), (True, "True"),
                       (np.array(3), "0-d array")]:
        _add(T, f"split_heads num_heads={label}", "num_heads", an.split_heads, xm, bad)
    _add(T, "split_heads x 1-d", "x", an.split_heads, np.zeros(12), 3)
    _add(T, "merge_heads x 2-d", "x", an.merge_heads, np.zeros((4, 3)))
    W = _arr(12, 5)
    _add(T, "linear_forward W (11, 5) for x (.., 12)", "x W", an.linear_forward, xm, _arr(11, 5))
    _add(T, "linear_forward b (6,) for W (12, 5)", "b", an.linear_forward, xm, W, np.zeros(6))
    _add(T, "linear_forward b (1, 5) 2-d", "b", an.linear_forward, xm, W, np.zeros((1, 5)))
    _add(T, "linear_forward W 1-d", "W", an.linear_forward, xm, np.zeros(12))
    _add(T, "linear_forward x int", "x", an.linear_forward, np.ones((4, 12), int), W)
    _add(T, "linear_forward W float16", "W", an.linear_forward, xm, W.astype(np.float16))
    _add(T, "linear_backward has_bias=1", "has_bias", an.linear_backward, _arr(2, 4, 5), xm, W, 1)
    _add(T, "linear_backward has_bias='yes'", "has_bias", an.linear_backward, _arr(2, 4, 5), xm, W, "yes")
    _add(T, "linear_backward dy (.., 6) for W (12, 5)", "dy", an.linear_backward, _arr(2, 4, 6), xm, W, True)
    _add(T, "glorot_uniform rng=0 (a seed)", "rng", an.glorot_uniform, 0, 3, 4)
    _add(T, "glorot_uniform fan_in=0", "fan_in", an.glorot_uniform, _rng(), 0, 4)
    _add(T, "glorot_uniform fan_out=2.5", "fan_out", an.glorot_uniform, _rng(), 3, 2.5)
    _add(T, "glorot_uniform shape=(-1, 2)", "shape", an.glorot_uniform, _rng(), 3, 4, (-1, 2))
    _add(T, "glorot_uniform shape='3x4'", "shape", an.glorot_uniform, _rng(), 3, 4, "3x4")

    # init_mha_params
    for kw, bad, label in [("d_model", 0, "0"), ("d_model", 12.0, "12.0"), ("d_model", True, "True"),
                           ("d_model", np.array(12), "0-d array"), ("num_heads", 5, "5"),
                           ("num_heads", -3, "-3"), ("d_k", 0, "0"), ("d_v", 2.5, "2.5"),
                           ("kdim", -1, "-1"), ("vdim", False, "False"), ("bias", "no", "'no'"),
                           ("bias", np.array([True]), "array([True])"), ("rng", "seed", "'seed'"),
                           ("rng", -1, "-1"), ("rng", 1.5, "1.5"), ("dtype", np.int32, "np.int32"),
                           ("dtype", np.complex128, "complex128"), ("dtype", "int", "'int'"),
                           ("num_kv_heads", 2, "2 (not dividing 3)"), ("num_kv_heads", 0, "0"),
                           ("qk_norm", 1, "1"), ("sinks", "yes", "'yes'")]:
        args = {"d_model": 12, "num_heads": 3}
        args[kw] = bad
        _add(T, f"init_mha_params {kw}={label}", kw, an.init_mha_params, args.pop("d_model"),
             args.pop("num_heads"), **args)

    # mha_forward / mha_backward
    p = an.init_mha_params(12, 3, rng=0)
    p16 = an.init_mha_params(16, 4, rng=0)
    x3 = _arr(3, 4, 12)
    _add(T, "mha_forward query d_model 13", "query", an.mha_forward, _arr(2, 4, 13), xm, xm, p, num_heads=3)
    _add(T, "mha_forward key d 11 vs W_k (12, .)", "key", an.mha_forward, xm, _arr(2, 5, 11), _arr(2, 5, 12),
         p, num_heads=3)
    _add(T, "mha_forward key S=5 vs value S=6", "key value", an.mha_forward, xm, _arr(2, 5, 12),
         _arr(2, 6, 12), p, num_heads=3)
    _add(T, "mha_forward params of d_model 16", "params query W_q", an.mha_forward, xm, xm, xm, p16,
         num_heads=4)
    _add(T, "mha_forward params without W_o", "params W_o", an.mha_forward, xm, xm, xm,
         {kk: vv for kk, vv in p.items() if kk != "W_o"}, num_heads=3)
    _add(T, "mha_forward params W_q float32 in a float64 dict", "W_q params", an.mha_forward, xm, xm, xm,
         {**p, "W_q": p["W_q"].astype(np.float32)}, num_heads=3)
    _add(T, "mha_forward params=None", "params", an.mha_forward, xm, xm, xm, None, num_heads=3)
    _add(T, "mha_forward params a list", "params", an.mha_forward, xm, xm, xm, list(p.values()), num_heads=3)
    _add(T, "mha_forward num_heads=5", "num_heads", an.mha_forward, xm, xm, xm, p, num_heads=5)
    _add(T, "mha_forward num_heads=0", "num_heads", an.mha_forward, xm, xm, xm, p, num_heads=0)
    _add(T, "mha_forward num_heads=3.0", "num_heads", an.mha_forward, xm, xm, xm, p, num_heads=3.0)
    _add(T, "mha_forward num_heads=np.True_", "num_heads", an.mha_forward, xm, xm, xm, p, num_heads=np.True_)
    _add(T, "mha_forward mask (B,1,S) with B == h == 3", "mask", an.mha_forward, x3, x3, x3, p, num_heads=3,
         mask=np.ones((3, 1, 4), bool))
    _add(T, "mha_forward mask (B,1,S) with B=2, h=3 (a per-sequence mask missing its head axis)", "mask",
         an.mha_forward, xm, xm, xm, p, num_heads=3, mask=np.ones((2, 1, 4), bool))
    p1 = an.init_mha_params(12, 1, rng=0)
    _add(T, "mha_forward mask (B,1,S) with h=1: would broadcast over the heads", "mask", an.mha_forward, xm,
         xm,
         xm, p1, num_heads=1, mask=np.ones((2, 1, 4), bool))
    _add(T, "mha_forward mask (B,1,1,S+1)", "mask", an.mha_forward, xm, xm, xm, p, num_heads=3,
         mask=np.ones((2, 1, 1, 5), bool))
    _add(T, "mha_forward mask float (L, S)", "mask", an.mha_forward, xm, xm, xm, p, num_heads=3,
         mask=np.ones((4, 4)))
    _add(T, "mha_forward is_causal='no'", "is_causal", an.mha_forward, xm, xm, xm, p, num_heads=3,
         is_causal="no")
    _add(T, "mha_forward scale=nan", "scale", an.mha_forward, xm, xm, xm, p, num_heads=3, scale=np.nan)
    _add(T, "mha_forward bias (h, L, S+1)", "bias", an.mha_forward, xm, xm, xm, p, num_heads=3,
         bias=np.zeros((3, 4, 5)))
    _add(T, "mha_forward positions (L+1,)", "positions", an.mha_forward, xm, xm, xm, p, num_heads=3,
         spec=an.AttentionSpec(rope=an.RoPE()), positions=np.arange(5))
    _add(T, "mha_forward positions float", "positions", an.mha_forward, xm, xm, xm, p, num_heads=3,
         spec=an.AttentionSpec(rope=an.RoPE()), positions=np.arange(4.0) + 0.5)
    _add(T, "mha_forward query float16", "query", an.mha_forward, xm.astype(np.float16), xm, xm, p,
         num_heads=3)
    _add(T, "mha_forward batch 2 vs key batch 3", "query key", an.mha_forward, xm, x3, x3, p, num_heads=3)
    o, mcache = an.mha_forward(xm, xm, xm, p, num_heads=3)
    _add(T, "mha_backward dout (.., 11)", "dout", an.mha_backward, o[..., :-1], mcache)
    _add(T, "mha_backward cache an SDPACache", "cache", an.mha_backward, o, cache)
    _add(T, "mha_backward return_dbias='no'", "return_dbias", an.mha_backward, o, mcache, return_dbias="no")
    _add(T, "mha_backward dout complex", "dout", an.mha_backward, o.astype(complex), mcache)

    # gradcheck / numerical_gradient
    def f(a):
        return a * 2
    def b(d, a):
        return (2 * d,)
    a0 = (np.ones(3),)
    _add(T, "gradcheck forward=3", "forward", an.gradcheck, 3, b, a0)
    _add(T, "gradcheck backward=None", "backward", an.gradcheck, f, None, a0)
    _add(T, "gradcheck inputs an array, not a tuple", "inputs", an.gradcheck, f, b, np.ones(3))
    _add(T, "gradcheck inputs tuple of strs", "inputs", an.gradcheck, f, b, ("ab",))
    _add(T, "gradcheck inputs int array", "inputs", an.gradcheck, f, b, (np.ones(3, int),))
    _add(T, "gradcheck names of wrong length", "names", an.gradcheck, f, b, a0, names=("a", "b"))
    _add(T, "gradcheck names a str", "names", an.gradcheck, f, b, a0, names="a")
    _add(T, "gradcheck eps=0", "eps", an.gradcheck, f, b, a0, eps=0.0)
    _add(T, "gradcheck atol=-1", "atol", an.gradcheck, f, b, a0, atol=-1.0)
    _add(T, "gradcheck rtol=nan", "rtol", an.gradcheck, f, b, a0, rtol=np.nan)
    _add(T, "gradcheck seed=1.5", "seed", an.gradcheck, f, b, a0, seed=1.5)
    _add(T, "gradcheck seed=np.True_", "seed", an.gradcheck, f, b, a0, seed=np.True_)
    xg = np.ones(3)
    _add(T, "numerical_gradient eps=-1e-6", "eps", an.numerical_gradient, lambda: float(xg.sum()), xg, -1e-6)
    _add(T, "numerical_gradient eps=inf", "eps", an.numerical_gradient, lambda: float(xg.sum()), xg, np.inf)
    _add(T, "numerical_gradient x int", "x", an.numerical_gradient, lambda: 0.0, np.ones(3, int))
    _add(T, "numerical_gradient x a list", "x", an.numerical_gradient, lambda: 0.0, [1.0, 2.0])
    _add(T, "numerical_gradient loss taking an argument", "loss", an.numerical_gradient,
         lambda a: float(a.sum()), xg)
    _add(T, "numerical_gradient loss returning a str", "loss", an.numerical_gradient, lambda: "0", xg)

    # RoPE functions
    pos = np.arange(4)
    _add(T, "rope_angles positions float", "positions", an.rope_angles, pos + 0.5, 8)
    _add(T, "rope_angles d=7 odd", "d", an.rope_angles, pos, 7)
    _add(T, "rope_angles d=0", "d", an.rope_angles, pos, 0)
    _add(T, "rope_angles d=True", "d", an.rope_angles, pos, True)
    _add(T, "rope_angles theta=0", "theta", an.rope_angles, pos, 8, theta=0.0)
    _add(T, "rope_angles theta=-1", "theta", an.rope_angles, pos, 8, theta=-1.0)
    _add(T, "rope_angles theta=nan", "theta", an.rope_angles, pos, 8, theta=np.nan)
    _add(T, "rope_angles theta='1e4'", "theta", an.rope_angles, pos, 8, theta="1e4")
    _add(T, "rope_angles dtype complex64", "dtype", an.rope_angles, pos, 8, dtype=np.complex64)
    _add(T, "rope_angles scaling type 'bogus'", "scaling type", an.rope_angles, pos, 8,
         scaling={"type": "bogus"})
    _add(T, "rope_angles scaling='linear'", "scaling", an.rope_angles, pos, 8, scaling="linear")
    _add(T, "rope_angles positions object", "positions", an.rope_angles, pos.astype(object), 8)
    _add(T, "rope_frequencies d=-2", "d", an.rope_frequencies, -2)
    _add(T, "rope_frequencies theta='x'", "theta", an.rope_frequencies, 8, theta="x")
    _add(T, "rope_frequencies seq_len=-1", "seq_len", an.rope_frequencies, 8, seq_len=-1,
         scaling={"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4})
    _add(T, "rope_frequencies linear factor=0", "factor", an.rope_frequencies, 8,
         scaling={"type": "linear", "factor": 0.0})
    _add(T, "rope_frequencies linear factor=nan", "factor", an.rope_frequencies, 8,
         scaling={"type": "linear", "factor": np.nan})
    xr = _arr(2, 4, 8)
    _add(T, "apply_rope x last dim 7 odd", "x", an.apply_rope, _arr(2, 4, 7), pos)
    _add(T, "apply_rope positions (L+1,)", "positions", an.apply_rope, xr, np.arange(5))
    _add(T, "apply_rope layout='full'", "layout", an.apply_rope, xr, pos, layout="full")
    _add(T, "apply_rope rotary_dim=3 odd", "rotary_dim", an.apply_rope, xr, pos, rotary_dim=3)
    _add(T, "apply_rope rotary_dim=16 > d", "rotary_dim", an.apply_rope, xr, pos, rotary_dim=16)
    _add(T, "apply_rope rotary_dim=4.0", "rotary_dim", an.apply_rope, xr, pos, rotary_dim=4.0)
    _add(T, "apply_rope theta=inf", "theta", an.apply_rope, xr, pos, theta=np.inf)
    _add(T, "apply_rope x int", "x", an.apply_rope, np.ones((2, 4, 8), int), pos)
    _add(T, "apply_rope_backward positions (L-1,)", "positions", an.apply_rope_backward, xr, np.arange(3))
    _add(T, "apply_rope_backward layout=None", "layout", an.apply_rope_backward, xr, pos, layout=None)

    # position biases
    _add(T, "relative_positions L=-1", "L", an.relative_positions, -1)
    _add(T, "relative_positions S=1.5", "S", an.relative_positions, 3, 1.5)
    _add(T, "relative_positions align='x'", "align", an.relative_positions, 3, align="x")
    for bad, label in [(0, "0"), (-1, "-1"), (2.5, "2.5"), (True, "True"), (np.float32(4), "np.float32(4)")]:
        _add(T, f"alibi_slopes num_heads={label}", "num_heads", an.alibi_slopes, bad)
    _add(T, "alibi_bias slopes 2-d", "slopes", an.alibi_bias, np.ones((2, 2)), 3)
    _add(T, "alibi_bias slopes int", "slopes", an.alibi_bias, np.ones(2, int), 3)
    _add(T, "alibi_bias L=-1", "L", an.alibi_bias, np.ones(2), -1)
    _add(T, "alibi_bias slopes complex", "slopes", an.alibi_bias, np.array([1j, 1.0]), 3)
    rp = an.relative_positions(4)
    _add(T, "t5_relative_buckets relative_position float", "relative_position", an.t5_relative_buckets,
         rp + 0.5)
    _add(T, "t5_relative_buckets num_buckets=0", "num_buckets", an.t5_relative_buckets, rp, num_buckets=0)
    _add(T, "t5_relative_buckets num_buckets=-2", "num_buckets", an.t5_relative_buckets, rp, num_buckets=-2)
    _add(T, "t5_relative_buckets num_buckets=32.0", "num_buckets", an.t5_relative_buckets, rp,
         num_buckets=32.0)
    _add(T, "t5_relative_buckets max_distance=0", "max_distance", an.t5_relative_buckets, rp,
         max_distance=0)
    _add(T, "t5_relative_buckets max_distance=8 < num_buckets=32", "max_distance num_buckets",
         an.t5_relative_buckets, rp, num_buckets=32, max_distance=8)
    _add(T, "t5_relative_buckets bidirectional='yes'", "bidirectional", an.t5_relative_buckets, rp,
         bidirectional="yes")
    buckets = an.t5_relative_buckets(rp, num_buckets=8, max_distance=16)
    _add(T, "relative_position_bias table (4, h) for buckets up to 7", "table buckets",
         an.relative_position_bias, np.zeros((4, 2)), buckets)
    _add(T, "relative_position_bias buckets float", "buckets", an.relative_position_bias, np.zeros((8, 2)),
         buckets.astype(float))
    _add(T, "relative_position_bias table int", "table", an.relative_position_bias, np.zeros((8, 2), int),
         buckets)
    _add(T, "relative_position_bias buckets negative", "buckets", an.relative_position_bias,
         np.zeros((8, 2)), -np.ones((4, 4), int))
    _add(T, "relative_position_bias table 1-d", "table", an.relative_position_bias, np.zeros(8), buckets)
    bias = an.relative_position_bias(np.zeros((8, 2)), buckets)
    _add(T, "relative_position_bias_backward num_buckets=4 < max bucket", "num_buckets buckets",
         an.relative_position_bias_backward, bias, buckets, 4)
    _add(T, "relative_position_bias_backward num_buckets=0", "num_buckets",
         an.relative_position_bias_backward,
         bias, buckets, 0)
    _add(T, "relative_position_bias_backward dbias (h, L+1, S)", "dbias buckets",
         an.relative_position_bias_backward, np.zeros((2, 5, 4)), buckets, 8)

    # spec and RoPE
    for kw, bad, label in [("window", (-2, 0), "(-2, 0)"), ("window", (1.5, 0), "(1.5, 0)"),
                           ("window", 5, "5"), ("window", (1, 2, 3), "(1, 2, 3)"),
                           ("softcap", 0.0, "0"), ("softcap", -1.0, "-1"), ("softcap", np.nan, "nan"),
                           ("softcap", "50", "'50'"), ("qk_norm", "bogus", "'bogus'"),
                           ("qk_norm_eps", 0.0, "0"), ("qk_norm_eps", -1.0, "-1"),
                           ("qk_norm_scope", "x", "'x'"), ("dropout_p", 1.5, "1.5"),
                           ("dropout_p", -0.1, "-0.1"), ("dropout_p", np.nan, "nan"),
                           ("dropout_p", True, "True"), ("enable_gqa", 1, "1"), ("rope", "x", "'x'"),
                           ("rope", {"thta": 1e4}, "a dict with a misspelt key"),
                           ("kernel", "bogus", "'bogus'"),
                           ("kernel", None, "None")]:
        _add(T, f"AttentionSpec {kw}={label}", kw, an.AttentionSpec, **{kw: bad})
    for kw, bad, label in [("theta", 0.0, "0"), ("theta", np.inf, "inf"), ("layout", "x", "'x'"),
                           ("rotary_dim", -2, "-2"), ("rotary_dim", 3, "3"), ("rotary_dim", 4.0, "4.0"),
                           ("scaling", {"type": "yarn"}, "yarn without factor"),
                           ("scaling", "linear", "'linear'"),
                           ("scaling", {"type": "linear", "factor": -2.0}, "linear factor -2")]:
        _add(T, f"RoPE {kw}={label}", f"{kw} factor", an.RoPE, **{kw: bad})

    # additive attention
    pa = an.init_additive_params(8, rng=0)
    qa, ka, va = _arr(2, 4, 8), _arr(2, 5, 8), _arr(2, 5, 6)
    _add(T, "additive_attention q d 9 vs params d_q 8", "q params", an.additive_attention, _arr(2, 4, 9), ka,
         va, pa)
    _add(T, "additive_attention params missing a key", "params", an.additive_attention, qa, ka, va,
         dict(list(pa.items())[:1]))
    _add(T, "additive_attention mask float", "mask", an.additive_attention, qa, ka, va, pa,
         np.ones((4, 5)))
    _add(T, "additive_attention mask (S, L)", "mask", an.additive_attention, qa, ka, va, pa,
         np.ones((5, 4), bool))
    _add(T, "additive_attention is_causal=1", "is_causal", an.additive_attention, qa, ka, va, pa,
         is_causal=1)
    _add(T, "additive_attention_forward v S=6 vs k S=5", "k v", an.additive_attention_forward, qa, ka,
         _arr(2, 6, 6), pa)
    _add(T, "additive_attention_forward q int", "q", an.additive_attention_forward, qa.astype(int), ka, va,
         pa)
    ao, acache = an.additive_attention_forward(qa, ka, va, pa)
    _add(T, "additive_attention_backward dout wrong shape", "dout", an.additive_attention_backward,
         ao[..., :-1], acache)
    _add(T, "additive_attention_backward cache an SDPACache", "cache", an.additive_attention_backward,
         out, cache)
    _add(T, "init_additive_params d_q=0", "d_q", an.init_additive_params, 0)
    _add(T, "init_additive_params d_hidden=-1", "d_hidden", an.init_additive_params, 8, d_hidden=-1)
    _add(T, "init_additive_params kdim=1.5", "kdim", an.init_additive_params, 8, 1.5)
    _add(T, "init_additive_params dtype int", "dtype", an.init_additive_params, 8, dtype=np.int64)
    _add(T, "init_additive_params rng='x'", "rng", an.init_additive_params, 8, rng="x")

    # the scaling studies at the top level
    for fn in (an.dot_product_moments, an.softmax_saturation, an.softmax_gradients):
        n = fn.__name__
        _add(T, f"{n} d_ks=[0]", "d_ks", fn, [0])
        _add(T, f"{n} d_ks=[2.5]", "d_ks", fn, [2.5])
        _add(T, f"{n} d_ks=[]", "d_ks", fn, [])
        _add(T, f"{n} rng='x'", "rng", fn, [4], rng="x")
    _add(T, "dot_product_moments n_samples=0", "n_samples", an.dot_product_moments, [4], n_samples=0)
    _add(T, "dot_product_moments n_samples=True", "n_samples", an.dot_product_moments, [4], n_samples=True)
    _add(T, "softmax_saturation n_keys=0", "n_keys", an.softmax_saturation, [4], n_keys=0)
    _add(T, "softmax_saturation n_queries=-1", "n_queries", an.softmax_saturation, [4], n_queries=-1)
    _add(T, "softmax_gradients d_v=0", "d_v", an.softmax_gradients, [4], d_v=0)
    _add(T, "softmax_gradients n_keys=2.0", "n_keys", an.softmax_gradients, [4], n_keys=2.0)
    for kw, bad in [("scorings", ("bogus",)), ("scorings", "scaled"), ("steps", -1), ("batch", 0),
                    ("noise", -1.0), ("lr", 0.0), ("lr", np.nan), ("threshold", np.nan), ("n_eval", 0),
                    ("d_hidden", 0), ("seed", -1), ("n_keys", 1.5)]:
        _add(T, f"train_retrieval {kw}={bad!r}", kw, an.train_retrieval, [4],
             **{"steps": 1, "n_eval": 4, kw: bad})
    _add(T, "init_scoring_mha_params scoring='bogus'", "scoring", an.init_scoring_mha_params, 8, 2, 4,
         "bogus")
    _add(T, "init_scoring_mha_params d_k=0", "d_k", an.init_scoring_mha_params, 8, 2, 0, "scaled")
    _add(T, "init_scoring_mha_params num_heads=0", "num_heads", an.init_scoring_mha_params, 8, 0, 4, "scaled")
    ps = an.init_scoring_mha_params(8, 2, 4, "scaled", rng=0)
    pad = an.init_scoring_mha_params(8, 2, 4, "additive", rng=0)
    xs = _arr(2, 3, 8)
    _add(T, "scoring_mha_forward x d 9 vs params 8", "x params", an.scoring_mha_forward, _arr(2, 3, 9), ps,
         num_heads=2, scoring="scaled")
    _add(T, "scoring_mha_forward 'additive' with params of 'scaled'", "params scoring",
         an.scoring_mha_forward, xs, ps, num_heads=2, scoring="additive")
    _add(T, "scoring_mha_forward 'scaled' with params of 'additive'", "params scoring",
         an.scoring_mha_forward, xs, pad, num_heads=2, scoring="scaled")
    _add(T, "scoring_mha_forward num_heads=3 vs params of 2", "num_heads params", an.scoring_mha_forward, xs,
         ps, num_heads=3, scoring="scaled")
    _add(T, "scoring_mha_forward scoring=None", "scoring", an.scoring_mha_forward, xs, ps, num_heads=2,
         scoring=None)
    so, scc = an.scoring_mha_forward(xs, ps, num_heads=2, scoring="scaled")
    _add(T, "scoring_mha_backward dout (.., 7)", "dout", an.scoring_mha_backward, so[..., :-1], scc)
    _add(T, "scoring_mha_backward cache=None", "cache", an.scoring_mha_backward, so, None)


# ----------------------------------------------------------------------------------------------
# KV caches and decoding (state: the cache must not change on a refused call)
# ----------------------------------------------------------------------------------------------

def _decoding():
    import attention_np as an

    T = "decode"
    for bad, label in [(-1, "-1"), (2.5, "2.5"), (True, "True"), (None, "None"), ("8", "'8'"),
                       (np.nan, "nan")]:
        _add(T, f"KVCache max_len={label}", "max_len", an.KVCache, bad)
    _add(T, "KVCache key_norm='rms'", "key_norm", an.KVCache, 8, key_norm="rms")

    p = an.init_mha_params(12, 3, rng=0)
    p2 = an.init_mha_params(16, 2, rng=0)

    def filled(max_len=8, n=3):
        c = an.KVCache(max_len)
        an.mha_decode_step(_arr(2, n, 12), p, c, num_heads=3)
        return c

    def state_row(label, names, make_call):
        def setup():
            c = filled()
            call = make_call(c)
            return call, (lambda: _fp(c))
        _add_state(T, label, names, setup)

    state_row("KVCache.append k d 5 vs cached 4", "k_new k",
              lambda c: (lambda: c.append(_arr(2, 3, 1, 5), _arr(2, 3, 1, 4))))
    state_row("KVCache.append k (.., 1, 4), v (.., 2, 4)", "k_new v_new",
              lambda c: (lambda: c.append(_arr(2, 3, 1, 4), _arr(2, 3, 2, 4))))
    state_row("KVCache.append float32 into a float64 cache", "k_new dtype",
              lambda c: (lambda: c.append(_arr(2, 3, 1, 4, dtype=np.float32),
                                          _arr(2, 3, 1, 4, dtype=np.float32))))
    state_row("KVCache.append batch 3 into a batch-2 cache", "k_new batch",
              lambda c: (lambda: c.append(_arr(3, 3, 1, 4), _arr(3, 3, 1, 4))))
    state_row("KVCache.append past max_len (3 + 6 > 8)", "max_len",
              lambda c: (lambda: c.append(_arr(2, 3, 6, 4), _arr(2, 3, 6, 4))))
    state_row("KVCache.append k int", "k_new",
              lambda c: (lambda: c.append(np.ones((2, 3, 1, 4), int), np.ones((2, 3, 1, 4), int))))
    state_row("KVCache.append k complex", "k_new",
              lambda c: (lambda: c.append(np.zeros((2, 3, 1, 4), complex), np.zeros((2, 3, 1, 4), complex))))
    state_row("KVCache.reorder indices out of range", "indices beam_idx index",
              lambda c: (lambda: c.reorder(np.array([0, 5]))))
    state_row("KVCache.reorder float indices", "indices beam_idx index",
              lambda c: (lambda: c.reorder(np.array([0.0, 1.0]))))
    state_row("KVCache.length = 1 (read-only)", "length",
              lambda c: (lambda: setattr(c, "length", 1)))
    state_row("mha_decode_step x d_model 13", "x",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 13), p, c, num_heads=3)))
    state_row("mha_decode_step x batch 3 into batch-2 cache", "x kv_cache",
              lambda c: (lambda: an.mha_decode_step(_arr(3, 1, 12), p, c, num_heads=3)))
    state_row("mha_decode_step past max_len", "kv_cache max_len",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 6, 12), p, c, num_heads=3)))
    state_row("mha_decode_step mask (B,1,1,S-1)", "mask",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3,
                                                    mask=np.ones((2, 1, 1, 3), bool))))
    state_row("mha_decode_step mask float", "mask",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3,
                                                    mask=np.ones((2, 1, 1, 4)))))
    state_row("mha_decode_step bias (h, 1, S+1)", "bias",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3,
                                                    bias=np.zeros((3, 1, 5)))))
    state_row("mha_decode_step num_heads=2 (cache of 3 heads)", "num_heads kv_cache",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), an.init_mha_params(12, 2, rng=0), c,
                                                    num_heads=2)))
    state_row("mha_decode_step params of another layer (16, 2 heads)", "x params W_q",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 16), p2, c, num_heads=2)))
    state_row("mha_decode_step num_heads=5", "num_heads",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=5)))
    state_row("mha_decode_step scale=nan", "scale",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3, scale=np.nan)))
    state_row("mha_decode_step positions (2,) for T=1", "positions",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3,
                                                    spec=an.AttentionSpec(rope=an.RoPE()),
                                                    positions=np.array([3, 4]))))
    state_row("mha_decode_step spec dropout", "dropout_p spec",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12), p, c, num_heads=3,
                                                    spec=an.AttentionSpec(dropout_p=0.5))))
    state_row("mha_decode_step x float32 into a float64 cache", "x dtype kv_cache",
              lambda c: (lambda: an.mha_decode_step(_arr(2, 1, 12, dtype=np.float32),
                                                    {kk: vv.astype(np.float32) for kk, vv in p.items()}, c,
                                                    num_heads=3)))
    _add(T, "mha_decode_step kv_cache=None", "kv_cache", an.mha_decode_step, _arr(2, 1, 12), p, None,
         num_heads=3)
    _add(T, "mha_decode_step kv_cache a dict", "kv_cache", an.mha_decode_step, _arr(2, 1, 12), p, {},
         num_heads=3)
    _add(T, "mha_decode_step x 1-d", "x", an.mha_decode_step, _arr(12), p, an.KVCache(4), num_heads=3)
    _add(T, "mha_decode_step x int", "x", an.mha_decode_step, np.ones((2, 1, 12), int), p, an.KVCache(4),
         num_heads=3)
    mem = _arr(2, 5, 12)
    _add(T, "cross_kv_cache memory d 11", "memory", an.cross_kv_cache, _arr(2, 5, 11), p, num_heads=3)
    _add(T, "cross_kv_cache memory int", "memory", an.cross_kv_cache, np.ones((2, 5, 12), int), p,
         num_heads=3)
    _add(T, "cross_kv_cache num_heads=0", "num_heads", an.cross_kv_cache, mem, p, num_heads=0)
    _add(T, "cross_kv_cache params=None", "params", an.cross_kv_cache, mem, None, num_heads=3)
    _add(T, "cross_kv_cache RoPE in spec", "rope spec", an.cross_kv_cache, mem, p, num_heads=3,
         spec=an.AttentionSpec(rope=an.RoPE()))
    cc = an.cross_kv_cache(mem, p, num_heads=3)
    _add(T, "mha_cross_decode_step x d 13", "x", an.mha_cross_decode_step, _arr(2, 1, 13), p, cc, num_heads=3)
    _add(T, "mha_cross_decode_step x batch 3 vs memory 2", "x kv_cache", an.mha_cross_decode_step,
         _arr(3, 1, 12), p, cc, num_heads=3)
    _add(T, "mha_cross_decode_step empty self cache", "kv_cache", an.mha_cross_decode_step, _arr(2, 1, 12),
         p, an.KVCache(4), num_heads=3)
    _add(T, "mha_cross_decode_step mask (B,1,1,S+1)", "mask", an.mha_cross_decode_step, _arr(2, 1, 12), p,
         cc, num_heads=3, mask=np.ones((2, 1, 1, 6), bool))
    _add(T, "mha_cross_decode_step num_heads=2 vs cache of 3", "num_heads kv_cache",
         an.mha_cross_decode_step, _arr(2, 1, 12), an.init_mha_params(12, 2, rng=0), cc, num_heads=2)


# ----------------------------------------------------------------------------------------------
# nn
# ----------------------------------------------------------------------------------------------

def _nn():
    from attention_np import nn

    T = "nn"
    x = _arr(2, 3, 4)
    _add(T, "erf x str", "x", nn.erf, "1.0")
    _add(T, "erf x complex", "x", nn.erf, np.ones(3, complex))
    _add(T, "erf x object", "x", nn.erf, np.ones(3, object))
    _add(T, "gelu_forward x int", "x", nn.gelu_forward, np.ones(3, int))
    _add(T, "gelu_forward x complex", "x", nn.gelu_forward, np.ones(3, complex))
    _add(T, "gelu_backward dy (2, 3, 5) vs x (2, 3, 4)", "dy x", nn.gelu_backward, _arr(2, 3, 5), x)
    _add(T, "gelu_backward dy (3, 4): broadcasts against x", "dy x", nn.gelu_backward, _arr(3, 4), x)
    _add(T, "relu_forward x object", "x", nn.relu_forward, np.ones(3, object))
    _add(T, "relu_forward x a list of str", "x", nn.relu_forward, ["1.0", "-1.0"])
    _add(T, "relu_backward dy (1, 3, 4) broadcasts against x", "dy x", nn.relu_backward, _arr(1, 3, 4), x)
    W = _arr(7, 4)
    tok = np.array([[0, 1, 2]])
    _add(T, "embedding_forward tokens float", "tokens", nn.embedding_forward, tok.astype(float), W)
    _add(T, "embedding_forward token 7 >= V=7", "tokens", nn.embedding_forward, np.array([[0, 7]]), W)
    _add(T, "embedding_forward token -1", "tokens", nn.embedding_forward, np.array([[0, -1]]), W)
    _add(T, "embedding_forward tokens bool", "tokens", nn.embedding_forward, np.array([[True, False]]), W)
    _add(T, "embedding_forward W_emb 1-d", "W_emb", nn.embedding_forward, tok, np.zeros(7))
    _add(T, "embedding_forward W_emb int", "W_emb", nn.embedding_forward, tok, np.zeros((7, 4), int))
    _add(T, "embedding_forward scale=nan", "scale", nn.embedding_forward, tok, W, scale=np.nan)
    _add(T, "embedding_forward scale='2'", "scale", nn.embedding_forward, tok, W, scale="2")
    _add(T, "embedding_forward scale=True", "scale", nn.embedding_forward, tok, W, scale=True)
    e, ecache = nn.embedding_forward(tok, W)
    _add(T, "embedding_backward dx (1, 3, 5)", "dx", nn.embedding_backward, _arr(1, 3, 5), ecache)
    _add(T, "embedding_backward dx (3, 4) (batch dropped)", "dx", nn.embedding_backward, _arr(3, 4), ecache)
    _add(T, "embedding_backward cache=None", "cache", nn.embedding_backward, e, None)
    fp = nn.init_ffn_params(4, 6, rng=0)
    _add(T, "ffn_forward activation='tanh'", "activation", nn.ffn_forward, x, fp, activation="tanh")
    _add(T, "ffn_forward activation=None", "activation", nn.ffn_forward, x, fp, activation=None)
    _add(T, "ffn_forward params missing W_2", "params W_2", nn.ffn_forward, x,
         {kk: vv for kk, vv in fp.items() if kk != "W_2"})
    _add(T, "ffn_forward x d 5 vs W_1 (4, 6)", "x W_1 params", nn.ffn_forward, _arr(2, 3, 5), fp)
    _add(T, "ffn_forward x int", "x", nn.ffn_forward, np.ones((2, 3, 4), int), fp)
    fo, fcache = nn.ffn_forward(x, fp)
    _add(T, "ffn_backward dout (2, 3, 5)", "dout", nn.ffn_backward, _arr(2, 3, 5), fcache)
    _add(T, "ffn_backward dout (3, 4) broadcastable", "dout", nn.ffn_backward, _arr(3, 4), fcache)
    _add(T, "init_ffn_params d_ff=0", "d_ff", nn.init_ffn_params, 4, 0)
    _add(T, "init_ffn_params d_model=-1", "d_model", nn.init_ffn_params, -1, 6)
    _add(T, "init_ffn_params d_model=4.0", "d_model", nn.init_ffn_params, 4.0, 6)
    _add(T, "init_ffn_params dtype int", "dtype", nn.init_ffn_params, 4, 6, dtype=np.int32)
    g, b = np.ones(4), np.zeros(4)
    _add(T, "layernorm_forward gamma (5,)", "gamma", nn.layernorm_forward, x, np.ones(5), b)
    _add(T, "layernorm_forward beta (1,)", "beta", nn.layernorm_forward, x, g, np.zeros(1))
    _add(T, "layernorm_forward gamma (3, 4) broadcastable", "gamma", nn.layernorm_forward, x,
         np.ones((3, 4)), b)
    _add(T, "layernorm_forward eps=-1", "eps", nn.layernorm_forward, x, g, b, eps=-1.0)
    _add(T, "layernorm_forward eps=nan", "eps", nn.layernorm_forward, x, g, b, eps=np.nan)
    _add(T, "layernorm_forward eps='1e-5'", "eps", nn.layernorm_forward, x, g, b, eps="1e-5")
    _add(T, "layernorm_forward x int", "x", nn.layernorm_forward, np.ones((2, 4), int), g, b)
    lo, lcache = nn.layernorm_forward(x, g, b)
    _add(T, "layernorm_backward dy (2, 3, 5)", "dy", nn.layernorm_backward, _arr(2, 3, 5), lcache)
    _add(T, "layernorm_backward dy (1, 4) broadcastable", "dy", nn.layernorm_backward, _arr(1, 4), lcache)
    logits = _arr(2, 3, 5)
    t = np.array([[0, 1, 2], [3, 4, 0]])
    _add(T, "cross_entropy_forward targets float", "targets", nn.cross_entropy_forward, logits,
         t.astype(float))
    _add(T, "cross_entropy_forward target 5 >= V=5", "targets", nn.cross_entropy_forward, logits,
         np.array([[0, 1, 5], [0, 0, 0]]))
    _add(T, "cross_entropy_forward target -1", "targets", nn.cross_entropy_forward, logits,
         np.array([[0, 1, -1], [0, 0, 0]]))
    _add(T, "cross_entropy_forward targets (2, 4) vs logits (2, 3, .)", "targets logits",
         nn.cross_entropy_forward, logits, np.zeros((2, 4), int))
    _add(T, "cross_entropy_forward targets (3,) broadcastable", "targets logits", nn.cross_entropy_forward,
         logits, np.zeros(3, int))
    _add(T, "cross_entropy_forward label_smoothing=1.5", "label_smoothing", nn.cross_entropy_forward, logits,
         t, label_smoothing=1.5)
    _add(T, "cross_entropy_forward label_smoothing=-0.1", "label_smoothing", nn.cross_entropy_forward, logits,
         t, label_smoothing=-0.1)
    _add(T, "cross_entropy_forward label_smoothing=nan", "label_smoothing", nn.cross_entropy_forward, logits,
         t, label_smoothing=np.nan)
    _add(T, "cross_entropy_forward logits int", "logits", nn.cross_entropy_forward, np.ones((2, 3, 5), int),
         t)
    _, ccache = nn.cross_entropy_forward(logits, t)
    _add(T, "cross_entropy_backward dloss='1'", "dloss", nn.cross_entropy_backward, "1", ccache)
    _add(T, "cross_entropy_backward dloss=nan", "dloss", nn.cross_entropy_backward, np.nan, ccache)
    _add(T, "cross_entropy_backward dloss array of 2", "dloss", nn.cross_entropy_backward,
         np.array([1.0, 2.0]), ccache)
    _add(T, "cross_entropy_backward cache an FFNCache", "cache", nn.cross_entropy_backward, 1.0, fcache)
    for kw, bad in [("vocab_size", 0), ("max_len", 0), ("d_model", 10), ("num_heads", 0), ("d_ff", 0),
                    ("num_layers", -1), ("activation", "tanh"), ("positional", 1), ("d_model", 64.0),
                    ("vocab_size", True), ("max_len", np.float64(10))]:
        _add(T, f"ModelConfig {kw}={bad!r}", f"{kw} num_heads", nn.ModelConfig, **{kw: bad})
    cfg = nn.ModelConfig(vocab_size=7, max_len=6, d_model=8, num_heads=2, d_ff=16, num_layers=1)
    cfg2 = nn.ModelConfig(vocab_size=7, max_len=6, d_model=12, num_heads=2, d_ff=16, num_layers=1)
    _add(T, "init_model config a dict", "config", nn.init_model, {"vocab_size": 7})
    _add(T, "init_model dtype int", "dtype", nn.init_model, cfg, dtype=np.int64)
    _add(T, "init_model rng='x'", "rng", nn.init_model, cfg, rng="x")
    mp = nn.init_model(cfg, rng=0)
    tk = np.array([[0, 1, 2, 3]])
    _add(T, "model_forward tokens longer than max_len 6", "tokens max_len", nn.model_forward, mp,
         np.zeros((1, 7), int), cfg)
    _add(T, "model_forward token 7 >= vocab 7", "tokens vocab_size", nn.model_forward, mp,
         np.array([[0, 7]]), cfg)
    _add(T, "model_forward tokens float", "tokens", nn.model_forward, mp, tk.astype(float), cfg)
    _add(T, "model_forward tokens 0-d", "tokens", nn.model_forward, mp, np.array(1), cfg)
    _add(T, "model_forward params of d_model 12 with config of 8", "params config", nn.model_forward,
         nn.init_model(cfg2, rng=0), tk, cfg)
    _add(T, "model_forward config=None", "config", nn.model_forward, mp, tk, None)
    lg, mcache = nn.model_forward(mp, tk, cfg)
    _add(T, "model_backward dlogits (1, 4, 8)", "dlogits", nn.model_backward, _arr(1, 4, 8), mcache)
    _add(T, "model_backward dlogits (4, 7) broadcastable", "dlogits", nn.model_backward, _arr(4, 7), mcache)
    for kw, bad in [("src_vocab", 0), ("tgt_vocab", -1), ("dropout_p", 1.5), ("dropout_p", np.nan),
                    ("num_encoder_layers", 1.0), ("share_embeddings", "yes"), ("max_tgt_len", 0),
                    ("activation", "swish"), ("d_model", 30)]:
        args = {"src_vocab": 6, "tgt_vocab": 5, kw: bad}
        _add(T, f"Seq2SeqConfig {kw}={bad!r}", f"{kw} num_heads", nn.Seq2SeqConfig, **args)
    _add(T, "Seq2SeqConfig share_embeddings with src_vocab 6 != tgt_vocab 5",
         "share_embeddings src_vocab tgt_vocab", nn.Seq2SeqConfig, 6, 5, share_embeddings=True)
    sc = nn.Seq2SeqConfig(6, 5, max_src_len=5, max_tgt_len=4, d_model=8, num_heads=2, d_ff=8,
                          num_encoder_layers=1, num_decoder_layers=1)
    sc2 = nn.Seq2SeqConfig(6, 5, max_src_len=5, max_tgt_len=4, d_model=12, num_heads=2, d_ff=8,
                           num_encoder_layers=1, num_decoder_layers=1)
    _add(T, "init_seq2seq with a ModelConfig", "config", nn.init_seq2seq, cfg)
    sp = nn.init_seq2seq(sc, rng=0)
    src, tgt = np.array([[0, 1, 2]]), np.array([[0, 1]])
    _add(T, "seq2seq_forward src longer than max_src_len", "src max_src_len", nn.seq2seq_forward, sp,
         np.zeros((1, 6), int), tgt, sc)
    _add(T, "seq2seq_forward tgt_in id 5 >= tgt_vocab", "tgt_in tgt_vocab", nn.seq2seq_forward, sp, src,
         np.array([[0, 5]]), sc)
    _add(T, "seq2seq_forward src batch 1 vs tgt_in batch 2", "src tgt_in", nn.seq2seq_forward, sp, src,
         np.zeros((2, 2), int), sc)
    _add(T, "seq2seq_forward src_mask float", "src_mask", nn.seq2seq_forward, sp, src, tgt, sc,
         src_mask=np.ones((1, 3)))
    _add(T, "seq2seq_forward src_mask (1, 4)", "src_mask", nn.seq2seq_forward, sp, src, tgt, sc,
         src_mask=np.ones((1, 4), bool))
    _add(T, "seq2seq_forward src_mask (3,) broadcastable", "src_mask", nn.seq2seq_forward, sp, src, tgt, sc,
         src_mask=np.ones(3, bool))
    _add(T, "seq2seq_forward is_causal='no'", "is_causal", nn.seq2seq_forward, sp, src, tgt, sc,
         is_causal="no")
    _add(T, "seq2seq_forward params of d_model 12", "params config", nn.seq2seq_forward,
         nn.init_seq2seq(sc2, rng=0), src, tgt, sc)
    _add(T, "seq2seq_forward config a ModelConfig", "config", nn.seq2seq_forward, sp, src, tgt, cfg)
    slg, scache = nn.seq2seq_forward(sp, src, tgt, sc)
    _add(T, "seq2seq_backward dlogits (1, 2, 6)", "dlogits", nn.seq2seq_backward, _arr(1, 2, 6), scache)
    for a, b2, label, names in [(-1, 8, "length=-1", "length"), (4, 0, "d_model=0", "d_model"),
                                (4.0, 8, "length=4.0", "length"), (4, True, "d_model=True", "d_model")]:
        _add(T, f"sinusoidal_encoding {label}", names, nn.sinusoidal_encoding, a, b2)
    _add(T, "sinusoidal_encoding dtype int", "dtype", nn.sinusoidal_encoding, 4, 8, dtype=np.int32)


# ----------------------------------------------------------------------------------------------
# training (state: params and the optimizer must not change on a refused call)
# ----------------------------------------------------------------------------------------------

def _training():
    from attention_np import nn, training

    T = "training"

    def adam_row(label, names, mutate):
        def setup():
            params = {"W": _arr(3, 2), "b": np.zeros(2)}
            grads = {"W": _arr(3, 2), "b": np.ones(2)}
            state = training.adam_init(params)
            training.adam_step(params, grads, state, lr=1e-3)  # one honest step first
            call_kwargs = {"lr": 1e-3}
            call = mutate(params, grads, state, call_kwargs)
            return call, (lambda: (_fp(params), _fp(state)))
        _add_state(T, label, names, setup)

    for kw, bad in [("lr", 0.0), ("lr", -1.0), ("lr", np.inf), ("lr", "1e-3"), ("lr", True),
                    ("beta1", 1.0), ("beta1", -0.1), ("beta2", np.nan), ("eps", 0.0), ("eps", np.inf)]:
        adam_row(f"adam_step {kw}={bad!r}", kw,
                 lambda p, g, s, kw_, kw=kw, bad=bad: (
                     lambda: training.adam_step(p, g, s, **{**kw_, kw: bad})))
    adam_row("adam_step grads missing 'b'", "grads b",
             lambda p, g, s, kw_: (lambda: training.adam_step(p, {"W": g["W"]}, s, **kw_)))
    adam_row("adam_step grads with an extra key", "grads extra",
             lambda p, g, s, kw_: (lambda: training.adam_step(p, {**g, "c": np.ones(1)}, s, **kw_)))
    adam_row("adam_step grads['W'] float32 for a float64 param", "grads W dtype",
             lambda p, g, s, kw_: (
                 lambda: training.adam_step(p, {**g, "W": g["W"].astype(np.float32)}, s, **kw_)))
    adam_row("adam_step grads['b'] (1, 2) broadcastable", "grads b",
             lambda p, g, s, kw_: (lambda: training.adam_step(p, {**g, "b": np.ones((1, 2))}, s, **kw_)))
    adam_row("adam_step grads['W'] a list", "grads W",
             lambda p, g, s, kw_: (lambda: training.adam_step(p, {**g, "W": g["W"].tolist()}, s, **kw_)))
    adam_row("adam_step a state of other params", "state",
             lambda p, g, s, kw_: (lambda: training.adam_step(
                 p, g, training.adam_init({"X": np.zeros(3)}), **kw_)))
    adam_row("adam_step state=None", "state",
             lambda p, g, s, kw_: (lambda: training.adam_step(p, g, None, **kw_)))
    adam_row("adam_step params['W'] int", "params W",
             lambda p, g, s, kw_: (lambda: training.adam_step({**p, "W": np.ones((3, 2), int)}, g, s, **kw_)))
    _add(T, "adam_init params=None", "params", training.adam_init, None)
    _add(T, "adam_init params with a list value", "params", training.adam_init, {"W": [1.0, 2.0]})
    _add(T, "adam_init params with an int array", "params W", training.adam_init, {"W": np.ones(2, int)})
    _add(T, "AdamState t=-1", "t", training.AdamState, t=-1)
    _add(T, "AdamState t=1.5", "t", training.AdamState, t=1.5)
    for kw, bad in [("step", 0), ("step", -1), ("step", 1.5), ("d_model", 0), ("warmup", 0),
                    ("factor", np.nan), ("step", True), ("factor", -1.0)]:
        args = {"step": 1, "d_model": 64, kw: bad}
        _add(T, f"transformer_lr {kw}={bad!r}", kw, training.transformer_lr, **args)
    for kw, bad in [("length", 0), ("length", -1), ("vocab_size", 1), ("length", 2.5), ("vocab_size", True)]:
        _add(T, f"ReversalTask {kw}={bad!r}", kw, training.ReversalTask, **{kw: bad})
    cfg = nn.ModelConfig(vocab_size=7, max_len=6, d_model=8, num_heads=2, d_ff=16, num_layers=1)
    cfg2 = nn.ModelConfig(vocab_size=7, max_len=6, d_model=12, num_heads=2, d_ff=16, num_layers=1)
    mp = nn.init_model(cfg, rng=0)
    tok = np.zeros((3, 6), int)
    _add(T, "evaluate tokens float", "tokens", training.evaluate, mp, cfg, tok.astype(float), tok)
    _add(T, "evaluate N=0", "tokens", training.evaluate, mp, cfg, tok[:0], tok[:0])
    _add(T, "evaluate targets (3, 5) vs tokens (3, 6)", "targets tokens", training.evaluate, mp, cfg, tok,
         tok[:, :5])
    _add(T, "evaluate targets id 7 >= vocab", "targets", training.evaluate, mp, cfg, tok, tok + 7)
    _add(T, "evaluate batch_size=0", "batch_size", training.evaluate, mp, cfg, tok, tok, batch_size=0)
    _add(T, "evaluate batch_size=2.0", "batch_size", training.evaluate, mp, cfg, tok, tok, batch_size=2.0)
    _add(T, "evaluate params of another config", "params config", training.evaluate, nn.init_model(cfg2),
         cfg, tok, tok)
    small = {"config": cfg, "steps": 1, "batch_size": 2}
    for kw, bad in [("config", "x"), ("task", training.ReversalTask(length=8)), ("task", "reverse"),
                    ("task", training.ReversalTask(length=6, vocab_size=9)), ("steps", 1.5),
                    ("batch_size", True), ("warmup", -1), ("cooldown", 5), ("cooldown", -1),
                    ("snapshot_at", (-1,)), ("snapshot_at", (5,)), ("snapshot_at", 1),
                    ("dtype", np.int32), ("dtype", np.float16), ("eval_every", 0), ("eval_every", -1),
                    ("seed", "x"), ("lr_factor", 0.0), ("lr_factor", -1.0), ("on_step", "print")]:
        _add(T, f"train {kw}={bad!r}", f"{kw} max_len vocab_size", training.train, **{**small, kw: bad})


# ----------------------------------------------------------------------------------------------
# studies, lessons
# ----------------------------------------------------------------------------------------------

def _studies():
    from attention_np.nn import ModelConfig, sinusoidal_encoding
    from attention_np.studies import (
        compare_scoring,
        head_subspaces,
        positions,
        scaling,
        scoring_in_model,
        scoring_model,
        trained_scaling,
    )

    T = "studies"
    pe = sinusoidal_encoding(8, 8)
    _add(T, "sinusoid_wavelengths d_model=0", "d_model", positions.sinusoid_wavelengths, 0)
    _add(T, "sinusoid_wavelengths d_model=7 odd", "d_model", positions.sinusoid_wavelengths, 7)
    _add(T, "measured_wavelengths pe 1-d", "pe", positions.measured_wavelengths, np.zeros(8), [0])
    _add(T, "measured_wavelengths pairs [9] out of range", "pairs", positions.measured_wavelengths, pe, [9])
    _add(T, "measured_wavelengths pairs [-1]", "pairs", positions.measured_wavelengths, pe, [-1])
    _add(T, "shift_matrix k=1.5", "k", positions.shift_matrix, 1.5, 8)
    _add(T, "shift_matrix d_model=7", "d_model", positions.shift_matrix, 1, 7)
    _add(T, "dot_by_distance pe 1-d", "pe", positions.dot_by_distance, np.zeros(8))
    _add(T, "dot_by_distance pe int", "pe", positions.dot_by_distance, np.zeros((8, 8), int))
    _add(T, "dot_closed_form distance 'x'", "distance", positions.dot_closed_form, "x", 8)
    _add(T, "dot_closed_form d_model=0", "d_model", positions.dot_closed_form, np.arange(3), 0)
    _add(T, "position_blind_accuracy length=0", "length", positions.position_blind_accuracy, 0, 10)
    _add(T, "position_blind_accuracy vocab_size=0", "vocab_size", positions.position_blind_accuracy, 4, 0)
    _add(T, "position_blind_guesses tokens float", "tokens", positions.position_blind_guesses,
         np.zeros((2, 3)), 10)
    _add(T, "position_blind_guesses token 10 >= vocab 10", "tokens vocab_size",
         positions.position_blind_guesses,
         np.full((2, 3), 10), 10)
    _add(T, "position_blind_predict vocab_size=-1", "vocab_size", positions.position_blind_predict,
         np.zeros((2, 3), int), -1)
    small = ModelConfig(vocab_size=6, max_len=5, d_model=8, num_heads=2, d_ff=8, num_layers=1)
    for kw, bad in [("seeds", (-1,)), ("seeds", 0), ("steps", -1), ("batch_size", 0), ("snapshot_at", (-1,)),
                    ("config", "x")]:
        _add(T, f"train_with_and_without_positions {kw}={bad!r}", kw,
             positions.train_with_and_without_positions,
             **{"config": small, "steps": 1, "batch_size": 2, kw: bad})
    _add(T, "ShiftTask length=0", "length", positions.ShiftTask, 0)
    _add(T, "ShiftTask vocab_size=1.5", "vocab_size", positions.ShiftTask, 4, 1.5)
    _add(T, "extrapolation test_lengths=(0,)", "test_lengths", positions.extrapolation, config=small, steps=1,
         test_lengths=(0,))
    _add(T, "extrapolation n=0", "n", positions.extrapolation, config=small, steps=1, n=0)
    _add(T, "check_d_ks [0, 4]", "d_ks", scaling.check_d_ks, [0, 4])
    _add(T, "check_d_ks [[4]] 2-d", "d_ks", scaling.check_d_ks, [[4]])
    res = scaling.dot_product_moments([4], n_samples=10, rng=0)
    _add(T, "format_table columns ['bogus']", "columns", scaling.format_table, res, ["bogus"])
    _add(T, "format_table digits=-1", "digits", scaling.format_table, res, list(res)[:1], digits=-1)
    _add(T, "init_scoring_params scoring='bogus'", "scoring", compare_scoring.init_scoring_params, "bogus",
         8, 4,
         np.random.default_rng(0))
    _add(T, "init_scoring_params d_k=0", "d_k", compare_scoring.init_scoring_params, "scaled", 8, 0,
         np.random.default_rng(0))
    _add(T, "steps_to_threshold threshold nan", "threshold", compare_scoring.steps_to_threshold, np.ones(30),
         np.nan)
    _add(T, "steps_to_threshold window=0", "window", compare_scoring.steps_to_threshold, np.ones(30), 0.5,
         window=0)
    _add(T, "steps_to_threshold curve 2-d", "curve", compare_scoring.steps_to_threshold, np.ones((3, 30)),
         0.5)
    _add(T, "retrieval_batch batch=0", "batch", compare_scoring.retrieval_batch, np.random.default_rng(0),
         np.eye(4), 0, 4, 4, 0.5)
    _add(T, "retrieval_batch noise=-1", "noise", compare_scoring.retrieval_batch, np.random.default_rng(0),
         np.eye(4), 2, 4, 4, -1.0)
    _add(T, "head_subspaces.make_batch task='bogus'", "task", head_subspaces.make_batch,
         np.random.default_rng(0), 2, 8, 8, task="bogus")
    _add(T, "head_subspaces.make_batch batch=0", "batch", head_subspaces.make_batch, np.random.default_rng(0),
         0, 8, 8)
    _add(T, "head_subspaces.train_one num_heads=0", "num_heads", head_subspaces.train_one, 0, 0, steps=1)
    _add(T, "head_subspaces.train_one task='bogus'", "task", head_subspaces.train_one, 1, 0, steps=1,
         task="bogus")
    _add(T, "head_subspaces.train_one steps=-1", "steps", head_subspaces.train_one, 1, 0, steps=-1)
    _add(T, "head_subspaces.train_one lr=nan", "lr", head_subspaces.train_one, 1, 0, steps=1, lr=np.nan)
    _add(T, "head_subspaces.best_single_head_readout weights 1-d", "weights",
         head_subspaces.best_single_head_readout, np.zeros(8))
    _add(T, "head_subspaces.run_study heads=(0,)", "heads num_heads", head_subspaces.run_study, heads=(0,),
         seeds=(0,), steps=1)
    _add(T, "head_subspaces.unexplained shapes (3,) vs (4,)", "y_hat y", head_subspaces.unexplained,
         np.zeros(3), np.zeros(4))
    _add(T, "scoring_in_model.peak_lr warmup=0", "warmup", scoring_in_model.peak_lr, 1, 1e-3, 0)
    _add(T, "scoring_in_model.peak_lr peak=-1", "peak", scoring_in_model.peak_lr, 1, -1.0, 10)
    _add(T, "scoring_in_model.steps_to window=0", "window", scoring_in_model.steps_to, np.ones(30), 0.5,
         window=0)
    _add(T, "scoring_in_model.load missing file", "path /nonexistent/x.json", scoring_in_model.load,
         "/nonexistent/x.json")
    _add(T, "scoring_in_model.summary_table {}", "result", scoring_in_model.summary_table, {})
    sconf = scoring_model.ScoringConfig(d_k=4, vocab_size=6, max_len=5, d_model=8, num_heads=2, d_ff=8,
                                        num_layers=1)
    _add(T, "scoring_in_model.train_one lr=0", "lr", scoring_in_model.train_one, sconf, lr=0.0, steps=1,
         batch_size=2, warmup=1, seed=0)
    _add(T, "scoring_in_model.train_one steps=-1", "steps", scoring_in_model.train_one, sconf, lr=1e-3,
         steps=-1, batch_size=2, warmup=1, seed=0)
    _add(T, "scoring_in_model.run_study steps=-1", "steps", scoring_in_model.run_study, d_ks=(4,),
         scorings=("scaled",), lrs=(1e-3,), seeds=(0,), steps=-1)
    for kw, bad in [("scoring", "bogus"), ("d_k", 0), ("num_heads", 0), ("vocab_size", 1.5)]:
        _add(T, f"ScoringConfig {kw}={bad!r}", kw, scoring_model.ScoringConfig, **{kw: bad})
    _add(T, "init_scoring_model with a ModelConfig", "config", scoring_model.init_scoring_model, small)
    smp = scoring_model.init_scoring_model(sconf, rng=0)
    _add(T, "scoring_model_forward token 6 >= vocab 6", "tokens", scoring_model.scoring_model_forward, smp,
         np.full((1, 3), 6), sconf)
    _add(T, "scoring_model_forward tokens longer than max_len", "tokens max_len",
         scoring_model.scoring_model_forward, smp, np.zeros((1, 6), int), sconf)
    _add(T, "attention_statistics q d 4 vs k d 5", "q k", trained_scaling.attention_statistics,
         _arr(1, 2, 3, 4), _arr(1, 2, 3, 5))
    _add(T, "attention_statistics q 3-d", "q", trained_scaling.attention_statistics, _arr(2, 3, 4),
         _arr(2, 3, 4))
    _add(T, "attention_statistics mask float", "mask", trained_scaling.attention_statistics,
         _arr(1, 2, 3, 4), _arr(1, 2, 3, 4), np.ones((3, 3)))
    _add(T, "attention_statistics mask (4, 3) for L=S=3", "mask", trained_scaling.attention_statistics,
         _arr(1, 2, 3, 4), _arr(1, 2, 3, 4), np.ones((4, 3), bool))
    _add(T, "attention_statistics rng='x'", "rng", trained_scaling.attention_statistics, _arr(1, 2, 3, 4),
         _arr(1, 2, 3, 4), rng="x")
    from attention_np import nn
    mp = nn.init_model(small, rng=0)
    _add(T, "encoder_statistics params of another config", "params config",
         trained_scaling.encoder_statistics,
         mp, ModelConfig(vocab_size=6, max_len=5, d_model=12, num_heads=2, d_ff=8, num_layers=1),
         np.zeros((1, 5), int))
    _add(T, "encoder_statistics tokens float", "tokens", trained_scaling.encoder_statistics, mp, small,
         np.zeros((1, 5)))


@functools.lru_cache(maxsize=1)
def _other_npz() -> str:
    """An .npz that no function of the package wrote (one array ``a``)."""
    import tempfile
    path = f"{tempfile.mkdtemp(prefix='bad_calls_')}/other.npz"
    np.savez(path, a=np.zeros(3))
    return path


def _lessons():
    from attention_np.lessons import dates_schedule, examples, reversal_schedule, timing

    T = "lessons"
    f = {"a": lambda: None}
    _add(T, "best_times contestants {}", "contestants", timing.best_times, {})
    _add(T, "best_times a non-callable contestant", "contestants a", timing.best_times, {"a": 3})
    _add(T, "best_times contestants a list", "contestants", timing.best_times, [lambda: None])
    _add(T, "best_times repeat=0", "repeat", timing.best_times, f, repeat=0)
    _add(T, "best_times min_seconds=-1", "min_seconds", timing.best_times, f, min_seconds=-1.0)
    _add(T, "best_times min_seconds=nan", "min_seconds", timing.best_times, f, min_seconds=np.nan)
    _add(T, "best_times threads=0", "threads", timing.best_times, f, threads=0)
    _add(T, "best_times clock='wall-clock'", "clock", timing.best_times, f, clock="wall-clock")
    _add(T, "gflops seconds=0", "seconds", timing.gflops, 1e9, 0.0)
    _add(T, "gflops flops=-1", "flops", timing.gflops, -1.0, 1.0)
    _add(T, "gflops seconds=nan", "seconds", timing.gflops, 1e9, np.nan)
    _add(T, "example_sentence d_k=0", "d_k", examples.example_sentence, 0)
    _add(T, "example_sentence seed=-1", "seed", examples.example_sentence, 8, -1)
    _add(T, "describe_params {'W': [1]}", "params W", examples.describe_params, {"W": [1]})
    _add(T, "describe_params a list", "params", examples.describe_params, [np.zeros(2)])
    _add(T, "load_reversal_run missing file", "path /nonexistent/run.npz", examples.load_reversal_run,
         "/nonexistent/run.npz")
    _add(T, "load_reversal_run an npz of another layout", "path", examples.load_reversal_run,
         _other_npz())
    _add(T, "reversal_schedule.run seeds=(-1,)", "seeds seed", reversal_schedule.run, seeds=(-1,))
    _add(T, "reversal_schedule.perfect_seeds {}", "run", reversal_schedule.perfect_seeds, {})
    _add(T, "reversal_schedule.ValidationReversal length=0", "length", reversal_schedule.ValidationReversal,
         0)
    _add(T, "dates_schedule.run seed=-1", "seed", dates_schedule.run, -1)
    _add(T, "dates_schedule.ValidationTask heldout_size=0", "heldout_size", dates_schedule.ValidationTask, 0)
    _add(T, "dates_schedule.ValidationTask seed=1.5", "seed", dates_schedule.ValidationTask, 10, 1.5)


# ----------------------------------------------------------------------------------------------
# pretrained
# ----------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _weights():
    from attention_np import pretrained
    return pretrained.load_weights(dtype=np.float64)


def _pretrained():
    from attention_np import pretrained

    T = "pretrained"
    _add(T, "MiniLM dtype=np.int8", "dtype", pretrained.MiniLM, dtype=np.int8)
    _add(T, "MiniLM dtype='float8'", "dtype", pretrained.MiniLM, dtype="float8")
    _add(T, "MiniLM path missing", "path", pretrained.MiniLM, path="/nonexistent/minilm")
    _add(T, "load_config path missing", "path", pretrained.load_config, "/nonexistent/minilm")
    _add(T, "load_config path a file", "path", pretrained.load_config, __file__)
    _add(T, "load_weights dtype int32", "dtype", pretrained.load_weights, dtype=np.int32)
    _add(T, "load_weights dtype complex", "dtype", pretrained.load_weights, dtype=np.complex64)
    _add(T, "load_weights path=3", "path", pretrained.load_weights, 3)
    _add(T, "tokenize sentences=3", "sentences", pretrained.tokenize, 3)
    _add(T, "tokenize sentences []", "sentences", pretrained.tokenize, [])
    _add(T, "tokenize sentences [1, 2]", "sentences", pretrained.tokenize, [1, 2])
    _add(T, "tokenize sentences None", "sentences", pretrained.tokenize, None)
    _add(T, "tokenize path missing", "path", pretrained.tokenize, ["hi"], "/nonexistent/minilm")

    def enc(label, names, **kw):
        def setup():
            w = _weights()
            args = {"params": w, "input_ids": np.array([[101, 7592, 102]]), **kw}
            return (lambda: pretrained.encode(**args)), None
        _add_state(T, label, names, setup)

    enc("encode input_ids float", "input_ids", input_ids=np.array([[101.0, 102.0]]))
    enc("encode input_ids 1-d", "input_ids", input_ids=np.array([101, 102]))
    enc("encode input_ids id -1", "input_ids", input_ids=np.array([[101, -1, 102]]))
    enc("encode input_ids longer than 512 positions", "input_ids", input_ids=np.zeros((1, 513), int))
    enc("encode attention_mask (1, 4)", "attention_mask", attention_mask=np.ones((1, 4), bool))
    enc("encode attention_mask (3,) broadcastable", "attention_mask", attention_mask=np.ones(3, bool))
    enc("encode attention_mask 0.5", "attention_mask", attention_mask=np.full((1, 3), 0.5))
    enc("encode attention_mask int 2", "attention_mask", attention_mask=np.full((1, 3), 2))
    enc("encode token_type_ids 2", "token_type_ids", token_type_ids=np.full((1, 3), 2))
    enc("encode token_type_ids float", "token_type_ids", token_type_ids=np.zeros((1, 3)))
    enc("encode token_type_ids (1, 2)", "token_type_ids", token_type_ids=np.zeros((1, 2), int))
    enc("encode num_heads=5", "num_heads", num_heads=5)
    enc("encode num_heads=0", "num_heads", num_heads=0)
    enc("encode num_heads=12.0", "num_heads", num_heads=12.0)
    enc("encode eps=nan", "eps", eps=np.nan)
    enc("encode eps='1e-12'", "eps", eps="1e-12")
    _add(T, "encode params=None", "params", pretrained.encode, None, np.array([[101, 102]]))
    _add(T, "encode params of a toy MHA", "params", pretrained.encode, {"W_q": np.zeros((2, 2))},
         np.array([[101, 102]]))

    def minilm_call(label, names, arg):
        def setup():
            from attention_np.pretrained.minilm import MiniLM
            m = MiniLM(dtype=np.float64)
            return (lambda: m(arg)), None
        _add_state(T, label, names, setup)
    minilm_call("MiniLM()(3)", "sentences", 3)
    minilm_call("MiniLM()([])", "sentences", [])
    minilm_call("MiniLM()([None])", "sentences", [None])


# ----------------------------------------------------------------------------------------------
# interop
# ----------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _torch_mha():
    import torch
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(8, 2, batch_first=True).double()


@functools.lru_cache(maxsize=1)
def _flax_mha():
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    m = fnn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8, dtype=jnp.float64,
                                         param_dtype=jnp.float64)
    x = jnp.zeros((1, 3, 8), jnp.float64)
    return m, m.init(jax.random.PRNGKey(0), x, x, x)


def _interop():
    from attention_np import interop

    T = "interop"
    x = _arr(2, 3, 8)

    def tmha(label, names, *args, **kw):
        def setup():
            m = _torch_mha()
            before = {n: p.detach().clone().numpy() for n, p in m.named_parameters()}
            return (lambda: interop.compare_mha(m, *args, **kw)), (
                lambda: _fp({n: p.detach().numpy().copy() for n, p in m.named_parameters()}) == _fp(before))
        _add_state(T, label, names, setup)

    _add(T, "compare_mha module='x'", "module", interop.compare_mha, "x", x)
    _add(T, "compare_mha module a numpy params dict", "module", interop.compare_mha, {"W_q": np.zeros(2)}, x)
    tmha("compare_mha query d 9 vs embed_dim 8", "query", _arr(2, 3, 9))
    tmha("compare_mha key S=4 vs value S=5", "key value", x, _arr(2, 4, 8), _arr(2, 5, 8))
    tmha("compare_mha key_padding_mask (2, 4)", "key_padding_mask", x,
         key_padding_mask=np.zeros((2, 4), bool))
    tmha("compare_mha key_padding_mask complex", "key_padding_mask", x,
         key_padding_mask=np.zeros((2, 3), complex))
    tmha("compare_mha attn_mask (4, 3)", "attn_mask", x, attn_mask=np.zeros((4, 3), bool))
    tmha("compare_mha attn_mask (h, L, S) with B*h wrong", "attn_mask", x,
         attn_mask=np.zeros((3, 3, 3), bool))
    tmha("compare_mha need_weights=1", "need_weights", x, need_weights=1)
    tmha("compare_mha average_attn_weights='no'", "average_attn_weights", x, average_attn_weights="no")
    tmha("compare_mha is_causal=1", "is_causal", x, is_causal=1)
    tmha("compare_mha seed=-1", "seed", x, seed=-1)
    tmha("compare_mha seed=1.5", "seed", x, seed=1.5)
    tmha("compare_mha query int", "query", np.ones((2, 3, 8), int))
    tmha("compare_mha query 1-d", "query", np.ones(8))
    tmha("compare_mha static_k (B*h, S, d+1)", "static_k", x, static_k=np.zeros((4, 3, 5)))

    def fmha(label, names, *args, **kw):
        def setup():
            m, variables = _flax_mha()
            return (lambda: interop.compare_flax_mha(m, variables, *args, **kw)), None
        _add_state(T, label, names, setup)

    _add(T, "compare_flax_mha module a torch module", "module", interop.compare_flax_mha, _torch_mha(), {}, x)
    fmha("compare_flax_mha inputs_q d 9", "inputs_q", _arr(2, 3, 9))
    fmha("compare_flax_mha mask float", "mask", x, mask=np.ones((2, 1, 3, 3)))
    fmha("compare_flax_mha mask (2, 1, 3, 4)", "mask", x, mask=np.ones((2, 1, 3, 4), bool))
    fmha("compare_flax_mha seed=1.5", "seed", x, seed=1.5)
    fmha("compare_flax_mha seed=True", "seed", x, seed=True)
    fmha("compare_flax_mha inputs_k S=4 vs inputs_v S=5", "inputs_k inputs_v", x, _arr(2, 4, 8),
         _arr(2, 5, 8))

    def fvars(label, names, variables):
        def setup():
            m, _ = _flax_mha()
            return (lambda: interop.compare_flax_mha(m, variables, x)), None
        _add_state(T, label, names, setup)
    fvars("compare_flax_mha variables {}", "variables", {})
    fvars("compare_flax_mha variables None", "variables", None)

    _add(T, "compare_transformers_attention module=3", "module", interop.compare_transformers_attention, 3, x)
    _add(T, "compare_transformers_model model='bert'", "model", interop.compare_transformers_model, "bert")
    _add(T, "compare_attention_kernels model=None", "model", interop.compare_attention_kernels, None)


def _interop_transformers():
    from attention_np import interop

    T = "interop.transformers"

    @functools.lru_cache(maxsize=1)
    def bert():
        import torch
        import transformers
        torch.manual_seed(0)
        cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                      num_attention_heads=2,
                                      intermediate_size=8, max_position_embeddings=16)
        return transformers.BertModel(cfg).double().eval()

    def tf(label, names, fn_name, **kw):
        def setup():
            model = bert()
            fn = getattr(interop, fn_name)
            if fn_name == "compare_transformers_attention":
                layer = model.encoder.layer[0].attention.self
                return (lambda: fn(layer, **kw)), None
            return (lambda: fn(model, **kw)), None
        _add_state(T, label, names, setup)

    tf("compare_transformers_attention hidden_states d 9", "hidden_states", "compare_transformers_attention",
       hidden_states=_arr(1, 3, 9))
    tf("compare_transformers_attention hidden_states 2-d", "hidden_states", "compare_transformers_attention",
       hidden_states=_arr(3, 8))
    tf("compare_transformers_attention attn_implementation='bogus'", "attn_implementation",
       "compare_transformers_attention", hidden_states=_arr(1, 3, 8), attn_implementation="bogus")
    tf("compare_transformers_attention seed=-1", "seed", "compare_transformers_attention",
       hidden_states=_arr(1, 3, 8), seed=-1)
    tf("compare_transformers_attention attention_mask (1, 1, 3, 4)", "attention_mask",
       "compare_transformers_attention", hidden_states=_arr(1, 3, 8), attention_mask=np.zeros((1, 1, 3, 4)))
    ids = np.array([[1, 2, 3]])
    tf("compare_transformers_model seed=True", "seed", "compare_transformers_model", seed=True, input_ids=ids)
    tf("compare_transformers_model prompt='x'", "prompt", "compare_transformers_model", prompt="x",
       input_ids=ids)
    tf("compare_transformers_model input_ids float", "input_ids", "compare_transformers_model",
       input_ids=np.zeros((1, 3)))
    tf("compare_transformers_model input_ids id 20 >= vocab", "input_ids", "compare_transformers_model",
       input_ids=np.full((1, 3), 20))
    tf("compare_attention_kernels reference='bogus'", "reference", "compare_attention_kernels",
       reference="bogus", input_ids=ids)
    tf("compare_attention_kernels seed=1.5", "seed", "compare_attention_kernels", seed=1.5, input_ids=ids)


# ----------------------------------------------------------------------------------------------
# exercises
# ----------------------------------------------------------------------------------------------

def _exercises():
    from attention_np import exercises

    T = "exercises"
    _add(T, "check name='bogus'", "name", exercises.check, "bogus", lambda x: x)
    _add(T, "check name=3", "name", exercises.check, 3, lambda x: x)
    _add(T, "check student_fn=3", "student_fn", exercises.check, "softmax", 3)
    _add(T, "check student_fn=None", "student_fn", exercises.check, "softmax", None)
    _add(T, "check student_fn a str", "student_fn", exercises.check, "softmax", "def softmax(x): ...")
    _add(T, "reference 'bogus'", "name", exercises.reference, "bogus")
    _add(T, "reference None", "name", exercises.reference, None)
    _add(T, "function_name 'bogus'", "name", exercises.function_name, "bogus")
    _add(T, "function_name 3", "name", exercises.function_name, 3)
    _add(T, "Mistake wrong=3 (not callable)", "wrong", exercises.Mistake, "m", 3, "hint")
    _add(T, "Mistake name=None", "name", exercises.Mistake, None, lambda x: x, "hint")
    _add(T, "Case args a list", "args", exercises.Case, "c", [1, 2])
    _add(T, "Case dtype np.int32", "dtype", exercises.Case, "c", (1,), dtype=np.int32)


# ----------------------------------------------------------------------------------------------
# viz (matplotlib)
# ----------------------------------------------------------------------------------------------

def _viz():
    import matplotlib
    matplotlib.use("Agg")
    from attention_np.viz import explorer, plot, pretrained

    T = "viz"
    w = np.full((3, 4), 0.25)
    _add(T, "attention_heatmap weights 1-d", "weights", plot.attention_heatmap, np.ones(4))
    _add(T, "attention_heatmap weights 3-d", "weights", plot.attention_heatmap, np.ones((2, 3, 4)))
    _add(T, "attention_heatmap query_labels of 2 for 3 rows", "query_labels", plot.attention_heatmap, w,
         ["a", "b"])
    _add(T, "attention_heatmap key_labels of 5 for 4 cols", "key_labels", plot.attention_heatmap, w, None,
         list("abcde"))
    _add(T, "attention_heatmap cmap='bogus'", "cmap", plot.attention_heatmap, w, cmap="bogus")
    _add(T, "attention_heatmap annotate=1", "annotate", plot.attention_heatmap, w, annotate=1)
    _add(T, "attention_heatmap weights complex", "weights", plot.attention_heatmap, w.astype(complex))
    _add(T, "head_grid weights 2-d", "weights", plot.head_grid, w)
    _add(T, "head_grid ncols=0", "ncols", plot.head_grid, np.ones((2, 3, 4)), ncols=0)
    _add(T, "head_grid ncols=1.5", "ncols", plot.head_grid, np.ones((2, 3, 4)), ncols=1.5)
    _add(T, "head_grid titles of 3 for 2 heads", "titles", plot.head_grid, np.ones((2, 3, 4)),
         titles=["a", "b", "c"])
    _add(T, "mask_picture mask float", "mask", plot.mask_picture, np.ones((3, 3)))
    _add(T, "mask_picture mask 1-d", "mask", plot.mask_picture, np.ones(3, bool))
    _add(T, "mask_picture query_labels of 2 for 3 rows", "query_labels", plot.mask_picture,
         np.ones((3, 3), bool), ["a", "b"])
    _add(T, "variance_plot moments {}", "moments", plot.variance_plot, {})
    _add(T, "saturation_plot saturation None", "saturation", plot.saturation_plot, None)
    _add(T, "gradient_plot gradients {}", "gradients", plot.gradient_plot, {})
    _add(T, "comparison_plot result {}", "result", plot.comparison_plot, {})
    _add(T, "claim6_plot claim6 {}", "claim6", plot.claim6_plot, {})
    _add(T, "training_curves window=0", "window result", plot.training_curves, {}, window=0)
    _add(T, "explorer.entropy w int", "w", explorer.entropy, np.ones((2, 2), int))
    _add(T, "explorer.entropy w 0-d", "w", explorer.entropy, np.array(1.0))
    _add(T, "explorer.draw_eq1 d_k=0", "d_k", explorer.draw_eq1, 0)
    _add(T, "explorer.draw_eq1 d_k=2.5", "d_k", explorer.draw_eq1, 2.5)
    _add(T, "explorer.eq1_states d_ks=(0,)", "d_ks", explorer.eq1_states, (0,))
    _add(T, "explorer.mask_state align='x'", "align", explorer.mask_state, "x", True, 4, None, None)
    _add(T, "explorer.mask_state length=0", "length", explorer.mask_state, "top_left", True, 0, None, None)
    _add(T, "explorer.mask_state causal='yes'", "causal", explorer.mask_state, "top_left", "yes", 4, None,
         None)
    _add(T, "explorer.dates_maps an npz of another layout", "path", explorer.dates_maps, _other_npz())
    _add(T, "explorer.dates_maps example=-1", "example", explorer.dates_maps, example=-1)
    _add(T, "explorer.dates_maps example=10**6", "example", explorer.dates_maps, example=10 ** 6)
    _add(T, "explorer.dates_maps missing path", "path /nonexistent/dates.npz", explorer.dates_maps,
         "/nonexistent/dates.npz")
    _add(T, "viz.pretrained.plot_grid attentions []", "attentions", pretrained.plot_grid, [], [["a"]])
    _add(T, "viz.pretrained.plot_grid sentence=5", "sentence", pretrained.plot_grid,
         [np.ones((1, 2, 3, 3))], [["a", "b", "c"]], sentence=5)
    _add(T, "viz.pretrained.plot_weights ax=None", "ax", pretrained.plot_weights, None,
         np.ones((3, 3)), ["a", "b"])
    _add(T, "viz.pretrained.save_readme_figure dpi=0", "dpi", pretrained.save_readme_figure,
         "/tmp/_bad_calls_fig.png", 0)


def rows() -> list:
    """Every bad call of the corpus (built once)."""
    if not _ROWS:
        for part in (_top, _decoding, _nn, _training, _studies, _lessons, _pretrained, _interop,
                     _interop_transformers, _exercises, _viz):
            part()
    return list(_ROWS)


# ----------------------------------------------------------------------------------------------
# the command line: (label, argv, names, files that must not exist afterwards)
# ----------------------------------------------------------------------------------------------

def cli_rows(tmp) -> list:
    """Bad command lines; ``tmp`` a scratch folder (pathlib.Path)."""
    bad_py = tmp / "syntax.py"
    bad_py.write_text("def softmax(x:\n")
    no_fn = tmp / "nofn.py"
    no_fn.write_text("x = 1\n")
    raises = tmp / "raises.py"
    raises.write_text("raise RuntimeError('at import')\n")
    bad_json = tmp / "claim6.json"
    bad_json.write_text("{not json")
    a_file = tmp / "a_file"
    a_file.write_text("")
    empty_dir = tmp / "empty"
    empty_dir.mkdir(exist_ok=True)
    save_to = tmp / "missing" / "dates.npz"
    t = ["train", "--steps", "1", "--batch-size", "2"]
    return [
        ("no such command", ["bogus"], "bogus command choose", []),
        ("train --steps 0", ["train", "--steps", "0"], "steps", []),
        ("train --steps -1", ["train", "--steps", "-1"], "steps", []),
        ("train --steps abc", ["train", "--steps", "abc"], "steps", []),
        ("train --steps 1.5", ["train", "--steps", "1.5"], "steps", []),
        ("train --steps 1e9", ["train", "--steps", "1000000000"], "steps", []),
        ("train --length 1", t + ["--length", "1"], "length", []),
        ("train --length 19", t + ["--length", "19"], "length", []),
        ("train --batch-size 0", ["train", "--steps", "1", "--batch-size", "0"], "batch-size batch_size", []),
        ("train --heads 5 (64 not divisible)", t + ["--heads", "5"], "heads d-model", []),
        ("train --heads 0", t + ["--heads", "0"], "heads", []),
        ("train --d-model 0", t + ["--d-model", "0"], "d-model d_model", []),
        ("train --d-model -8", t + ["--d-model", "-8"], "d-model d_model", []),
        ("train --layers 0", t + ["--layers", "0"], "layers", []),
        ("train --layers -1", t + ["--layers", "-1"], "layers", []),
        ("train --target 1.5", t + ["--target", "1.5"], "target", []),
        ("train --target nan", t + ["--target", "nan"], "target", []),
        ("train --label-smoothing 2 (dates)", t + ["--task", "dates", "--label-smoothing", "2"],
         "label-smoothing label_smoothing", []),
        ("train --label-smoothing nan (dates)", t + ["--task", "dates", "--label-smoothing", "nan"],
         "label-smoothing label_smoothing", []),
        ("train --save into a missing folder (dates)", t + ["--task", "dates", "--save", str(save_to)],
         "save", [save_to]),
        ("train --save with --task reverse", t + ["--save", str(tmp / "r.npz")], "save task",
         [tmp / "r.npz"]),
        ("train --label-smoothing with --task reverse", t + ["--label-smoothing", "0.2"],
         "label-smoothing task", []),
        ("train --warmup -1", t + ["--warmup", "-1"], "warmup", []),
        ("train --cooldown -1", t + ["--cooldown", "-1"], "cooldown", []),
        ("train --cooldown 5 > --steps 1", t + ["--cooldown", "5"], "cooldown steps", []),
        ("train --lr-factor nan", t + ["--lr-factor", "nan"], "lr-factor lr_factor", []),
        ("train --lr-factor 0", t + ["--lr-factor", "0"], "lr-factor lr_factor", []),
        ("train --blas-threads -1", t + ["--blas-threads", "-1"], "blas-threads", []),
        ("train --seed -1", t + ["--seed", "-1"], "seed", []),
        ("train --dtype float16", t + ["--dtype", "float16"], "dtype", []),
        ("train an extra positional", t + ["extra"], "unrecognized extra", []),
        ("tour --seed -1", ["tour", "--seed", "-1"], "seed", []),
        ("tour --seed x", ["tour", "--seed", "x"], "seed", []),
        ("tour --seed 2**40", ["tour", "--seed", str(2 ** 70)], "seed", []),
        ("figures --dpi 0", ["figures", "--dpi", "0", "--out", str(tmp / "f0")], "dpi", [tmp / "f0"]),
        ("figures --dpi 1001", ["figures", "--dpi", "1001", "--out", str(tmp / "f1")], "dpi", [tmp / "f1"]),
        ("figures --out a file", ["figures", "--out", str(a_file)], "out", []),
        ("figures --claim6 missing", ["figures", "--claim6", str(tmp / "none.json"), "--out",
                                      str(tmp / "f2")],
         "claim6", [tmp / "f2"]),
        ("figures --claim6 not json", ["figures", "--claim6", str(bad_json), "--out", str(tmp / "f3")],
         "claim6", [tmp / "f3"]),
        ("diff --seed -1", ["diff", "--seed", "-1", "--framework", "torch"], "seed", []),
        ("diff --seed x", ["diff", "--seed", "x"], "seed", []),
        ("diff --model unknown family", ["diff", "--model", "nosuchfamily"], "model nosuchfamily", []),
        ("diff --model an empty folder", ["diff", "--model", str(empty_dir)], "model config", []),
        ("diff --cached without --model", ["diff", "--cached", "--framework", "torch"], "cached model", []),
        ("diff --model with --framework torch", ["diff", "--model", "bert", "--framework", "torch"],
         "model framework", []),
        ("train --length with --task dates", ["train", "--task", "dates", "--steps", "1", "--length", "10"],
         "length task", []),
        ("train --seed 2**70", t + ["--seed", str(2 ** 70)], "seed", []),
        ("diff --seed 2**70", ["diff", "--seed", str(2 ** 70), "--framework", "torch"], "seed", []),
        ("diff --dtype with --model", ["diff", "--model", "bert", "--dtype", "float32"], "dtype model", []),
        ("diff --dtype with --framework transformers", ["diff", "--framework", "transformers", "--dtype",
                                                        "float32"], "dtype transformers", []),
        ("check unknown exercise", ["check", "bogus", str(no_fn)], "bogus name exercise", []),
        ("check missing solution file", ["check", "softmax", str(tmp / "none.py")], "none.py solution", []),
        ("check solution with a syntax error", ["check", "softmax", str(bad_py)], "syntax.py SyntaxError",
         []),
        ("check solution without the function", ["check", "softmax", str(no_fn)], "softmax function", []),
        ("check solution raising at import", ["check", "softmax", str(raises)], "raises.py RuntimeError", []),
        ("check a folder as solution", ["check", "softmax", str(empty_dir)], "solution empty", []),
        ("check --function missing", ["check", "softmax", str(no_fn), "--function", "nope"],
         "nope function", []),
        ("check no solution given", ["check", "softmax"], "solution", []),
        ("course build no out", ["course", "build"], "out", []),
        ("course build out is a file", ["course", "build", str(a_file)], "out a_file", []),
        ("course build --lessons-url not a url", ["course", "build", str(tmp / "c1"), "--lessons-url",
                                                  "lessons"],
         "lessons-url", [tmp / "c1"]),
        ("course audit --exercise bogus", ["course", "audit", "--exercise", "bogus"], "exercise bogus", []),
        ("course audit --jobs 0", ["course", "audit", "--jobs", "0", "--exercise", "softmax"], "jobs", []),
        ("course audit --list bogus", ["course", "audit", "--list", "bogus", "--exercise", "softmax"],
         "list", []),
        ("course audit --write missing folder", ["course", "audit", "--exercise", "softmax", "--write",
                                                 str(tmp / "none" / "x.md")], "write", [tmp / "none"]),
        ("course bogus action", ["course", "bogus"], "ACTION action bogus", []),
    ]
