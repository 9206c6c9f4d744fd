"""The behaviour probes' shared measures, and the loop that runs a probe.

A probe is data plus a loop: ordered *steps* (:func:`decide`), most of them a *rule table* of
``(test, finding)`` pairs over one measured context (:func:`first`, :func:`judge`). The measures the
probes compose:

- call a submission on fresh copies (:func:`output_of`, :func:`outputs_of`), read its output as an
  array (:func:`as_array`), compare (:func:`close_to`), right shape or what it gave instead
  (:func:`shaped`, :func:`shown`);
- *which known wrong answer is this*: :func:`matching` (values), :func:`named_scale` (a scale);
- *which output is wrong, and how*: :class:`Outputs` over :func:`describe` (missing, NaN, axes not
  summed or kept, transposed, permuted, zero, sign, a constant factor, other values);
- *the scale applied to q k^T*: :func:`measure_scale`, :func:`scale_finding`;
- *how the output moves when one parameter does*: :func:`moved`.

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
    name, hint = named_scale(c, (
        (1.0, "no 1/sqrt(d_k)", "§3.2.1: for large d_k the dot products grow large and push the softmax "
         "into regions with tiny gradients. What keeps their variance at 1?"),
        (1 / d_k, "divided by d_k instead of sqrt(d_k)", "q . k sums d_k products of unit variance: its "
         "variance is d_k. Dividing by what brings the variance back to 1?"),
        (1 / np.sqrt(d_v), "scaled by sqrt(d_v) instead of sqrt(d_k)", "The scores are dot products of "
         "queries and keys: whose width sets their size?"),
        (np.sqrt(d_k), "multiplied by sqrt(d_k) instead of dividing", "Eq. (1) divides the scores by "
         "sqrt(d_k)."),
        *(((1 / np.sqrt(S), "scaled by sqrt(S), the number of keys, instead of sqrt(d_k)", "d_k is the "
            "width of q and k (their last axis), not a number of positions."),) if S else ())),
        ("wrong scale", "Eq. (1): softmax(Q K^T / sqrt(d_k)) V, with d_k the width of q and k."))
    return Finding(name, f"the scale your function applies to q k^T is {c:.4g}; Eq. (1) uses 1/sqrt(d_k) = "
                   f"{want:.4g} (d_k = {d_k})", hint)


def named_scale(c, candidates, otherwise):
    """``(name, hint)`` of the first ``(value, name, hint)`` of ``candidates`` that the measured
    scale ``c`` equals (within 1e-4 of the value), else ``otherwise`` (the measure "which known
    wrong scale is this")."""
    return next(((name, hint) for value, name, hint in candidates if abs(c - value) <= 1e-4 * value),
                otherwise)


# ======================================================================== the shared measures
# A probe is data plus a loop: ordered *steps*, each a measure of one crafted input that gives a
# Finding (the probe ends with it), STOP (what it measured rules out every later step: the probe
# ends with no finding) or None (go on). A step is often a *rule table*: ``(test, finding)`` pairs
# over one measured context, the first whose test holds giving its finding (a Finding, or a
# function of the context that writes one).
STOP = Finding("", "", "")              # a step's verdict: no finding, and no later step either


def first(rules, *context):
    """The finding of the first rule of ``rules`` whose test holds on ``context`` (None if none)."""
    for test, finding in rules:
        if test(*context):
            return finding(*context) if callable(finding) else finding
    return None


def decide(steps, *context):
    """The probe's finding: the first verdict of ``steps`` (each ``step(*context) -> Finding,
    STOP or None``), None when every step goes on or one gives STOP."""
    for step in steps:
        found = step(*context)
        if found is not None:
            return None if found is STOP else found
    return None


def judge(rules, *context):
    """The probe's finding from one rule table (STOP and no rule that holds: None)."""
    found = first(rules, *context)
    return None if found is STOP else found


def outputs_of(fn, n, *args, **kwargs):
    """The ``n`` outputs of one call as a list (None unless it returned a tuple or list of ``n``)."""
    out = output_of(fn, *args, **kwargs)
    return list(out) if isinstance(out, (tuple, list)) and len(out) == n else None


def shaped(out, shape):
    """``out`` is an output of ``shape`` (not raised)."""
    return not isinstance(out, Raised) and np.shape(out) == shape


def shown(out):
    """What a call that did not give the wanted shape gave: its error, or its shape."""
    return out.text if isinstance(out, Raised) else f"shape {np.shape(out)}"


def moved(args, i, name, delta):
    """``args`` with the parameter ``name`` of the params dict ``args[i]`` moved by ``delta`` (for
    the measure "how does the output move when one parameter does")."""
    return (*args[:i], dict(args[i], **{name: args[i][name] + delta}), *args[i + 1:])


def matching(got, candidates, rtol=1e-6, atol=1e-9):
    """The finding of the first ``(value, finding)`` of ``candidates`` whose value ``got`` equals
    (the measure "which known wrong answer is this"); None when it is none of them."""
    return next((f for value, f in candidates if close_to(got, value, rtol, atol)), None)


class Outputs:
    """Which outputs of one call are wrong, and how (the measure "which output is wrong"):
    :func:`describe` of each output against its stored answer. ``broadcast`` lists, per output,
    the shape it has before it is summed back to its input's (or None)."""

    def __init__(self, names, got, want, factors=(), broadcast=None):
        self.names, self.got = list(names), list(got)
        self.described = [describe(n, g, w, factors, b) for n, g, w, b in zip(
            self.names, self.got, want, broadcast or [None] * len(self.names), strict=True)]
        self.wrong = {n: d for n, d in zip(self.names, self.described, strict=True) if d is not None}
        self.kinds = {d[0] for d in self.wrong.values()}

    def kind(self, name):
        """The kind of difference of output ``name`` (None when it is right)."""
        return self.wrong.get(name, (None,))[0]

    def output(self, name):
        return self.got[self.names.index(name)]

    def only(self, prefix):
        """True when every wrong output's name begins with ``prefix``."""
        return all(n.startswith(prefix) for n in self.wrong)

    def all_say(self, words):
        """True when every wrong output's sentence contains ``words``."""
        return all(words in d[1] for d in self.wrong.values())

    def sentence(self):
        return measured(self.described, self.names)


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
        kinds = _SHAPE_KINDS
    elif close_to(g, want):
        return None
    else:
        kinds = _VALUE_KINDS
    return next((kind, s) for kind, measure in kinds if (s := measure(name, g, want, factors, broadcast)))


def _squeezed(shape):
    return tuple(n for n in shape if n != 1)


def _trailing(g, want):
    """True when ``g`` has extra leading axes in front of ``want``'s shape."""
    return g.ndim > want.ndim and g.shape[g.ndim - want.ndim:] == want.shape


def _kept_axes(name, g, want, factors, broadcast):
    if _squeezed(g.shape) == _squeezed(want.shape) and close_to(g.reshape(want.shape), want):
        return (f"{name} has shape {g.shape}, expected {want.shape}: the values are right, the summed "
                "axes were kept (keepdims) or dropped")
    return None


def _extra_axes(name, g, want, factors, broadcast):
    as_broadcast = g.shape == tuple(broadcast) if broadcast is not None else _trailing(g, want)
    return as_broadcast and (f"{name} has shape {g.shape}, expected {want.shape}: the broadcast axes "
                             "were not summed")


def _partial_sum(name, g, want, factors, broadcast):
    return _trailing(g, want) and (f"{name} has shape {g.shape}, expected {want.shape}: summed over "
                                   f"some of the broadcast axes of {tuple(broadcast)} only")


def _transposed_shape(name, g, want, factors, broadcast):
    return (g.ndim == 2 and g.shape == want.shape[::-1] and close_to(g.T, want)) and (
        f"{name} is the transpose of the answer (shape {g.shape}, expected {want.shape})")


def _other_shape(name, g, want, factors, broadcast):
    return f"{name} has shape {g.shape}, expected {want.shape}"


def _nan(name, g, want, factors, broadcast):
    return has_nan(g) and f"{name} has NaN at {int(np.isnan(g).sum())} of {g.size} entries"


def _zero(name, g, want, factors, broadcast):
    return np.abs(g).max() == 0 and f"{name} is 0 everywhere"


def _sign(name, g, want, factors, broadcast):
    return close_to(g, -want) and f"{name} has the wrong sign"


def _scale(name, g, want, factors, broadcast):
    ww = float((want * want).sum())
    c = float((g * want).sum() / ww) if ww > 0 else 0.0
    if c == 0 or not close_to(g, c * want, 1e-6, 1e-9):
        return None
    words = next((w for value, w in factors if abs(c - value) <= 1e-6 * abs(value)), None)
    return f"{name} is {c:.4g} times the answer" + (f" ({words})" if words else "")


def _transposed(name, g, want, factors, broadcast):
    return (g.ndim >= 2 and g.shape[-1] == g.shape[-2] and close_to(np.swapaxes(g, -1, -2), want)) and (
        f"{name} is the transpose of the answer")


def _permuted(name, g, want, factors, broadcast):
    for axis, what in ((-1, "columns"), (-2, "rows"))[:2 if g.ndim >= 2 else 1]:
        perm = _permutation(g, want, axis)
        if perm is not None:
            return f"{name} holds the answer's {what} in another order ({list(perm)} instead of 0, 1, 2, ...)"
    return None


def _values(name, g, want, factors, broadcast):
    return f"{name} differs from the answer by up to {float(np.max(np.abs(g - want))):.3g}"


#: how an output of another shape than the answer's differs, tried in order
_SHAPE_KINDS = (("kept_axes", _kept_axes), ("extra_axes", _extra_axes), ("partial_sum", _partial_sum),
                ("transposed", _transposed_shape), ("shape", _other_shape))
#: how an output of the answer's shape differs, tried in order
_VALUE_KINDS = (("nan", _nan), ("zero", _zero), ("sign", _sign), ("scale", _scale),
                ("transposed", _transposed), ("permuted", _permuted), ("values", _values))


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
