"""Inputs drawn from each exercise's contract, for the audit's equivalence set (:mod:`.audit`).

A mutant is set aside as *equivalent* only when it agrees with the reference on every case the
checker and the autograder hold and on these: many more, with every size the contract allows at
1 and above 1 (batch axes, heads, L, S, d_k != d_v, d_model), both dtypes, broadcasting k and v,
masks of every allowed shape, fully masked rows, huge and very negative scores. They are written
from the contracts (:data:`attention_np.exercises.notebooks.CLAUSES`), apart from the cases, so
that a hole in the cases is not a hole here: a mutant that only these inputs catch is counted as
wrong and accepted, and the audit names the input that shows it.

``draw(name, rng)`` returns one ``(label, args)``; :func:`inputs` gives :data:`COUNT` of them per
exercise (every ``(L, S, align)`` for ``causal_mask``). The audit keeps only the inputs on which
the model solution agrees with the reference, and reports the others (a test holds them at 0).
"""

from __future__ import annotations

import numpy as np

from attention_np.exercises.basics_exercises import ref_softmax

#: generated inputs per exercise
COUNT = 60
SEED = 42


def _dtype(rng):
    return np.float32 if rng.random() < 0.3 else np.float64


def _batch(rng, most=2):
    """Leading axes: 0 to ``most`` of them, each of size 1 to 3."""
    return tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, most + 1))))


def _size(rng, top=5):
    """A size from 1 to ``top``, 1 about a third of the time."""
    return 1 if rng.random() < 0.3 else int(rng.integers(2, top + 1))


def _logits(rng, shape):
    """Normal logits, sometimes huge (~1e3), very negative, or rows on different scales."""
    x = rng.normal(size=shape)
    style = rng.integers(0, 4)
    if style == 1:
        x = 1000.0 * rng.choice([-1.0, 1.0]) + 50 * x
    elif style == 2:
        x = x * 10.0 ** rng.integers(-1, 3, size=shape[:-1] + (1,))
    elif style == 3 and shape[-1] > 1:
        x[..., -1] += 800.0                     # a later entry far larger than the earlier ones
    return x


def _neg_inf(rng, x):
    """About 30 % of the entries -inf, at least one finite per row."""
    out = np.where(rng.random(x.shape) < 0.3, -np.inf, x)
    keep = rng.integers(0, x.shape[-1], size=x.shape[:-1])
    np.put_along_axis(out, keep[..., None], np.take_along_axis(x, keep[..., None], -1), -1)
    return out


def _softmax(rng):
    shape = _batch(rng, 3) + (_size(rng, 6),)
    x = _logits(rng, shape)
    if rng.random() < 0.3:
        x = _neg_inf(rng, x)
    return f"x {shape}", (x.astype(_dtype(rng)),)


def _softmax_backward(rng):
    shape = _batch(rng, 3) + (_size(rng, 6),)
    x = _logits(rng, shape)
    if rng.random() < 0.4:
        x = _neg_inf(rng, x)
    dt = _dtype(rng)
    return f"dp, p {shape}", (rng.normal(size=shape).astype(dt), ref_softmax(x).astype(dt))


def _padding(rng):
    B, S = int(rng.integers(1, 5)), _size(rng, 7)
    lengths = rng.integers(0, S + 1, size=B)
    return f"lengths {lengths.tolist()}, S={S}", (lengths, S)


def _qkv(rng, batch, L, S, d_k, d_v, dt, kv_batch):
    q = rng.normal(size=batch + (L, d_k))
    k, v = rng.normal(size=kv_batch + (S, d_k)), rng.normal(size=kv_batch + (S, d_v))
    if rng.random() < 0.25:
        q, k = 30 * q, 30 * k                    # |scores| ~ 1e3
    return q.astype(dt), k.astype(dt), v.astype(dt)


def _kv_batch(rng, batch):
    """k and v's leading axes: q's, fewer of them, or some of size 1 (they broadcast)."""
    style = rng.integers(0, 3)
    if style == 1 and batch:
        return batch[int(rng.integers(1, len(batch) + 1)):]
    if style == 2:
        return tuple(1 if rng.random() < 0.5 else n for n in batch)
    return batch


def _mask(rng, batch, L, S, full_rows=True):
    """None, or a bool mask broadcastable to batch + (L, S): fewer axes, axes of size 1, the
    padding form (..., 1, S); a fully masked row now and then (when ``full_rows``)."""
    if rng.random() < 0.25:
        return None, "no mask"
    lead = batch[int(rng.integers(0, len(batch) + 1)):] if batch else ()
    lead = tuple(1 if rng.random() < 0.3 else n for n in lead)
    rows = 1 if rng.random() < 0.3 else L
    mask = rng.random(lead + (rows, S)) < 0.6
    mask[..., int(rng.integers(0, S))] = True
    if full_rows and rng.random() < 0.4:
        mask[(0,) * len(lead) + (int(rng.integers(0, rows)),)] = False
    if rng.random() < 0.2 and full_rows:
        mask[...] = False                        # nothing may be attended to
    return mask, f"mask {mask.shape}"


def _attention_sizes(rng):
    batch = _batch(rng)
    return batch, _size(rng), _size(rng, 6), _size(rng), _size(rng), _dtype(rng)


def _attention(rng):
    batch, L, S, d_k, d_v, dt = _attention_sizes(rng)
    kvb = _kv_batch(rng, batch)
    q, k, v = _qkv(rng, batch, L, S, d_k, d_v, dt, kvb)
    mask, said = _mask(rng, batch, L, S)
    args = (q, k, v) if mask is None else (q, k, v, mask)
    return f"q {q.shape}, k {k.shape}, v {v.shape}, {said}, {np.dtype(dt).name}", args


def _attention_backward(rng):
    label, args = _attention(rng)
    q, v = args[0], args[2]
    dout = rng.normal(size=np.broadcast_shapes(q.shape[:-2], v.shape[:-2]) + (q.shape[-2], v.shape[-1]))
    return "dout, " + label, (dout.astype(q.dtype), *args)


def _split(rng):
    h, d = _size(rng, 4), _size(rng, 3)
    x = rng.normal(size=_batch(rng) + (_size(rng, 4), h * d)).astype(_dtype(rng))
    return f"x {x.shape}, h={h}", (x, h)


def _merge(rng):
    x = rng.normal(size=_batch(rng) + (_size(rng, 4), _size(rng, 4), _size(rng, 3))).astype(_dtype(rng))
    return f"x {x.shape}", (x,)


def params(rng, d_model, h, d_k, d_v, dt):
    """W_q, W_k (d_model, h*d_k), W_v (d_model, h*d_v), W_o (h*d_v, d_model), nonzero biases."""
    shapes = {"W_q": (d_model, h * d_k), "W_k": (d_model, h * d_k), "W_v": (d_model, h * d_v),
              "W_o": (h * d_v, d_model), "b_q": (h * d_k,), "b_k": (h * d_k,), "b_v": (h * d_v,),
              "b_o": (d_model,)}
    return {n: (rng.normal(size=s) / np.sqrt(s[0] if n[0] == "W" else 10)).astype(dt)
            for n, s in shapes.items()}


def _mha_inputs(rng, big_f32=True):
    """``big_f32`` False: no large inputs in float32 (the backward's float32 rounding on them
    exceeds the checker's float32 tolerance, model solution included)."""
    B, L, S, d_model = _size(rng, 3), _size(rng, 4), _size(rng, 5), _size(rng, 6)
    h, d_k = _size(rng, 3), _size(rng, 3)
    d_v = d_k if rng.random() < 0.5 else _size(rng, 3)
    dt, big = _dtype(rng), 30.0 if rng.random() < 0.2 else 1.0     # big: scores ~ 1e2 to 1e3
    big = 1.0 if dt == np.float32 and not big_f32 else big
    p = params(rng, d_model, h, d_k, d_v, dt)
    query = (big * rng.normal(size=(B, L, d_model))).astype(dt)
    style = rng.integers(0, 3)
    if style == 0:
        key = value = query                      # self-attention: one array
    else:
        key = (big * rng.normal(size=(B, S, d_model))).astype(dt)
        value = key if style == 1 else rng.normal(size=(B, S, d_model)).astype(dt)
    label = f"B={B}, L={L}, S={key.shape[1]}, d_model={d_model}, h={h}, d_k={d_k}, d_v={d_v}, " \
            f"{'self' if style == 0 else 'cross'}, {np.dtype(dt).name}" + (", inputs x30" if big > 1 else "")
    return label, query, key, value, p, h


def _mha_forward(rng):
    label, query, key, value, p, h = _mha_inputs(rng)
    B, L, S = query.shape[0], query.shape[1], key.shape[1]
    shape = [(L, S), (B, 1, L, S), (B, 1, 1, S), None][int(rng.integers(0, 4))]
    if shape is None:
        return label, (query, key, value, p, h)
    mask = rng.random(shape) < 0.6
    mask[..., int(rng.integers(0, S))] = True
    if rng.random() < 0.3:                      # a query, or a padded sequence, that sees no key
        mask[(0,) * (len(shape) - 1)] = False
    return f"{label}, mask {shape}" + (", a fully masked row" if not mask.any(-1).all() else ""), \
        (query, key, value, p, h, mask)


def _mha_backward(rng):
    label, query, key, value, p, h = _mha_inputs(rng, big_f32=False)
    dout = rng.normal(size=query.shape).astype(query.dtype)
    return label, (dout, query, key, value, p, h)


def _tiled(rng):
    batch, L, S, d_k, d_v = _batch(rng), _size(rng, 4), _size(rng, 12), _size(rng, 4), _size(rng, 3)
    dt = _dtype(rng)
    q, k, v = _qkv(rng, batch, L, S, d_k, d_v, np.float64, batch)
    style = rng.integers(0, 4)
    if style == 1:                               # scores growing key after key (the max moves)
        k = k + np.linspace(0, 40, S)[:, None]
    elif style == 2 and L > 1:                   # one row's max in the last block, another's first
        q[..., 0, :], q[..., 1, :] = 1.0, -1.0
        k = k + (np.arange(S)[:, None] * 200.0 / d_k)
    elif style == 3:                             # every score near one very negative level
        q = np.ones_like(q)
        k = -110.0 * np.sqrt(d_k) / d_k * rng.integers(1, 3) + 0.2 * k
    block = int(rng.integers(1, S + 4))
    return (f"q {q.shape}, k {k.shape}, v {v.shape}, block {block}, {np.dtype(dt).name}",
            (q.astype(dt), k.astype(dt), v.astype(dt), block))


def _decode(rng):
    B, h, d_model, d_k = _size(rng, 3), _size(rng, 3), _size(rng, 6), _size(rng, 3)
    t = int(rng.integers(0, 5))
    d_v = d_k if rng.random() < 0.5 else _size(rng, 3)
    dt, big = _dtype(rng), 30.0 if rng.random() < 0.2 else 1.0
    p = params(rng, d_model, h, d_k, d_v, dt)
    x = (big * rng.normal(size=(B, 1, d_model))).astype(dt)
    kc = (big * rng.normal(size=(B, h, t, d_k))).astype(dt)
    vc = rng.normal(size=(B, h, t, d_v)).astype(dt)
    return (f"B={B}, h={h}, t={t}, d_model={d_model}, d_k={d_k}, d_v={d_v}, {np.dtype(dt).name}"
            + (", x and k_cache x30" if big > 1 else "")), (x, kc, vc, p, h)


def _sinusoidal(rng):
    length, d_model = (_size(rng, 12), 2 * _size(rng, 8)) if rng.random() < 0.8 else \
        (int(rng.integers(50, 120)), 2 * int(rng.integers(8, 40)))
    return f"length={length}, d_model={d_model}", (length, d_model)


DRAW = {"softmax": _softmax, "softmax_backward": _softmax_backward, "padding_mask": _padding,
        "attention": _attention, "attention_backward": _attention_backward, "split_heads": _split,
        "merge_heads": _merge, "mha_forward": _mha_forward, "mha_backward": _mha_backward,
        "tiled_attention": _tiled, "decode_step": _decode, "sinusoidal": _sinusoidal}


def inputs(name: str, count: int = COUNT, seed: int = SEED) -> list:
    """``[(label, args)]``: ``count`` inputs of exercise ``name`` drawn from its contract (for
    ``causal_mask``, every L, S from 1 to 7 with both alignments)."""
    if name == "causal_mask":
        return [(f"L={L}, S={S}, {a}", (L, S, a)) for L in range(1, 8) for S in range(1, 8)
                for a in ("top_left", "bottom_right")]
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    return [DRAW[name](rng) for _ in range(count)]
