"""Behaviour probes of the heads, multi-head attention and the decode step (see probes.py)."""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised
from .probing import RNG_SEED, _arr, _close, _nan, _run, describe, measured

# ======================================================================== heads

def split_probe(fn, expected):
    L, h, d = 4, 2, 3
    x = np.arange(L * h * d, dtype=float).reshape(L, h * d)
    out = _arr(_run(fn, x.copy(), h))
    if out is None:
        return None
    if out.shape == (L, h, d):
        return Finding("head axis not moved", "the output has shape (L, h, d), expected (h, L, d)",
                       "After the reshape to (..., L, h, d), swap the two axes before the last.")
    if out.shape != (h, L, d):
        return None
    inter = np.swapaxes(np.swapaxes(x.reshape(L, d, h), -1, -2), -2, -3)
    if _close(out, inter):
        return Finding("head split transposed (heads interleaved)", "head 0 gets columns 0, h, 2h, ... "
                       "instead of a contiguous block", "Head i should own a CONTIGUOUS block of d_k "
                       "columns: reshape the last axis as (h, d_k), not (d_k, h).")
    if _close(out, x.reshape(h, L, d)):
        return Finding("reshape without the transpose", "a plain reshape to (h, L, d) mixes positions "
                       "into heads", "A reshape keeps the memory order: split the feature axis first, "
                       "(L, h, d), then move the head axis.")
    if _close(out, expected.get("split")):
        xb = np.stack([x, x + x.size])                   # two copies, offset: the answer is known
        b = _run(fn, xb, h)
        want = np.stack([expected["split"], expected["split"] + x.size])
        if not _close(_arr(b), want):
            got = b.text if isinstance(b, Raised) else f"shape {np.shape(b)}"
            return Finding("does not work with batch axes", f"(L, h*d) works but a batch (2, L, h*d) "
                           f"gives {got}" + (" with the wrong values" if np.shape(b) == want.shape else ""),
                           "Count axes from the end (swapaxes(-2, -3), reshape(*x.shape[:-1], h, d)) so "
                           "any leading axes pass through.")
    return None


def merge_probe(fn, expected):
    h, L, d = 2, 4, 3
    x = np.arange(h * L * d, dtype=float).reshape(h, L, d)
    out = _arr(_run(fn, x.copy()))
    if out is None:
        return None
    if out.shape != (L, h * d):
        return Finding("merge to the wrong shape", f"(h, L, d) = {x.shape} gives {out.shape}, expected "
                       f"(L, h*d) = {(L, h * d)}", "Move the head axis next to the feature axis, then "
                       "merge the two.") if out.shape == (h * L, d) or out.shape == (h, L * d) else None
    if _close(out, np.moveaxis(x, 0, -1).reshape(L, h * d)):
        return Finding("merge transposed (heads interleaved)", "the merged features alternate between "
                       "heads", "Concat puts head 1's d_v features first, then head 2's: a block per head.")
    if _close(out, x.reshape(L, h * d)):
        return Finding("reshape without the transpose", "a plain reshape mixes positions and heads",
                       "Move the head axis next to the feature axis before the reshape.")
    if _close(out, expected.get("merge")):
        xb = np.stack([x, x + x.size])
        b = _run(fn, xb)
        want = np.stack([expected["merge"], expected["merge"] + x.size])
        if not _close(_arr(b), want):
            got = b.text if isinstance(b, Raised) else f"shape {np.shape(b)}"
            return Finding("does not work with batch axes", f"(h, L, d) works but a batch (2, h, L, d) "
                           f"gives {got}" + (" with the wrong values" if np.shape(b) == want.shape else ""),
                           "Count axes from the end (swapaxes(-2, -3)) so any leading axes pass "
                           "through; list(x) and x[i] split the FIRST axis, which is the batch.")
    return None


# ======================================================================== multi-head
def _mha_inputs():
    rng = np.random.default_rng(RNG_SEED + 11)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d)), p, h


def mha_probe(fn, expected):
    x, y, p, h = _mha_inputs()
    base = _arr(_run(fn, x, y, y, p, h))
    if base is None or base.shape != x.shape or _nan(base):
        return None
    d = x.shape[-1]
    plain = {**{f"W_{n}": np.zeros((d, d)) for n in "qk"}, "W_v": np.eye(d), "W_o": np.eye(d),
             **{f"b_{n}": np.zeros(d) for n in "qkvo"}}
    mean = _arr(_run(fn, x, y, y, plain, h))           # uniform weights, identity projections
    if mean is not None and mean.shape == base.shape and not _close(
            mean, np.broadcast_to(y.mean(-2, keepdims=True), x.shape)):
        return Finding("heads split or merged wrongly", "with W_q = W_k = 0 (every weight equal), W_v = "
                       "W_o = I and zero biases, your output is not the mean of the values at every "
                       "query: the heads mix positions or features", "split_heads: reshape (B, L, h*d) "
                       "to (B, L, h, d), THEN swap to (B, h, L, d); merge_heads undoes it in reverse.")
    delta = np.array([0.5, -1.0, 2.0, 0.25])

    def moved(name):
        return _arr(_run(fn, x, y, y, dict(p, **{name: p[name] + delta}), h))
    for name, want, what in (("b_o", delta, "b_o"), ("b_v", delta @ p["W_o"], "b_v")):
        out = moved(name)
        if out is not None and out.shape == base.shape and not _close(out - base, np.broadcast_to(
                want, base.shape), 1e-6, 1e-9):
            ignored = _close(out, base)
            return Finding("projection biases forgotten" if ignored else f"{what} used wrongly",
                           f"moving {what} by a vector moves your output by "
                           f"{'nothing' if ignored else 'something else'} (it must move by "
                           f"{'that vector' if name == 'b_o' else 'that vector times W_o'})",
                           "params holds b_q, b_k, b_v, b_o: each projection is x W + b.")
    one = expected.get("one_head")
    if one is not None and _close(base, one):
        return Finding("a single head (no split)", f"your output with num_heads = {h} is the output of "
                       "one head", "With one head of width h*d_k the softmax averages over all "
                       "features together; split into num_heads heads, each with its own softmax.")
    return None


def mha_backward_probe(fn, expected):
    inputs = _mha_backward_inputs()["self"][0]
    out = _run(fn, *inputs)
    ref = expected.get("self")
    if isinstance(out, Raised) or not isinstance(out, (tuple, list)) or len(out) != 4 or ref is None:
        return None
    dq, dk, dv, grads = out
    if not isinstance(grads, dict):
        return Finding("grads is not a dict", f"the fourth output is a {type(grads).__name__}",
                       "Return (dquery, dkey, dvalue, grads) with grads a dict with the keys of params "
                       "(W_q, b_q, ..., W_o, b_o).")
    missing = sorted(set(ref[3]) - set(grads))
    if missing:
        return Finding("grads has missing keys", f"grads has no {missing}", "One gradient per "
                       "parameter, with the same keys as params.")
    total = ref[0] + ref[1] + ref[2]
    if all(_close(_arr(x), total) for x in (dq, dk, dv)):
        return Finding("the three input gradients summed", "with query = key = value you return the "
                       "sum of the three gradients for each of them", "The contract: dquery, dkey and "
                       "dvalue are the gradients through each argument alone, even when they are the "
                       "same array (the caller adds them).")
    dist = expected.get("distinct")
    args = _mha_backward_inputs()["distinct"][0]
    out = _run(fn, *args)
    if dist is None or not isinstance(out, (tuple, list)) or len(out) != 4 or not isinstance(out[3], dict):
        return None
    names = ["dquery", "dkey", "dvalue"] + [f"d{n}" for n in sorted(dist[3])]
    got = list(out[:3]) + [out[3].get(n) for n in sorted(dist[3])]
    want = list(dist[:3]) + [dist[3][n] for n in sorted(dist[3])]
    d = [describe(n, g, w) for n, g, w in zip(names, got, want, strict=True)]
    wrong = {n: x for n, x in zip(names, d, strict=True) if x is not None}
    if not wrong:
        return None
    where = "on cross-attention with every size distinct (B=3, L=4, S=7, d_model=5, h=2, d_k=6)"
    what = f"{where}: {measured(d, names)}"
    if set(wrong) == {"db_k"} and _arr(got[names.index("db_k")]) is not None and wrong["db_k"][0] != "zero":
        return Finding("nonzero gradient for b_k", f"your db_k is not 0 ({what})", "Adding b_k adds "
                       "q_i . b_k to every score of row i: a constant per row, which softmax ignores. "
                       "What does that make dL/db_k?")
    if all(n.startswith("db_") for n in wrong):
        shapes = {n: np.shape(got[names.index(n)]) for n in wrong}
        if any(len(sh) == 2 and sh[0] == 3 for sh in shapes.values()):
            return Finding("bias gradient not summed over the batch", what, "A bias is added to every "
                           "position of every sequence: its gradient sums over all of them (batch "
                           "and positions).")
        return Finding("bias gradient summed over the wrong axes", what, "A bias is added to every "
                       "position of every sequence: its gradient sums the gradient of x W + b over "
                       "the batch and the positions, keeping the feature axis (heads and their "
                       "features, in the merged order).")
    if all(n.startswith("dW_") for n in wrong):
        kinds = {x[0] for x in wrong.values()}
        if kinds == {"transposed"}:
            return Finding("weight gradients transposed", what, "For y = x W with W of shape (d_in, "
                           "d_out), dW must have W's shape: which of x^T dy and dy^T x is (d_in, d_out)?")
        if kinds == {"permuted"}:
            return Finding("heads in the wrong order", what, "Head i owns the columns [i*d_k, (i+1)*d_k) "
                           "of W_q, W_k, W_v and the rows of W_o: merge the head gradients back in the "
                           "order split_heads took them.")
    return Finding("wrong gradients", what, "Undo mha_forward's lines last to first: the output "
                   "projection, the merge (its backward is a split), attention, the split (its "
                   "backward is a merge), the three input projections; compare each gradient with "
                   "central differences to find the first wrong line.")


# ======================================================================== decode step
def decode_probe(fn, expected):
    args = _decode_inputs()["step"][0]
    x, kc, vc, p, h = args
    empty = _run(fn, x, kc[..., :0, :], vc[..., :0, :], p, h)
    full = _run(fn, *args)
    if isinstance(empty, Raised) and not isinstance(full, Raised):
        return Finding("attended before appending the new key and value", f"with an empty cache (the "
                       f"first step) your function raises {empty.text}", "Position t may attend to "
                       "itself (j <= t): append its key and value first; then even the first step has "
                       "one key.")
    ref = expected.get("step")
    if isinstance(full, (tuple, list)) and len(full) == 3 and ref is not None:
        kn = _arr(full[1])
        if kn is not None and kn.shape == ref[1].shape:
            if _close(kn[..., 1:, :], kc) and _close(kn[..., :1, :], ref[1][..., -1:, :]):
                return Finding("new key and value prepended to the cache", "the new key is first in the "
                               "returned cache", "The cache must stay in position order: append at "
                               "the end.")
            if not _close(kn[..., :-1, :], kc):
                return Finding("the cached keys changed", "the first t entries of the returned k_cache "
                               "are not the cache you were given", "Append the new position: "
                               "np.concatenate([k_cache, k_new], axis=-2).")
        elif kn is not None:
            return Finding("cache of the wrong shape", f"the returned k_cache has shape {kn.shape}, "
                           f"expected {ref[1].shape} (t + 1 positions)", "Append exactly one position "
                           "along the time axis (-2).")
    return None


def _mha_backward_inputs():
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
    return {"self": ((rng.normal(size=(2, 3, d)), x, x, x, p, h), {}),
            "distinct": ((rng.normal(size=(3, 4, 5)), q, kv, kv, pd, 2), {})}


def _decode_inputs():
    rng = np.random.default_rng(RNG_SEED + 9)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.1 * rng.normal(size=(d,)) for n in "qkvo"})
    return {"step": ((rng.normal(size=(2, 1, d)), rng.normal(size=(2, h, 3, d // h)),
                      rng.normal(size=(2, h, 3, d // h)), p, h), {})}


