"""Shared tools of the behaviour probes: call a submission on fresh copies, read its output as an
array, compare, and measure the scale a submission applies to q k^T.

NumPy only and no import of ``attention_np`` (copied into the course kits, see probes.py).
"""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised, call

RNG_SEED = 20260


def _run(fn, *args, **kwargs):
    """The output of one call on fresh copies (a :class:`Raised` if it raised)."""
    return call(fn, args, kwargs).out


def _arr(x):
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


def _close(a, b, rtol=1e-6, atol=1e-9):
    if a is None or b is None or np.shape(a) != np.shape(b):
        return False
    a, b = np.asarray(a, float), np.asarray(b, float)
    return bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))


def _nan(a):
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


def scale_finding(c, d_k, d_v):
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
             "scores by sqrt(d_k).")):
        if abs(c - value) <= 1e-4 * value:
            return Finding(name, f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                           f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", hint)
    return Finding("wrong scale", f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses "
                   f"1/sqrt(d_k) = {want:.4g} (d_k = {d_k})", "Eq. (1): softmax(Q K^T / sqrt(d_k)) V, "
                   "with d_k the width of q and k.")


