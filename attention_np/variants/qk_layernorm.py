r"""QK-norm with a LayerNorm (beyond the paper): mean-centred, then scaled, on each query and key head.

Where :mod:`attention_np.variants.qk_norm` divides by the root mean square, a LayerNorm first
subtracts the mean (Cohere, Phi with ``qk_layernorm``, StableLM, OLMo-style models, Flax's
``normalize_qk=True``):

.. math:: \mathrm{LayerNorm}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \odot w + b,
          \qquad \mu = \mathrm{mean}(x),\ \sigma^2 = \mathrm{mean}((x - \mu)^2),

over the last axis (``d_k``). ``w`` and the optional ``b`` are ``(d_k,)`` (shared by the heads:
Phi, Flax) or ``(h, 1, d_k)`` against heads ``(..., h, L, d_k)`` (one per head: Cohere,
StableLM). Flax's ``normalize_qk`` is a LayerNorm without bias, ``eps = 1e-6``.

The same forward/backward pair signature as :func:`~attention_np.variants.qk_norm.rms_norm_forward`;
:func:`qk_norm_forward` picks one by kind (``"rms"`` or ``"layer"``: ``AttentionSpec.qk_norm``)
for :func:`attention_np.mha_forward` and the decode step.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import sum_to_shape
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.variants.qk_norm import (
    rms_norm_all_heads_backward,
    rms_norm_all_heads_forward,
    rms_norm_backward,
    rms_norm_forward,
)


def layer_norm_forward(x, w, b=None, eps: float = 1e-5):
    """``y = (x - mean) / sqrt(var + eps) * w + b`` over the last axis; returns ``(y, cache)``.

    ``x (..., d)``; ``w``, ``b`` broadcast against ``x`` (``(d,)`` or ``(h, 1, d)``);
    ``cache = (xhat, r, w, b_shape)`` with ``xhat = (x - mean) * r``, ``r (..., 1)``.
    """
    mu = np.mean(x, axis=-1, keepdims=True)                                     # (..., 1)
    xc = x - mu                                                                  # (..., d)
    r = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + x.dtype.type(eps))
    xhat = xc * r                                                                # (..., d)
    y = xhat * w if b is None else xhat * w + b
    return y, (xhat, r, w, None if b is None else np.shape(b))


def layer_norm_backward(dy, cache):
    """Backward of :func:`layer_norm_forward`: ``(dx, dw, db)`` (``db`` None without a bias).

    forward: ``y = xhat * w + b``  ->  ``dw = sum(dy * xhat)``, ``db = sum(dy)``,
    ``dxhat = dy * w``; forward: ``xhat = (x - mean(x)) * r``, ``r = var^(-1/2)``  ->
    ``dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``.
    """
    xhat, r, w, b_shape = cache
    dw = sum_to_shape(dy * xhat, np.shape(w))
    db = None if b_shape is None else sum_to_shape(dy, b_shape)
    dxhat = dy * w                                                               # (..., d)
    dx = r * (dxhat - np.mean(dxhat, axis=-1, keepdims=True)
              - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))
    return dx, dw, db


def qk_norm_forward(kind: str, x, params: dict, name: str, eps: float, scope: str = "head"):
    """The QK-norm ``kind`` of heads ``x (..., h, L, d_k)`` with ``params[name]`` (and, for a
    LayerNorm, ``params[name + "_bias"]`` when present); returns ``(y, cache)``.

    ``scope`` (``AttentionSpec.qk_norm_scope``): ``"head"`` normalises each head's ``d_k``
    features, ``"all"`` a position's ``h·d_k`` features at once (OLMo 2), weights ``(h·d_k,)``."""
    if scope == "all":
        b = params.get(f"{name}_bias")
        if kind == "rms":
            y, cache = rms_norm_all_heads_forward(x, params[name], eps)
        else:                        # the projection (..., L, h*d_k), normalised, split again
            merged, cache = layer_norm_forward(merge_heads(x), params[name], b, eps)
            y, cache = split_heads(merged, x.shape[-3]), (cache, x.shape[-3])
        return y, (f"{kind}-all", cache, np.shape(params[name]))
    w = _per_head(params[name], x)
    if kind == "rms":
        y, cache = rms_norm_forward(x, w, eps)
        return y, ("rms", cache, np.shape(params[name]))
    b = params.get(f"{name}_bias")
    y, cache = layer_norm_forward(x, w, None if b is None else _per_head(b, x), eps)
    return y, ("layer", cache, np.shape(params[name]))


def qk_norm_backward(dy, cache) -> tuple:
    """Backward of :func:`qk_norm_forward`: ``(dx, {name: grad})`` with the weight's gradient as
    ``"w"`` and a LayerNorm bias's as ``"b"``, in the shapes of the parameters."""
    kind, inner, shape = cache
    if kind == "rms-all":
        dx, dw = rms_norm_all_heads_backward(dy, inner)
        return dx, {"w": dw}
    if kind == "layer-all":
        (ln, h) = inner
        dx, dw, db = layer_norm_backward(merge_heads(dy), ln)
        return split_heads(dx, h), ({"w": dw} if db is None else {"w": dw, "b": db})
    if kind == "rms":
        xhat, r, w = inner
        dx, _ = rms_norm_backward(dy, inner)
        return dx, {"w": sum_to_shape(dy * xhat, w.shape).reshape(shape)}
    dx, dw, db = layer_norm_backward(dy, inner)
    out = {"w": dw.reshape(shape)}
    if db is not None:
        out["b"] = db.reshape(shape)
    return dx, out


def _per_head(a, x):
    """A ``(d,)`` weight as is; an ``(h, d)`` one (one per head) as ``(h, 1, d)`` against
    heads ``(..., h, L, d)``."""
    a = np.asarray(a)
    return a[:, None, :] if a.ndim == 2 else a


