"""Shared tools of the behaviour probes: call a submission on fresh copies, read its output as an
array, compare, and measure the scale a submission applies to q k^T.

NumPy only and no import of ``attention_np`` (copied into the course kits, see probes.py).
"""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised, call

RNG_SEED = 20260


def output_of(fn, *args, **kwargs):
    """The output of one call on fresh copies (a :class:`Raised` if it raised)."""
    return call(fn, args, kwargs).out


def as_array(x):
    """``x`` as a float64 array, or None when it is not one (raised, wrong structure)."""
    if isinstance(x, Raised) or isinstance(x, (tuple, list, dict)):
        return None
    try:
        a = np.asarray(x)
    except Exception:           # noqa: BLE001
        return None
    if not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        return None
    return a.astype(np.float64)


def close_to(a, b, rtol=1e-6, atol=1e-9):
    """True when arrays ``a`` and ``b`` (either may be None: False) have one shape and agree within
    ``atol + rtol * |b|`` everywhere."""
    if a is None or b is None or np.shape(a) != np.shape(b):
        return False
    a, b = np.asarray(a, float), np.asarray(b, float)
    return bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))


def has_nan(a):
    """True when the array ``a`` (None: False) has a NaN."""
    return a is not None and bool(np.isnan(a).any())


def measure_scale(weights, q, k):
    """The factor c with weights = softmax(c * q k^T), fitted from the weights (None if they are
    not of that form, e.g. not positive)."""
    w = np.asarray(weights, float)
    if w.shape != (q.shape[0], k.shape[0]) or not np.all(w > 0) or not np.all(np.isfinite(w)):
        return None
    s = q @ k.T
    lw = np.log(w) - np.log(w).mean(-1, keepdims=True)
    sc = s - s.mean(-1, keepdims=True)
    c = float((lw * sc).sum() / (sc * sc).sum())
    if not np.allclose(lw, c * sc, atol=1e-6 * max(1.0, abs(c) * np.abs(sc).max())):
        return None
    return c


def scale_finding(c, d_k, d_v, S=None):
    """The finding for a measured scale ``c`` of q k^T (None when it is 1/sqrt(d_k)); ``S`` (the
    number of keys) names a scale by sqrt(S). The probe's d_k, d_v and S must differ."""
    want = 1 / np.sqrt(d_k)
    if c is None or abs(c - want) <= 1e-6 * want:
        return None
    for value, name, hint in (
            (1.0, "no 1/sqrt(d_k)", "§3.2.1: for large d_k the dot products grow large and push the "
             "softmax into regions with tiny gradients. What keeps their variance at 1?"),
            (1 / d_k, "divided by d_k instead of sqrt(d_k)", "q . k sums d_k products of unit "
             "variance: its variance is d_k. Dividing by what brings the variance back to 1?"),
            (1 / np.sqrt(d_v), "scaled by sqrt(d_v) instead of sqrt(d_k)", "The scores are dot "
             "products of queries and keys: whose width sets their size?"),
            (np.sqrt(d_k), "multiplied by sqrt(d_k) instead of dividing", "Eq. (1) divides the "
             "scores by sqrt(d_k)."),
            *(((1 / np.sqrt(S), "scaled by sqrt(S), the number of keys, instead of sqrt(d_k)", "d_k "
                "is the width of q and k (their last axis), not a number of positions."),) if S else ())):
        if abs(c - value) <= 1e-4 * value:
            return Finding(name, f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                           f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", hint)
    return Finding("wrong scale", f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                   f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", "Eq. (1): softmax(Q K^T / sqrt(d_k)) V, "
                   "with d_k the width of q and k.")



def describe(name, got, want, factors=(), broadcast=None):
    """How output ``name`` differs from the stored answer ``want``, measured: None when it is
    right, else ``(kind, sentence)`` with kind one of "missing", "nan", "extra_axes",
    "kept_axes", "partial_sum", "shape", "transposed", "permuted", "zero", "sign", "scale",
    "values". ``factors`` are ``(value, words)`` pairs that name a measured scale
    (e.g. (2.0, "sqrt(d_k)")); ``broadcast`` is the shape a gradient has before it is summed
    back to its input's shape."""
    want = np.asarray(want, dtype=np.float64)
    g = as_array(got)
    if g is None:
        return "missing", f"{name} is not an array"
    if g.shape != want.shape:
        gs, ws = g.shape, want.shape
        if tuple(n for n in gs if n != 1) == tuple(n for n in ws if n != 1) and close_to(
                g.reshape(ws), want):
            return "kept_axes", (f"{name} has shape {gs}, expected {ws}: the values are right, the "
                                 "summed axes were kept (keepdims) or dropped")
        if broadcast is not None and gs == tuple(broadcast):
            return "extra_axes", (f"{name} has shape {gs}, expected {ws}: the broadcast axes were "
                                  "not summed")
        if g.ndim > want.ndim and gs[g.ndim - want.ndim:] == ws:
            if broadcast is None:
                return "extra_axes", (f"{name} has shape {gs}, expected {ws}: the broadcast axes "
                                      "were not summed")
            return "partial_sum", (f"{name} has shape {gs}, expected {ws}: summed over some of "
                                   f"the broadcast axes of {tuple(broadcast)} only")
        if g.ndim == 2 and gs == ws[::-1] and close_to(g.T, want):
            return "transposed", f"{name} is the transpose of the answer (shape {gs}, expected {ws})"
        return "shape", f"{name} has shape {gs}, expected {ws}"
    if has_nan(g):
        return "nan", f"{name} has NaN at {int(np.isnan(g).sum())} of {g.size} entries"
    if close_to(g, want):
        return None
    if np.abs(g).max() == 0:
        return "zero", f"{name} is 0 everywhere"
    if close_to(g, -want):
        return "sign", f"{name} has the wrong sign"
    ww = float((want * want).sum())
    if ww > 0:
        c = float((g * want).sum() / ww)
        if c != 0 and close_to(g, c * want, 1e-6, 1e-9):
            words = next((w for value, w in factors if abs(c - value) <= 1e-6 * abs(value)), None)
            return "scale", (f"{name} is {c:.4g} times the answer" + (f" ({words})" if words else ""))
    if g.ndim >= 2 and g.shape[-1] == g.shape[-2] and close_to(np.swapaxes(g, -1, -2), want):
        return "transposed", f"{name} is the transpose of the answer"
    for axis in (-1, -2) if g.ndim >= 2 else (-1,):
        perm = _permutation(g, want, axis)
        if perm is not None:
            what = "columns" if axis == -1 else "rows"
            return "permuted", (f"{name} holds the answer's {what} in another order "
                                f"({list(perm)} instead of 0, 1, 2, ...)")
    err = float(np.max(np.abs(g - want)))
    return "values", f"{name} differs from the answer by up to {err:.3g}"


def _permutation(g, want, axis):
    """The order in which ``g`` holds the slices of ``want`` along ``axis`` (None if it does not)."""
    a, b = np.moveaxis(g, axis, 0), np.moveaxis(want, axis, 0)
    perm = []
    for i in range(a.shape[0]):
        j = next((j for j in range(b.shape[0]) if j not in perm and close_to(a[i], b[j])), None)
        if j is None:
            return None
        perm.append(j)
    return perm if perm != list(range(len(perm))) else None


def measured(descriptions, names):
    """One sentence: which outputs are right and how each wrong one differs."""
    wrong = [d[1] for d in descriptions if d is not None]
    right = [n for n, d in zip(names, descriptions, strict=True) if d is None]
    return "; ".join(wrong) + (f"; {', '.join(right)} {'is' if len(right) == 1 else 'are'} right"
                               if right else "")
