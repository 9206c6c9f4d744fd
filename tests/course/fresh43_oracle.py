"""A second independent oracle for the 13 course exercises (session 43), written from the student
kit's stub docstrings alone; it imports nothing of ``attention_np``.

Forwards are float64 NumPy written here; the backwards are torch autograd in float64. ``cases(name)``
draws inputs from every size each contract allows, 1 included (leading axes of size 1, one head,
L = 1, S = 1, L != S both ways, d_k != d_v, t = 0, block sizes from 1 past S), in float64 and float32,
C-ordered and not (strided or Fortran views), with the contracts' hard values (rows on scales 1e3
apart, -inf logits, masked keys scoring ~1e3, queries with no allowed key, all scores of a row near
-110 in float32), and self-attention with ONE array passed as query, key and value.
``verdict(name, fn)`` runs ``fn`` on every case and returns what was wrong (empty: right on all):
a wrong value (float64 within 1e-9 * (1 + |exact|), float32 within 1e-4 * (1 + |exact|) of the
exact answer for the same float32 inputs), a wrong shape or dtype, a non-finite entry, an error, or
an input written to (values, shape, strides or a dict's keys).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

EXERCISES = ("softmax", "padding_mask", "attention", "split_heads", "merge_heads", "mha_forward",
             "softmax_backward", "attention_backward", "mha_backward", "sinusoidal", "causal_mask",
             "tiled_attention", "decode_step")
F64, F32 = np.float64, np.float32


# ----------------------------------------------------------------------------- helpers

def _layout(a: np.ndarray, how: str) -> np.ndarray:
    """The same values as ``a`` in another memory layout: "c", "f" (Fortran) or "strided"."""
    if how == "f":
        return np.asfortranarray(a)
    if how == "strided":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype) if a.ndim else np.zeros(2, a.dtype)
        if not a.ndim:
            return a.copy()
        big[..., ::2] = a
        return big[..., ::2]
    return np.ascontiguousarray(a)


def _normal(rng, shape, dtype, scale=1.0, how="c"):
    return _layout((rng.standard_normal(shape) * scale).astype(dtype), how)


def _params(rng, d_model, h, d_k, d_v, dtype, scale_qk=1.0):
    p = {"W_q": rng.standard_normal((d_model, h * d_k)) * scale_qk,
         "W_k": rng.standard_normal((d_model, h * d_k)) * scale_qk,
         "W_v": rng.standard_normal((d_model, h * d_v)),
         "W_o": rng.standard_normal((h * d_v, d_model)),
         "b_q": rng.standard_normal(h * d_k), "b_k": rng.standard_normal(h * d_k),
         "b_v": rng.standard_normal(h * d_v), "b_o": rng.standard_normal(d_model)}
    return {k: v.astype(dtype) for k, v in p.items()}


def _t(a):
    return torch.tensor(np.asarray(a, dtype=F64), dtype=torch.float64, requires_grad=True)


def _softmax64(x):
    x = np.asarray(x, F64)
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(-1, keepdims=True)


def _attention64(q, k, v, mask=None):
    q, k, v = (np.asarray(a, F64) for a in (q, k, v))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    if mask is None:
        return np.matmul(_softmax64(s), v)
    mask = np.broadcast_to(mask, s.shape)
    alive = mask.any(-1, keepdims=True)
    s = np.where(mask, s, -np.inf)
    s = np.where(alive, s, 0.0)
    p = _softmax64(s) * alive
    return np.matmul(p, v)


def _torch_attention(q, k, v, mask=None):
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is None:
        return torch.matmul(torch.softmax(s, -1), v)
    m = torch.as_tensor(np.broadcast_to(mask, tuple(s.shape)).copy())
    alive = m.any(-1, keepdim=True)
    s = torch.where(m, s, torch.tensor(-math.inf, dtype=s.dtype))
    s = torch.where(alive, s, torch.zeros((), dtype=s.dtype))
    return torch.matmul(torch.softmax(s, -1) * alive, v)


def _split64(x, h):
    *lead, L, hd = x.shape
    return np.swapaxes(np.asarray(x).reshape(*lead, L, h, hd // h), -2, -3)


def _merge64(x):
    *lead, h, L, d = x.shape
    return np.swapaxes(np.asarray(x), -2, -3).reshape(*lead, L, h * d)


def _mha64(query, key, value, p, h, mask=None):
    p = {k: np.asarray(v, F64) for k, v in p.items()}
    q = _split64(np.asarray(query, F64) @ p["W_q"] + p["b_q"], h)
    k = _split64(np.asarray(key, F64) @ p["W_k"] + p["b_k"], h)
    v = _split64(np.asarray(value, F64) @ p["W_v"] + p["b_v"], h)
    return _merge64(_attention64(q, k, v, mask)) @ p["W_o"] + p["b_o"]


def _torch_mha(query, key, value, p, h):
    def split(x):
        B, L, hd = x.shape
        return x.reshape(B, L, h, hd // h).transpose(1, 2)
    q = split(query @ p["W_q"] + p["b_q"])
    k = split(key @ p["W_k"] + p["b_k"])
    v = split(value @ p["W_v"] + p["b_v"])
    o = _torch_attention(q, k, v)
    B, _, L, dv = o.shape
    return o.transpose(1, 2).reshape(B, L, h * dv) @ p["W_o"] + p["b_o"]


# ----------------------------------------------------------------------------- the cases
# A case: (label, args tuple, expected outputs tuple, the dtype each output must have).

def _softmax_rows(rng, lead, n, dtype, kind, how):
    x = rng.standard_normal(lead + (n,))
    if kind == "offsets":        # rows on scales up to 1e3 apart, huge and tiny
        x = x * 3 + rng.uniform(-1e3, 1e3, lead + (1,))
    elif kind == "big":
        x = x * 1e3
    elif kind == "neginf" and n > 1:
        dead = rng.random(lead + (n,)) < 0.5
        keep = rng.integers(0, n, lead)
        np.put_along_axis(dead, keep[..., None], False, axis=-1)
        x = np.where(dead, -np.inf, x * 30)
    return _layout(x.astype(dtype), how)


LEADS = [(), (1,), (3,), (1, 1), (2, 3), (2, 1, 2)]


def _cases_softmax(rng):
    for lead in LEADS:
        for n in (1, 2, 3, 7):
            for dtype in (F64, F32):
                for kind in ("plain", "offsets", "big", "neginf"):
                    how = ("c", "f", "strided")[rng.integers(3)]
                    x = _softmax_rows(rng, lead, n, dtype, kind, how)
                    yield (f"x{x.shape} {np.dtype(dtype).name} {kind} {how}", (x,),
                           (_softmax64(x),), (dtype,))


def _cases_softmax_backward(rng):
    for lead in LEADS:
        for n in (1, 2, 3, 6):
            for dtype in (F64, F32):
                for kind in ("plain", "neginf", "ones", "offsets"):
                    x = _softmax_rows(rng, lead, n, F64, "neginf" if kind == "neginf" else "plain", "c")
                    p = _softmax64(x).astype(dtype)
                    how = ("c", "f", "strided")[rng.integers(3)]
                    dp = np.ones_like(p) if kind == "ones" else rng.standard_normal(p.shape)
                    if kind == "offsets":
                        dp = dp + rng.uniform(-50, 50, lead + (1,))
                    dp = _layout(dp.astype(dtype), how)
                    p = _layout(p, ("c", "f", "strided")[rng.integers(3)])
                    p64, dp64 = p.astype(F64), dp.astype(F64)
                    exact = p64 * (dp64 - (dp64 * p64).sum(-1, keepdims=True))
                    yield f"p{p.shape} {np.dtype(dtype).name} {kind} {how}", (dp, p), (exact,), (dtype,)


def _cases_padding_mask(rng):
    for B in (1, 2, 3, 5):
        for S in (1, 2, 3, 6):
            for int_dtype in (np.int64, np.int32):
                lengths = rng.integers(0, S + 1, B)
                if B > 1:
                    lengths[0], lengths[-1] = 0, S
                elif rng.random() < 0.5:
                    lengths[0] = S
                lengths = lengths.astype(int_dtype)
                exact = np.arange(S)[None, None, :] < lengths[:, None, None]
                yield f"lengths={lengths.tolist()} S={S}", (lengths, S), (exact,), (np.bool_,)


def _causal(L, S, align):
    shift = 0 if align == "top_left" else S - L
    return np.arange(S)[None, :] <= np.arange(L)[:, None] + shift


def _cases_causal_mask(rng):
    for L in range(1, 7):
        for S in range(1, 7):
            for align in ("top_left", "bottom_right"):
                yield f"L={L} S={S} {align}", (L, S, align), (_causal(L, S, align),), (np.bool_,)


def _cases_sinusoidal(rng):
    for length in (1, 2, 3, 7, 50):
        for d_model in (2, 4, 6, 8, 10, 64):
            pos = np.arange(length, dtype=F64)[:, None]
            i = np.arange(d_model // 2, dtype=F64)[None, :]
            angle = pos / 10000.0 ** (2 * i / d_model)
            exact = np.empty((length, d_model))
            exact[:, 0::2], exact[:, 1::2] = np.sin(angle), np.cos(angle)
            yield f"length={length} d_model={d_model}", (length, d_model), (exact,), (F64,)


def _split_shapes(rng):
    for lead in [(), (1,), (2,), (1, 1), (2, 3)]:
        for h in (1, 2, 3):
            for d in (1, 2, 3):
                for L in sorted({1, 2, h, h * d}):
                    yield lead, h, d, L


def _cases_split_heads(rng):
    for lead, h, d, L in _split_shapes(rng):
        for dtype in (F64, F32):
            how = ("c", "f", "strided")[rng.integers(3)]
            x = _normal(rng, lead + (L, h * d), dtype, how=how)
            yield f"x{x.shape} h={h} {how}", (x, h), (_split64(x.copy(), h),), (dtype,)


def _cases_merge_heads(rng):
    for lead, h, d, L in _split_shapes(rng):
        for dtype in (F64, F32):
            how = ("c", "f", "strided")[rng.integers(3)]
            x = _normal(rng, lead + (h, L, d), dtype, how=how)
            yield f"x{x.shape} {how}", (x,), (_merge64(x.copy()),), (dtype,)


def _k_lead(rng, lead):
    """A leading shape for k and v that broadcasts to q's ``lead``: the same, fewer axes, or 1s."""
    choice = rng.integers(4)
    if choice == 0 or not lead:
        return lead
    if choice == 1:
        return lead[rng.integers(0, len(lead) + 1):]
    if choice == 2:
        return tuple(1 if rng.random() < 0.5 else n for n in lead)
    return tuple(1 for _ in lead)[rng.integers(0, len(lead) + 1):]


def _mask(rng, lead, L, S, kind):
    """A bool mask that broadcasts to lead + (L, S), of the form ``kind``."""
    if kind == "none":
        return None
    if kind == "LS":
        shape = (L, S)
    elif kind == "full":
        shape = lead + (L, S)
    elif kind == "pad":
        shape = lead + (1, S)
    elif kind == "ones_lead":
        shape = tuple(1 for _ in lead) + (L, S)
    else:                                       # "mixed": some axes 1, some fewer
        shape = tuple(1 if rng.random() < 0.5 else n for n in lead)[rng.integers(0, len(lead) + 1):]
        shape = shape + ((1, S) if rng.random() < 0.5 else (L, S))
    m = rng.random(shape) < 0.6
    if rng.random() < 0.6:                      # a query (or a whole padded sequence) with no key
        m[(0,) * (len(shape) - 1)] = False
    return m


def _qkv(rng, lead, k_lead, L, S, d_k, d_v, dtype, kind):
    hows = [("c", "f", "strided")[rng.integers(3)] for _ in range(3)]
    q = rng.standard_normal(lead + (L, d_k))
    k = rng.standard_normal(k_lead + (S, d_k))
    v = rng.standard_normal(k_lead + (S, d_v))
    if kind == "big":                           # scores ~ 1e3
        q, k = q * 30, k * 30
    elif kind == "hot":                         # key 0 scores ~ 1e3 (it is masked below)
        q = np.abs(q) * 10 + 1.0
        k[..., 0, :] = 100.0 * math.sqrt(d_k) / d_k
    return (_layout(q.astype(dtype), hows[0]), _layout(k.astype(dtype), hows[1]),
            _layout(v.astype(dtype), hows[2]))


def _attention_draws(rng, count):
    masks = ("none", "LS", "full", "pad", "ones_lead", "mixed")
    for i in range(count):
        lead = LEADS[rng.integers(len(LEADS))]
        k_lead = _k_lead(rng, lead)
        L, S = (int(rng.choice([1, 2, 3, 5])) for _ in range(2))
        d_k, d_v = (int(rng.choice([1, 2, 3])) for _ in range(2))
        dtype = F32 if i % 3 == 2 else F64
        mkind = masks[i % len(masks)]
        kind = ("plain", "big", "hot")[rng.integers(3)] if dtype == F64 else "plain"
        if kind == "hot" and mkind == "none":
            kind = "big"
        mask = _mask(rng, lead, L, S, mkind)
        q, k, v = _qkv(rng, lead, k_lead, L, S, d_k, d_v, dtype, kind)
        if kind == "hot":
            mask = np.array(np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (1, S))))
            mask[..., 0] = False
        label = (f"q{q.shape} k{k.shape} v{v.shape} mask {None if mask is None else mask.shape} "
                 f"{np.dtype(dtype).name} {kind}")
        yield label, q, k, v, mask, dtype


def _cases_attention(rng):
    for label, q, k, v, mask, dtype in _attention_draws(rng, 480):
        args = (q, k, v) if mask is None and rng.random() < 0.5 else (q, k, v, mask)
        yield label, args, (_attention64(q, k, v, mask),), (dtype,)


def _cases_attention_backward(rng):
    for label, q, k, v, mask, dtype in _attention_draws(rng, 360):
        out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], v.shape[-1])
        dout = _normal(rng, out_shape, dtype, how=("c", "f", "strided")[rng.integers(3)])
        tq, tk, tv = _t(q), _t(k), _t(v)
        (_torch_attention(tq, tk, tv, mask) * torch.tensor(dout.astype(F64))).sum().backward()
        args = (dout, q, k, v) if mask is None and rng.random() < 0.5 else (dout, q, k, v, mask)
        yield (label, args, (tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()), (dtype,) * 3)


def _mha_draws(rng, count, masks):
    for i in range(count):
        B, L, S = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 4]))
        h, d_k, d_v = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3]))
        d_model = int(rng.choice([1, 2, 4, 5]))
        dtype = F32 if i % 3 == 2 else F64
        big = dtype == F64 and rng.random() < 0.3
        p = _params(rng, d_model, h, d_k, d_v, dtype, scale_qk=6.0 if big else 1.0)
        how = ("c", "f", "strided")[rng.integers(3)]
        query = _normal(rng, (B, L, d_model), dtype, 3.0 if big else 1.0, how)
        if i % 4 == 0:                          # self-attention: one array is query, key and value
            S, key = L, query
            value = query
        else:
            key = _normal(rng, (B, S, d_model), dtype, 3.0 if big else 1.0, how)
            value = _normal(rng, (B, S, d_model), dtype)
        mk = masks[i % len(masks)]
        mask = None
        if mk == "LS":
            mask = rng.random((L, S)) < 0.6
        elif mk == "B1LS":
            mask = rng.random((B, 1, L, S)) < 0.6
        elif mk == "B11S":
            lengths = rng.integers(0, S + 1, B)
            lengths[0] = 0 if rng.random() < 0.6 else lengths[0]
            mask = (np.arange(S) < lengths[:, None])[:, None, None, :]
        elif mk == "1hLS":
            mask = rng.random((1, h, L, S)) < 0.6
        elif mk == "BhLS":
            mask = rng.random((B, h, L, S)) < 0.6
        if mask is not None and rng.random() < 0.5:
            mask[(0,) * (mask.ndim - 1)] = False
        label = (f"B={B} L={L} S={S} d_model={d_model} h={h} d_k={d_k} d_v={d_v} "
                 f"{np.dtype(dtype).name} {'big ' if big else ''}{'self ' if key is query else ''}"
                 f"mask {None if mask is None else mask.shape} {how}")
        yield label, query, key, value, p, h, mask, dtype


def _cases_mha_forward(rng):
    for label, query, key, value, p, h, mask, dtype in _mha_draws(
            rng, 360, ("none", "LS", "B1LS", "B11S", "1hLS", "BhLS")):
        args = (query, key, value, p, h) if mask is None and rng.random() < 0.5 else \
            (query, key, value, p, h, mask)
        yield label, args, (_mha64(query, key, value, p, h, mask),), (dtype,)


PARAM_KEYS = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")


def _cases_mha_backward(rng):
    for label, query, key, value, p, h, _, dtype in _mha_draws(rng, 200, ("none",)):
        B, L, d_model = query.shape
        dout = _normal(rng, (B, L, d_model), dtype)
        tq, tk, tv = _t(query), _t(key), _t(value)
        tp = {n: _t(a) for n, a in p.items()}
        (_torch_mha(tq, tk, tv, tp, h) * torch.tensor(dout.astype(F64))).sum().backward()
        exact = (tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy(), {n: tp[n].grad.numpy() for n in p})
        yield label, (dout, query, key, value, p, h), exact, (dtype,) * 4


def _cases_tiled_attention(rng):
    for i in range(320):
        lead = [(), (1,), (2,), (2, 1), (1, 3)][rng.integers(5)]
        L, S = int(rng.choice([1, 2, 3, 4])), int(rng.choice([1, 2, 3, 5, 7]))
        d_k, d_v = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3]))
        block = int(rng.choice([1, 2, 3, S, S + 1, 2 * S + 3]))
        dtype = F32 if i % 2 else F64
        kind = ("plain", "huge", "negative", "rows")[i % 4]
        q = rng.standard_normal(lead + (L, d_k))
        k = rng.standard_normal(lead + (S, d_k))
        v = rng.standard_normal(lead + (S, d_v))
        if kind == "huge":
            q, k = q * (30 if dtype == F64 else 4), k * (30 if dtype == F64 else 4)
        elif kind == "negative":                # every score of a row near -110 (or -1e3 in f64)
            target = 110.0 if dtype == F32 else 1000.0
            q = np.ones(lead + (L, d_k)) * (target / math.sqrt(d_k)) * (1 + 0.01 * rng.random(lead + (L, 1)))
            k = -(1 + 0.01 * rng.standard_normal(lead + (S, d_k)))
        elif kind == "rows":                    # row scales 1e3 apart; the max of some rows comes late
            q = q * np.where(rng.random(lead + (L, 1)) < 0.5, 20.0, 0.1)
            k = k * np.linspace(0.1, 3.0 if dtype == F64 else 1.5, S)[:, None]
        hows = [("c", "f", "strided")[rng.integers(3)] for _ in range(3)]
        q, k, v = (_layout(a.astype(dtype), hw) for a, hw in zip((q, k, v), hows, strict=True))
        yield (f"q{q.shape} k{k.shape} v{v.shape} block={block} {np.dtype(dtype).name} {kind}",
               (q, k, v, block), (_attention64(q, k, v),), (dtype,))


def _cases_decode_step(rng):
    for i in range(240):
        B, h, d_k, d_v = (int(rng.choice(c)) for c in ([1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]))
        d_model, t = int(rng.choice([1, 2, 4, 5])), int(rng.choice([0, 1, 2, 4]))
        dtype = F32 if i % 3 == 2 else F64
        big = dtype == F64 and i % 4 == 1
        p = _params(rng, d_model, h, d_k, d_v, dtype, scale_qk=6.0 if big else 1.0)
        how = ("c", "f", "strided")[rng.integers(3)]
        x = _normal(rng, (B, 1, d_model), dtype, 3.0 if big else 1.0, how)
        kc = _normal(rng, (B, h, t, d_k), dtype, 15.0 if big else 1.0, how)
        vc = _normal(rng, (B, h, t, d_v), dtype, 1.0, ("c", "f", "strided")[rng.integers(3)])
        p64 = {n: a.astype(F64) for n, a in p.items()}
        x64 = x.astype(F64)
        qn = _split64(x64 @ p64["W_q"] + p64["b_q"], h)
        kn = np.concatenate([kc.astype(F64), _split64(x64 @ p64["W_k"] + p64["b_k"], h)], axis=2)
        vn = np.concatenate([vc.astype(F64), _split64(x64 @ p64["W_v"] + p64["b_v"], h)], axis=2)
        out = _merge64(_attention64(qn, kn, vn)) @ p64["W_o"] + p64["b_o"]
        yield (f"B={B} d_model={d_model} h={h} d_k={d_k} d_v={d_v} t={t} {np.dtype(dtype).name}"
               f"{' big' if big else ''} {how}", (x, kc, vc, p, h), (out, kn, vn), (dtype,) * 3)


def cases(name: str, seed: int = 0):
    """Every case of exercise ``name``: (label, args, expected outputs, their dtypes); ``seed`` draws
    another set of the same kinds."""
    rng = np.random.default_rng([43 + EXERCISES.index(name), seed])
    return list(globals()[f"_cases_{name}"](rng))


# ----------------------------------------------------------------------------- the verdict

def _differs(got, exact, dtype) -> str | None:
    if isinstance(exact, dict):
        if not isinstance(got, dict) or set(got) != set(exact):
            return f"grads keys {sorted(got) if isinstance(got, dict) else type(got).__name__}"
        for n in exact:
            why = _differs(got[n], exact[n], dtype)
            if why:
                return f"grads[{n!r}]: {why}"
        return None
    if not isinstance(got, np.ndarray):
        return f"returned {type(got).__name__}, not an array"
    if got.shape != exact.shape:
        return f"shape {got.shape}, expected {exact.shape}"
    if got.dtype != np.dtype(dtype):
        return f"dtype {got.dtype}, expected {np.dtype(dtype)}"
    if exact.dtype == np.bool_:
        return None if np.array_equal(got, exact) else "wrong entries"
    g = got.astype(F64)
    if not np.all(np.isfinite(g)):
        return "non-finite entries"
    tol = (1e-9 if dtype == F64 else 1e-4) * (1 + np.abs(exact))
    err = np.abs(g - exact)
    if np.any(err > tol):
        return f"max error {err.max():.3g}"
    return None


def _snapshot(args):
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(("array", a.copy(), a.shape, a.strides, a.dtype))
        elif isinstance(a, dict):
            out.append(("dict", {k: (v.copy(), v.shape, v.strides) for k, v in a.items()}))
        else:
            out.append(("other", copy.deepcopy(a)))
    return out


def _written(args, snap) -> str | None:
    for i, (a, s) in enumerate(zip(args, snap, strict=True)):
        if s[0] == "array":
            if a.shape != s[2] or a.strides != s[3] or a.dtype != s[4] or not np.array_equal(a, s[1],
                                                                                          equal_nan=True):
                return f"argument {i} written to"
        elif s[0] == "dict":
            if set(a) != set(s[1]):
                return f"argument {i} (dict) keys changed"
            for k, (v, shape, strides) in s[1].items():
                if a[k].shape != shape or a[k].strides != strides or not np.array_equal(a[k], v):
                    return f"argument {i}[{k!r}] written to"
        elif a != s[1]:
            return f"argument {i} changed"
    return None


def verdict(name: str, fn, limit: int = 5, seed: int = 0) -> list:
    """What ``fn`` got wrong on the cases of ``name`` (at most ``limit`` lines); [] if nothing."""
    bad = []
    for label, args, exact, dtypes in cases(name, seed):
        snap = _snapshot(args)
        try:
            with np.errstate(all="ignore"):
                got = fn(*args)
        except Exception as e:                  # noqa: BLE001 (a student's error is a verdict)
            bad.append(f"{label}: raised {type(e).__name__}: {e}")
        else:
            why = _written(args, snap)
            if why is None:
                if len(exact) == 1:
                    got = (got,)
                if not isinstance(got, (tuple, list)) or len(got) != len(exact):
                    why = f"returned {type(got).__name__} of the wrong length"
                else:
                    for j, (g, e, d) in enumerate(zip(got, exact, dtypes, strict=True)):
                        why = _differs(g, e, d)
                        if why:
                            why = f"output {j}: {why}"
                            break
            if why:
                bad.append(f"{label}: {why}")
        if len(bad) >= limit:
            break
    return bad
