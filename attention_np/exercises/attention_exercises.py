"""Exercises on Eq. (1): its forward and its backward."""

from __future__ import annotations

import numpy as np

from attention_np.exercises import generate
from attention_np.exercises.checker import SCALE_HINT, UNWEIGHTED_HINT, Case, Exercise, Mistake
from attention_np.paper._validate import sum_to_shape
from attention_np.paper.attention import sdpa_backward, sdpa_forward
from attention_np.paper.gradcheck import numerical_gradient
from attention_np.paper.softmax import softmax


def ref_attention(q, k, v, mask=None):
    """Eq. (1): q (..., L, d_k), k (..., S, d_k), v (..., S, d_v), bool mask broadcastable to
    (..., L, S) with True = may attend -> (..., L, d_v); a fully masked row gives zeros."""
    return sdpa_forward(q, k, v, mask)[0]


def _qkv(rng, L, S, d_k, d_v, batch=(), dtype=np.float64):
    return tuple(rng.normal(size=(*batch, n, d)).astype(dtype) for n, d in ((L, d_k), (S, d_k), (S, d_v)))


def _sizes(rng, seed, default):
    """(L, S, d_k, d_v): ``default`` for the public cases, four other distinct sizes for the
    hidden ones (so L != S and d_k != d_v there too)."""
    if seed == default[0]:
        return default[1]
    return tuple(int(n) for n in rng.choice(np.arange(2, 8), 4, replace=False))


def _kv_batch(rng, batch, family):
    """The leading axes of k and v for q's ``batch``: the same, fewer (``fewer``: one or more
    dropped; ``fewer2``: two), or size 1 where q's is larger (``ones``); None if impossible."""
    if family == "fewer":
        return batch[int(rng.integers(1, len(batch) + 1)):] if batch else None
    if family == "fewer2":
        return batch[2:] if len(batch) >= 2 else None
    if family == "ones":
        big = [i for i, n in enumerate(batch) if n > 1]
        if not big:
            return None
        ones = set(rng.choice(big, int(rng.integers(1, len(big) + 1)), replace=False).tolist())
        return tuple(1 if i in ones else n for i, n in enumerate(batch))
    return batch


def _some_true(rng, shape, p=0.6):
    """A random bool mask of ``shape`` with at least one True in each row (last axis)."""
    m = rng.random(shape) < p
    return m | (np.arange(shape[-1]) == rng.integers(shape[-1], size=shape[:-1])[..., None])


def _random_mask(rng, batch, L, S):
    return _some_true(rng, (*batch, L, S))


def _keys_mask(rng, batch, L, S):
    """(..., 1, S): broadcast over the queries."""
    return _some_true(rng, (*batch, 1, S)) if L > 1 else False


def _shared_mask(rng, batch, L, S):
    """(L, S) for a batch of queries."""
    return _some_true(rng, (L, S)) if batch else False


def _ones_mask(rng, batch, L, S):
    """Size-1 leading axes where the queries' are larger."""
    if not any(n > 1 for n in batch):
        return False
    return _some_true(rng, (*(1 if n > 1 else n for n in batch), L, S))


def _row_mask(rng, batch, L, S):
    """One query may attend to nothing."""
    m = _some_true(rng, (*batch, L, S))
    m[..., int(rng.integers(L)), :] = False
    return m


def _empty_mask(rng, batch, L, S):
    """A padding mask (..., 1, S), one sequence empty."""
    if not batch:
        return False
    lengths = rng.integers(1, S + 1, size=batch)
    lengths[tuple(int(rng.integers(n)) for n in batch)] = 0
    return np.arange(S) < lengths[..., None, None]


def _high_mask(rng, batch, L, S):
    """A masked key (masked in every row) that scores far above the others."""
    if S < 2:
        return False
    m = _some_true(rng, (*batch, L, S - 1))
    return np.insert(m, int(rng.integers(S)), False, axis=-1)


#: the mask of each value family, ``(rng, batch, L, S) -> mask``; False when impossible at these sizes
MASK_OF = {"random": _random_mask, "keys": _keys_mask, "shared": _shared_mask, "ones": _ones_mask,
           "row": _row_mask, "empty": _empty_mask, "high": _high_mask}


def _mask(rng, family, batch, L, S):
    """A mask of one family (None: no mask; False: impossible at these sizes)."""
    make = MASK_OF.get(family)
    return None if make is None else make(rng, batch, L, S)


BROADCASTS = ("fewer", "fewer2", "ones")
MASKS = ("random", "keys", "shared", "ones_mask", "row", "empty", "high")


def attention_inputs(rng, sz, key, family):
    """q, k, v (and a mask) of the sizes ``sz`` for one clause and value family, or None."""
    L, S, d_k, d_v, batch = sz["L"], sz["S"], sz["d_k"], sz["d_v"], sz["batch"]
    kb = _kv_batch(rng, batch, family) if family in BROADCASTS else batch
    if kb is None:
        return None
    q = rng.normal(size=(*batch, L, d_k))
    k, v = rng.normal(size=(*kb, S, d_k)), rng.normal(size=(*kb, S, d_v))
    unit = np.sqrt(d_k) / d_k                        # k entries of this size add ~mean(q) to a score
    if family == "huge":
        q, k = 30 * q, 30 * k
    elif family in ("peak", "later_larger", "high"):
        q = np.abs(q) + 0.5                          # positive queries: a large key scores high for all
        if family == "peak":                         # one key at a random position ~1e3 above the rest
            k[..., int(rng.integers(S)), :] += 1000 * unit
        elif family == "later_larger":               # key j scores ~300 j above key 0
            k = k + 300 * unit * np.arange(S)[:, None]
    mask = _mask(rng, "ones" if family == "ones_mask" else family, batch, L, S) if family in MASKS else None
    if mask is False:
        return None
    if family == "high":
        k = k + 1000 * unit * ~mask.reshape(-1, S).any(0)[:, None]   # the keys masked in every row
    dt = sz["dtype"]
    args = tuple(x.astype(dt) for x in (q, k, v))
    return args if mask is None else (*args, mask)


def _attention_measure(args, first=0):
    q, k, v = args[first:first + 3]
    return {"L": q.shape[-2], "S": k.shape[-2], "d_k": q.shape[-1], "d_v": v.shape[-1],
            "batch": q.shape[:-2], "dtype": q.dtype}


_AXES = tuple(generate.Axis(n, high=h) for n, h in (("L", 5), ("S", 6), ("d_k", 5), ("d_v", 5)))
_C = generate.Clause
_SHARED = (_C("shapes", ("no_mask", "random")), _C("L_ne_S", require=lambda z: z["L"] != z["S"]),
           _C("L_1", ("no_mask", "random"), pins={"L": 1}),
           _C("mask_broadcast", ("keys", "shared", "ones_mask")), _C("fully_masked", ("row", "empty")))

ATTENTION_SPEC = generate.Spec(
    "attention", _AXES, differ=(("L", "S"), ("d_k", "d_v")), lead=3, build=attention_inputs,
    measure=_attention_measure, clauses=_SHARED + (
        _C("broadcast", ("fewer", "ones"), excludes=("lead=0",)),
        _C("masked_zero", ("random", "high")), _C("finite", ("random",)),
        _C("extreme", ("huge", "peak", "later_larger")), _C("returns", ("no_mask",))))


def _attention_cases(seed=2):
    return generate.draw(ATTENTION_SPEC, seed, None if seed == 2 else 2)


def _attn(q, k, v, mask=None, *, scale=None, axis=-1, fill=-np.inf, stable=True,
          polarity=True, weights=False):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) * float(1 / np.sqrt(d_k) if scale is None else scale)
    if mask is not None:
        keep = mask if polarity else ~mask
        s = np.where(keep, s, fill)
    if stable:
        p = softmax(s, axis=axis)
    else:
        e = np.exp(s)
        p = e / e.sum(axis, keepdims=True)
    return p if weights else p @ v


def _unguarded(q, k, v, m=None):
    """The stable softmax without a guard for a row of all -inf: right everywhere else, NaN on
    a fully masked row (its max is -inf, and -inf - (-inf) is NaN)."""
    s = q @ np.swapaxes(k, -1, -2) * float(1 / np.sqrt(q.shape[-1]))
    if m is not None:
        s = np.where(m, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True) @ v


ATTENTION = Exercise(
    "attention", "attention(q, k, v, mask=None)",
    "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (Eq. (1), §3.2.1)",
    ref_attention, _attention_cases, spec=ATTENTION_SPEC, mistakes=[
        Mistake("no 1/sqrt(d_k)", lambda q, k, v, m=None: _attn(q, k, v, m, scale=1.0), SCALE_HINT),
        Mistake("divided by d_k instead of sqrt(d_k)",
                lambda q, k, v, m=None: _attn(q, k, v, m, scale=1 / q.shape[-1]),
                "q . k sums d_k products of unit variance: its variance is d_k. Dividing by what "
                "brings the variance back to 1?"),
        Mistake("scaled by sqrt(d_v) instead of sqrt(d_k)",
                lambda q, k, v, m=None: _attn(q, k, v, m, scale=1 / np.sqrt(v.shape[-1])),
                "The scores are dot products of queries and keys: whose width sets their size?"),
        Mistake("softmax over the wrong axis (over queries)",
                lambda q, k, v, m=None: _attn(q, k, v, m, axis=-2),
                "Each query distributes its attention over the keys: the weights of one query "
                "(one row) sum to 1."),
        Mistake("no max subtraction (overflow)",
                lambda q, k, v, m=None: _attn(q, k, v, m, stable=False),
                "With large scores exp overflows to inf and inf/inf is NaN: shift each row first."),
        Mistake("mask polarity flipped", lambda q, k, v, m=None: _attn(q, k, v, m, polarity=False),
                "The convention is True = may attend. Which entries did you set to -inf?"),
        Mistake("masked with 0 instead of -inf", lambda q, k, v, m=None: _attn(q, k, v, m, fill=0.0),
                "exp(0) = 1: a score of 0 still gets weight. What score gets weight exactly 0?"),
        Mistake("masked after the softmax without renormalizing",
                lambda q, k, v, m=None: _attn(q, k, v, None, weights=True) @ v if m is None
                else (_attn(q, k, v, None, weights=True) * m) @ v,
                "Zeroing weights after the softmax leaves rows that no longer sum to 1. Mask "
                "the scores, before the softmax."),
        Mistake("NaN on a fully masked row", _unguarded,
                "A row that may attend to nothing is all -inf: its max is -inf and -inf - (-inf) "
                "is NaN. Decide what such a row returns (the library returns 0) and special-case it."),
        Mistake("a fully masked row attends uniformly (finite fill like -1e9)",
                lambda q, k, v, m=None: _attn(q, k, v, m, fill=-1e9),
                "With a finite fill, a row with every key masked softmaxes to uniform weights "
                "over keys it may not see. It should attend to nothing (output 0)."),
        Mistake("returned the attention weights instead of the output",
                lambda q, k, v, m=None: _attn(q, k, v, m, weights=True),
                "Eq. (1) ends with '... V': the weights average the values."),
    ])


# ---------------------------------------------------------------- backward
def ref_attention_backward(dout, q, k, v, mask=None):
    """(dq, dk, dv) of Eq. (1), each with the shape of its input (summed over broadcast axes)."""
    return sdpa_backward(dout, sdpa_forward(q, k, v, mask)[1])


def _fd(q, k, v, mask, dout):
    q, k, v = q.copy(), k.copy(), v.copy()

    def loss():
        return float((dout * sdpa_forward(q, k, v, mask)[0]).sum())
    return tuple(numerical_gradient(loss, x) for x in (q, k, v))


def _backward_inputs(rng, sz, key, family):
    args = attention_inputs(rng, sz, key, family)
    if args is None:
        return None
    q, k, v = args[:3]
    out_batch = np.broadcast_shapes(*(a.shape[:-2] for a in args))      # q's, k's, the mask's
    return (rng.normal(size=(*out_batch, q.shape[-2], v.shape[-1])).astype(q.dtype), *args)


BACKWARD_SPEC = generate.Spec(
    "attention_backward", _AXES, differ=(("L", "S"), ("d_k", "d_v")), lead=3, build=_backward_inputs,
    measure=lambda a: _attention_measure(a, 1), clauses=_SHARED + (
        _C("gradient", ("no_mask", "random")),
        _C("broadcast", ("fewer", "fewer2", "ones"), excludes=("lead=0",)),
        _C("size_one", ("ones",), excludes=("lead=0",))))


def _backward_cases(seed=3):
    rng = np.random.default_rng(seed)
    L, S, d_k, d_v = _sizes(rng, seed, (3, (3, 5, 4, 2)))
    q, k, v = _qkv(rng, L, S, d_k, d_v)
    dout = rng.normal(size=(L, d_v))
    mask = _some_true(rng, (L, S))
    full = mask.copy()
    full[int(rng.integers(L))] = False                # one query may attend to nothing
    return generate.draw(BACKWARD_SPEC, seed, None if seed == 3 else 3) + [
        Case("gradcheck with a fully masked row", (dout, q, k, v, full),
             expected=_fd(q, k, v, full, dout), tol=(1e-6, 1e-8), clauses=("fully_masked", "gradient")),
        Case("gradcheck: central differences of Eq. (1)", (dout, q, k, v, mask),
             expected=_fd(q, k, v, mask, dout), tol=(1e-6, 1e-8), clauses=("gradient",)),
    ]


def _bwd(dout, q, k, v, m=None, *, scale_q=True, scale_k=True, full_jacobian=True,
         sum_back=True, dk_from_s=True, weighted=True):
    s_ = float(1 / np.sqrt(q.shape[-1]))
    s = q @ np.swapaxes(k, -1, -2) * s_
    if m is not None:
        s = np.where(m, s, -np.inf)
    p = softmax(s)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - ((dp * p) if weighted else dp).sum(-1, keepdims=True)) if full_jacobian \
        else p * (1 - p) * dp
    dq = ds @ k * (s_ if scale_q else 1.0)
    dk = (np.swapaxes(ds, -1, -2) @ q if dk_from_s else ds @ q) * (s_ if scale_k else 1.0)
    if sum_back:                # what broadcasting added or stretched, summed back (size-1 axes kept)
        dk, dv = sum_to_shape(dk, k.shape), sum_to_shape(dv, v.shape)
    return dq, dk, dv


ATTENTION_BACKWARD = Exercise(
    "attention_backward", "attention_backward(dout, q, k, v, mask=None)",
    "Backward of out = softmax(q k^T / sqrt(d_k)) v: returns (dq, dk, dv)",
    ref_attention_backward, _backward_cases, outputs=("dq", "dk", "dv"), spec=BACKWARD_SPEC, mistakes=[
        Mistake("forgot 1/sqrt(d_k) in dq and dk",
                lambda *a: _bwd(*a, scale_q=False, scale_k=False),
                "The forward line s = q k^T * scale multiplies by a constant: its backward "
                "multiplies by it too."),
        Mistake("forgot 1/sqrt(d_k) in dk only", lambda *a: _bwd(*a, scale_k=False),
                "Both q and k enter the scores through the same scaled product."),
        Mistake("softmax backward kept only the diagonal",
                lambda *a: _bwd(*a, full_jacobian=False),
                "dS = P * (dP - rowsum(dP * P)): every weight in a row shares the normalizer."),
        Mistake("sum without the weights p", lambda *a: _bwd(*a, weighted=False), UNWEIGHTED_HINT),
        Mistake("broadcast gradients not summed back", lambda *a: _bwd(*a, sum_back=False),
                "k and v were broadcast across the batch in the forward; a broadcast copies, so "
                "its backward sums: dk must have k's shape."),
        Mistake("dk = dS q instead of dS^T q", lambda *a: _bwd(*a, dk_from_s=False),
                "dS is (L, S) and dk is (S, d_k): which transpose makes the key axis come first?"),
    ])
