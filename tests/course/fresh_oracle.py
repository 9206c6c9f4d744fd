"""An independent oracle for the 13 course exercises, written from the student kit's contracts alone.

Forwards in float64 NumPy; backwards by torch autograd in float64. It does not import
``attention_np`` at all. ``cases(name)`` yields inputs over every size the contracts allow (axes of
size 1 and > 1, L != S both ways, d_k != d_v, h = 1, B = 1, leading axes, float32 and float64, large
logits, fully masked rows, lengths 0 and S, block sizes that do not divide S); ``verdict(name, fn)``
runs a submission on all of them and says where it disagrees with the contract.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

EXERCISES = (
    "softmax", "softmax_backward", "causal_mask", "padding_mask", "attention", "attention_backward",
    "split_heads", "merge_heads", "mha_forward", "mha_backward", "tiled_attention", "decode_step",
    "sinusoidal",
)


# ----------------------------------------------------------------------------- references (float64)

def softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_backward(dp, p):
    dp, p = np.asarray(dp, np.float64), np.asarray(p, np.float64)
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def causal_mask(L, S, align):
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    offset = 0 if align == "top_left" else S - L
    return j <= i + offset


def padding_mask(lengths, S):
    return (np.arange(S)[None, :] < np.asarray(lengths)[:, None])[:, None, :]


def _t(a):
    return torch.tensor(np.asarray(a, np.float64), dtype=torch.float64)


def _attention_t(q, k, v, mask):
    """Eq. (1) in torch float64; masked keys weigh 0, a query with no allowed key gives 0."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        m = torch.as_tensor(np.asarray(mask, bool))
        s = torch.where(m, s, torch.tensor(-math.inf, dtype=torch.float64))
    top = s.amax(dim=-1, keepdim=True).detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return p @ v


def attention(q, k, v, mask=None):
    with torch.no_grad():
        return _attention_t(_t(q), _t(k), _t(v), mask).numpy()


def attention_backward(dout, q, k, v, mask=None):
    tq, tk, tv = (_t(a).requires_grad_(True) for a in (q, k, v))
    out = _attention_t(tq, tk, tv, mask)
    out.backward(_t(dout))
    return tuple(t.grad.numpy() for t in (tq, tk, tv))


def split_heads(x, num_heads):
    x = np.asarray(x, np.float64)
    *lead, L, hd = x.shape
    return x.reshape(*lead, L, num_heads, hd // num_heads).swapaxes(-2, -3)


def merge_heads(x):
    x = np.asarray(x, np.float64)
    *lead, h, L, d = x.shape
    return x.swapaxes(-2, -3).reshape(*lead, L, h * d)


def _mha_t(query, key, value, P, h, mask=None):
    def split(x):
        B, n, w = x.shape
        return x.reshape(B, n, h, w // h).transpose(1, 2)

    q = split(query @ P["W_q"] + P["b_q"])
    k = split(key @ P["W_k"] + P["b_k"])
    v = split(value @ P["W_v"] + P["b_v"])
    heads = _attention_t(q, k, v, mask)
    B, _, L, dv = heads.shape
    concat = heads.transpose(1, 2).reshape(B, L, h * dv)
    return concat @ P["W_o"] + P["b_o"]


def mha_forward(query, key, value, params, num_heads, mask=None):
    with torch.no_grad():
        P = {n: _t(a) for n, a in params.items()}
        return _mha_t(_t(query), _t(key), _t(value), P, num_heads, mask).numpy()


def mha_backward(dout, query, key, value, params, num_heads):
    tq, tk, tv = (_t(a).requires_grad_(True) for a in (query, key, value))
    P = {n: _t(a).requires_grad_(True) for n, a in params.items()}
    _mha_t(tq, tk, tv, P, num_heads).backward(_t(dout))
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy(), {n: t.grad.numpy() for n, t in P.items()}


def tiled_attention(q, k, v, block_size):
    return attention(q, k, v)


def decode_step(x, k_cache, v_cache, params, num_heads):
    P = {n: np.asarray(a, np.float64) for n, a in params.items()}
    x = np.asarray(x, np.float64)
    h = num_heads
    B = x.shape[0]

    def split(y):
        return y.reshape(B, 1, h, -1).swapaxes(1, 2)

    q = split(x @ P["W_q"] + P["b_q"])
    k = np.concatenate([np.asarray(k_cache, np.float64), split(x @ P["W_k"] + P["b_k"])], axis=2)
    v = np.concatenate([np.asarray(v_cache, np.float64), split(x @ P["W_v"] + P["b_v"])], axis=2)
    heads = attention(q, k, v)
    out = heads.swapaxes(1, 2).reshape(B, 1, -1) @ P["W_o"] + P["b_o"]
    return out, k, v


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float64)[:, None]
    i2 = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angle = pos / 10000.0 ** (i2 / d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


REFERENCE = {name: globals()[name] for name in EXERCISES}


# ----------------------------------------------------------------------------- inputs

def _params(rng, d_model, h, d_k, d_v, dtype, scale=0.5):
    shapes = {"W_q": (d_model, h * d_k), "W_k": (d_model, h * d_k), "W_v": (d_model, h * d_v),
              "W_o": (h * d_v, d_model), "b_q": (h * d_k,), "b_k": (h * d_k,), "b_v": (h * d_v,),
              "b_o": (d_model,)}
    return {n: (scale * rng.standard_normal(s)).astype(dtype) for n, s in shapes.items()}


def _attn_shapes():
    """(label, q shape, k shape, v shape, mask shape or None, fully-masked rows?)."""
    return [
        ("2d L<S dk!=dv", (3, 4), (5, 4), (5, 6), None),
        ("2d L>S", (6, 3), (2, 3), (2, 5), None),
        ("2d L=1", (1, 4), (7, 4), (7, 2), None),
        ("2d S=1", (3, 4), (1, 4), (1, 3), None),
        ("3d B=1", (1, 3, 4), (1, 5, 4), (1, 5, 2), None),
        ("3d B=2", (2, 4, 3), (2, 3, 3), (2, 3, 5), None),
        ("4d", (2, 3, 2, 4), (2, 3, 5, 4), (2, 3, 5, 3), None),
        ("kv shared, 1 fewer axis", (3, 2, 4), (5, 4), (5, 3), None),
        ("kv shared, 2 fewer axes", (2, 3, 4, 4), (5, 4), (5, 2), None),
        ("kv size-1 axis", (3, 4, 2), (1, 5, 2), (1, 5, 3), None),
        ("kv size-1 inner axis", (2, 3, 2, 4), (2, 1, 5, 4), (2, 1, 5, 3), None),
        ("mask (L,S)", (2, 4, 3), (2, 5, 3), (2, 5, 2), (4, 5)),
        ("mask (B,1,S)", (3, 4, 3), (3, 5, 3), (3, 5, 2), (3, 1, 5)),
        ("mask full", (2, 4, 3), (2, 6, 3), (2, 6, 4), (2, 4, 6)),
        ("mask 4d (B,1,L,S)", (2, 3, 4, 3), (2, 3, 5, 3), (2, 3, 5, 2), (2, 1, 4, 5)),
        ("mask 2d L=1", (1, 4), (6, 4), (6, 3), (1, 6)),
    ]


def _mask(rng, shape, fully_masked):
    m = rng.random(shape) < 0.6
    if fully_masked:
        m.reshape(-1, shape[-1])[0] = False  # one query (or one batch row) with no allowed key
    m.reshape(-1, shape[-1])[-1, -1] = True
    return m


def _attention_inputs(rng):
    for dtype in (np.float64, np.float32):
        for label, qs, ks, vs, ms in _attn_shapes():
            for fully in ((False, True) if ms else (False,)):
                q = rng.standard_normal(qs).astype(dtype)
                k = rng.standard_normal(ks).astype(dtype)
                v = rng.standard_normal(vs).astype(dtype)
                mask = None if ms is None else _mask(rng, ms, fully)
                yield f"{label}{' fully-masked row' if fully else ''} {np.dtype(dtype).name}", q, k, v, mask
        # large scores, rows on very different scales (one batch near +1e3, one near -1e3)
        q = rng.standard_normal((2, 3, 4)).astype(dtype)
        q *= 12.0
        k = rng.standard_normal((2, 5, 4)).astype(dtype) * 12.0
        v = rng.standard_normal((2, 5, 3)).astype(dtype)
        if dtype == np.float64:
            q = q * 3.0
            k = k * 3.0
        yield f"large scores {np.dtype(dtype).name}", q, k, v, None
        # every score of a row very negative and another row large: a shared max underflows
        q = np.ones((2, 2, 4), dtype)
        q[0] *= 30.0
        q[1] *= -30.0
        k = (np.abs(rng.standard_normal((2, 5, 4))) + 1.0).astype(dtype)
        v = rng.standard_normal((2, 5, 3)).astype(dtype)
        yield f"rows on different scales {np.dtype(dtype).name}", q, k, v, None
        q = np.ones((1, 2, 4), dtype) * np.array([[30.0], [-30.0]], dtype)
        k = np.ones((1, 3, 4), dtype) * 3.0 + 0.1 * rng.standard_normal((1, 3, 4)).astype(dtype)
        v = rng.standard_normal((1, 3, 2)).astype(dtype)
        mask = np.array([[[True, False, True], [False, True, True]]])
        yield f"masked, rows on different scales {np.dtype(dtype).name}", q, k, v, mask
        # a masked key with a huge score: the allowed keys must not underflow
        q = np.full((2, 1, 4), 10.0, dtype)
        k = np.concatenate([np.full((2, 1, 4), 50.0 if dtype == np.float64 else 6.0, dtype),
                            0.1 * rng.standard_normal((2, 3, 4)).astype(dtype)], axis=1)
        v = rng.standard_normal((2, 4, 3)).astype(dtype)
        mask = np.array([False, True, True, True])
        yield f"masked key with a huge score {np.dtype(dtype).name}", q, k, v, mask


def cases(name, seed=0):
    """Yield (label, args) for exercise ``name``: args is the tuple passed to the function."""
    rng = np.random.default_rng(seed)
    if name == "softmax":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for shape in [(5,), (1,), (3, 1), (1, 6), (4, 7), (2, 3, 4), (2, 1, 3, 5), (3, 3)]:
                yield f"{shape} {dn}", (rng.standard_normal(shape).astype(dtype),)
            x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0], [0.5, 0.1, -0.2]], dtype)
            yield f"huge logits, rows on different scales {dn}", (x,)
            yield f"huge logits 1-row {dn}", (np.array([1000.0, 1001.0, 1002.0], dtype),)
            x = rng.standard_normal((3, 4)).astype(dtype)
            x[0, 1] = -np.inf
            x[2, [0, 1, 3]] = -np.inf
            yield f"-inf entries {dn}", (x,)
            x = rng.standard_normal((2, 2, 4)).astype(dtype) * 300
            yield f"scaled 3d {dn}", (x,)
    elif name == "softmax_backward":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for shape in [(5,), (1,), (3, 1), (1, 4), (3, 5), (2, 3, 4), (4, 4)]:
                x = rng.standard_normal(shape)
                yield f"{shape} {dn}", (rng.standard_normal(shape).astype(dtype), softmax(x).astype(dtype))
            x = rng.standard_normal((3, 4))
            x[0, 1] = -np.inf
            x[2, [0, 3]] = -np.inf
            yield f"p with zeros {dn}", (rng.standard_normal((3, 4)).astype(dtype), softmax(x).astype(dtype))
    elif name == "causal_mask":
        for L in range(1, 6):
            for S in range(1, 6):
                for align in ("top_left", "bottom_right"):
                    yield f"L={L} S={S} {align}", (L, S, align)
    elif name == "padding_mask":
        for lengths, S in [([3, 0, 5], 5), ([2], 4), ([0], 3), ([1], 1), ([0, 1], 1), ([4, 4, 2, 1], 4),
                           ([6, 2], 7)]:
            yield f"lengths={lengths} S={S}", (np.array(lengths), S)
    elif name in ("attention", "attention_backward"):
        for label, q, k, v, mask in _attention_inputs(rng):
            if name == "attention":
                yield label, (q, k, v, mask)
                if mask is None and q.ndim == 3 and "shared" not in label:
                    yield label + " mask=None explicit", (q, k, v)
            else:
                lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
                dout = rng.standard_normal(lead + (q.shape[-2], v.shape[-1])).astype(q.dtype)
                yield label, (dout, q, k, v, mask)
    elif name == "split_heads":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for lead, L, h, d in [((), 3, 2, 4), ((2,), 4, 3, 2), ((2, 3), 2, 2, 3), ((1,), 5, 1, 4),
                                  ((2,), 1, 4, 2), ((2,), 6, 2, 3), ((3,), 2, 2, 1), ((1, 1), 3, 3, 2),
                                  ((2,), 4, 4, 1)]:
                x = rng.standard_normal(lead + (L, h * d)).astype(dtype)
                yield f"lead={lead} L={L} h={h} d={d} {dn}", (x, h)
    elif name == "merge_heads":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for shape in [(2, 3, 4), (2, 3, 4, 5), (2, 2, 3, 4, 2), (1, 1, 3, 4), (2, 1, 3, 2), (2, 3, 1, 4),
                          (2, 2, 3, 1), (3, 2, 2), (2, 4, 3, 3)]:
                yield f"{shape} {dn}", (rng.standard_normal(shape).astype(dtype),)
    elif name in ("mha_forward", "mha_backward"):
        configs = [  # B, L, S, d_model, h, d_k, d_v
            (2, 3, 3, 8, 2, 4, 4), (1, 4, 2, 6, 3, 2, 2), (2, 2, 5, 4, 1, 4, 4), (2, 3, 4, 6, 2, 5, 3),
            (1, 1, 3, 4, 2, 3, 2), (3, 4, 3, 8, 4, 2, 3), (2, 3, 2, 6, 2, 3, 3)]
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for B, L, S, dm, h, dk, dv in configs:
                P = _params(rng, dm, h, dk, dv, dtype)
                query = rng.standard_normal((B, L, dm)).astype(dtype)
                key = rng.standard_normal((B, S, dm)).astype(dtype)
                value = rng.standard_normal((B, S, dm)).astype(dtype)
                label = f"B={B} L={L} S={S} d_model={dm} h={h} d_k={dk} d_v={dv} {dn}"
                if name == "mha_forward":
                    yield label, (query, key, value, P, h, None)
                    yield label + " mask (L,S)", (query, key, value, P, h, _mask(rng, (L, S), False))
                    yield label + " mask (B,1,L,S) fully masked row", (query, key, value, P, h,
                                                                       _mask(rng, (B, 1, L, S), True))
                    lengths = rng.integers(1, S + 1, size=B)
                    lengths[0] = 0
                    yield label + " padding (B,1,1,S) length 0", (query, key, value, P, h,
                                                                  padding_mask(lengths, S)[:, None])
                else:
                    dout = rng.standard_normal((B, L, dm)).astype(dtype)
                    yield label, (dout, query, key, value, P, h)
                    if L == S:
                        yield label + " self-attention (one array)", (dout, query, query, query, P, h)
    elif name == "tiled_attention":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for lead_q, lead_k, L, S, dk, dv in [((), (), 3, 7, 4, 2), ((2,), (2,), 1, 5, 3, 3),
                                                  ((2, 2), (2, 2), 4, 6, 2, 5), ((3,), (), 2, 4, 4, 2),
                                                  ((1,), (1,), 5, 1, 3, 2)]:
                q = rng.standard_normal(lead_q + (L, dk)).astype(dtype)
                k = rng.standard_normal(lead_k + (S, dk)).astype(dtype)
                v = rng.standard_normal(lead_k + (S, dv)).astype(dtype)
                for bs in sorted({1, 2, 3, S, S + 3}):
                    yield f"q{q.shape} k{k.shape} v{v.shape} block={bs} {dn}", (q, k, v, bs)
            # each row's largest score in a different block, scales far apart
            q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]], dtype)
            k = np.array([[3.0, 0.0]] * 3 + [[0.0, 3.0]] * 3 + [[-3.0, -3.0]] * 2, dtype) * 4.0
            v = rng.standard_normal((8, 3)).astype(dtype)
            for bs in (2, 3, 5):
                yield f"row max in different blocks block={bs} {dn}", (q, k, v, bs)
            # every score of a row near -110 (and another row large): exp underflows without a per-row max
            q = np.array([[-11.0, 0.0], [6.0, 0.0]], dtype)
            k = (np.array([[20.0, 0.0]] * 5, dtype) + 0.3 * rng.standard_normal((5, 2)).astype(dtype))
            v = rng.standard_normal((5, 2)).astype(dtype)
            for bs in (1, 2, 5):
                yield f"scores near -110 block={bs} {dn}", (q, k, v, bs)
    elif name == "decode_step":
        for dtype in (np.float64, np.float32):
            dn = np.dtype(dtype).name
            for B, dm, h, dk, dv, t in [(2, 8, 2, 4, 4, 0), (2, 8, 2, 4, 4, 3), (1, 6, 3, 2, 3, 2),
                                        (2, 4, 1, 5, 3, 4), (3, 6, 2, 3, 2, 1), (1, 4, 2, 3, 5, 0)]:
                P = _params(rng, dm, h, dk, dv, dtype)
                x = rng.standard_normal((B, 1, dm)).astype(dtype)
                kc = rng.standard_normal((B, h, t, dk)).astype(dtype)
                vc = rng.standard_normal((B, h, t, dv)).astype(dtype)
                yield f"B={B} d_model={dm} h={h} d_k={dk} d_v={dv} t={t} {dn}", (x, kc, vc, P, h)
    elif name == "sinusoidal":
        for length, d in [(1, 2), (1, 8), (5, 2), (7, 8), (50, 16), (3, 6), (20, 64)]:
            yield f"length={length} d_model={d}", (length, d)
    else:
        raise ValueError(f"unknown exercise {name!r}")


# ----------------------------------------------------------------------------- comparison

def _in_dtype(name, args):
    if name in ("causal_mask", "padding_mask"):
        return np.dtype(bool)
    if name == "sinusoidal":
        return np.dtype(np.float64)
    return np.asarray(args[0]).dtype


def _close(got, ref, dtype):
    """None if ``got`` is ``ref`` (shape, dtype, values within the contract), else why not."""
    if not isinstance(got, np.ndarray):
        got = np.asarray(got) if np.isscalar(got) else got
        if not isinstance(got, np.ndarray):
            return f"returned {type(got).__name__}, not an array"
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    if got.dtype != dtype:
        return f"dtype {got.dtype}, expected {dtype}"
    if dtype.kind == "b":
        return None if np.array_equal(got, ref) else f"{int((got != ref).sum())} entries differ"
    g = got.astype(np.float64)
    if not np.all(np.isfinite(g)):
        return f"{int((~np.isfinite(g)).sum())} non-finite entries"
    tol = (1e-9 if dtype == np.float64 else 1e-4) * (1.0 + np.abs(ref))
    bad = np.abs(g - ref) > tol
    if bad.any():
        return f"{int(bad.sum())} entries off, max error {np.abs(g - ref).max():.3g}"
    return None


def compare(name, got, ref, dtype):
    if isinstance(ref, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            return f"returned {type(got).__name__}, expected a tuple of {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            why = compare(name, g, r, dtype)
            if why:
                return f"output {i}: {why}"
        return None
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(got) != set(ref):
            return f"grads keys {sorted(got) if isinstance(got, dict) else type(got).__name__}"
        for key in ref:
            why = _close(got[key], ref[key], dtype)
            if why:
                return f"grads[{key!r}]: {why}"
        return None
    return _close(got, ref, dtype)


def _same(a, b):
    if isinstance(a, dict):
        return all(_same(a[n], b[n]) for n in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return a == b


def run_case(name, fn, args):
    """None if ``fn(*args)`` meets the contract, else a one-line reason."""
    kept = copy.deepcopy(args)
    ref = REFERENCE[name](*args)
    try:
        with np.errstate(all="ignore"):
            got = fn(*args)
    except Exception as e:  # noqa: BLE001 (a student's function may raise anything)
        return f"raised {type(e).__name__}: {str(e)[:80]}"
    if not all(_same(a, b) for a, b in zip(args, kept, strict=True)):
        return "wrote into an input"
    return compare(name, got, ref, _in_dtype(name, args))


def verdict(name, fn):
    """The list of (label, reason) where ``fn`` disagrees with the oracle (empty: it agrees)."""
    out = []
    for label, args in cases(name):
        why = run_case(name, fn, args)
        if why:
            out.append((label, why))
    return out
