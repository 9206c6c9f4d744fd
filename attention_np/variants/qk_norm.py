r"""QK-norm (beyond the paper): RMSNorm on the queries and keys before the scores.

Qwen3 and Gemma 3 normalise ``q`` and ``k`` per head (after the projection, before RoPE) so
that the logits ``q·k`` cannot grow without bound during training:

.. math:: \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \varepsilon}} \odot w,
          \qquad w \in \mathbb{R}^{d_k}\ \text{learned (shared by the heads, or one per head)}.

OLMo 2 normalises over **all heads at once**: the mean is taken over the ``h·d_k`` features of
a position's projected query (``h_kv·d_k`` of its key), before the split into heads, with
``w (h·d_k,)`` (``AttentionSpec(qk_norm_scope="all")``; :func:`rms_norm_all_heads_forward`).
One head's scale then depends on the other heads' features, which a per-head norm cannot express.

:func:`attention_np.mha_forward` applies it when ``params`` holds ``params["q_norm"]`` and
``params["k_norm"]``, each ``(d_k,)`` or one per head; ``mha_backward`` returns their gradients in
``grads``. ``AttentionSpec(qk_norm="layer")`` takes a LayerNorm instead
(:mod:`attention_np.variants.qk_layernorm`).
(transformers' ``Qwen3RMSNorm`` normalises in float32 even in a float64 model; this module stays in
the input's dtype.)
"""

from __future__ import annotations

import numpy as np

from attention_np.paper.heads import merge_heads, split_heads

NORMS = ("q_norm", "k_norm")
QK_NORMS = ("rms", "layer")   # the kinds of norm AttentionSpec.qk_norm names
# what AttentionSpec.qk_norm_scope names: the features one norm's mean runs over
QK_NORM_SCOPES = ("head", "all")   # each head's d_k (Qwen3, Gemma 3) | all heads' h*d_k (OLMo 2)


def rms_norm_forward(x, w, eps: float = 1e-6):
    """``y = x / sqrt(mean(x^2, axis=-1) + eps) * w``; returns ``(y, cache)``.

    ``x (..., d)``, ``w (d,)``; ``cache = (xhat, r, w)`` with ``xhat = x * r``, ``r (..., 1)``.
    """
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + x.dtype.type(eps))   # (..., 1)
    xhat = x * r                                                                     # (..., d)
    return xhat * w, (xhat, r, w)


def rms_norm_backward(dy, cache):
    """Backward of :func:`rms_norm_forward`: ``(dx, dw)``.

    forward: ``y = xhat * w``  ->  ``dw = sum(dy * xhat)``, ``dxhat = dy * w``;
    forward: ``xhat = x * r``, ``r = mean(x^2)^(-1/2)``  ->
    ``dx = r * (dxhat - xhat * mean(dxhat * xhat))``.
    """
    xhat, r, w = cache
    dw = (dy * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)                        # (d,)
    dxhat = dy * w                                                                   # (..., d)
    dx = r * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))
    return dx, dw




def rms_norm_all_heads_forward(x, w, eps: float = 1e-6):
    """RMSNorm over all heads' features of a position at once (OLMo 2); returns ``(y, cache)``.

    ``x (..., h, L, d)`` heads, ``w (h*d,)``. The same as normalising the projection
    ``(..., L, h*d)`` before the split into heads:
    ``y = split_heads(rms_norm(merge_heads(x), w), h)``, ``(..., h, L, d)``.
    """
    h = x.shape[-3]
    y, cache = rms_norm_forward(merge_heads(x), w, eps)                             # (..., L, h*d)
    return split_heads(y, h), (cache, h)


def rms_norm_all_heads_backward(dy, cache):
    """Backward of :func:`rms_norm_all_heads_forward`: ``(dx (..., h, L, d), dw (h*d,))``.

    forward: ``y = split(rms_norm(merge(x)))``  ->  ``dx = split(rms_norm_backward(merge(dy)))``
    (``merge`` and ``split`` are each other's backward: a permutation of the features).
    """
    inner, h = cache
    dx, dw = rms_norm_backward(merge_heads(dy), inner)                              # (..., L, h*d)
    return split_heads(dx, h), dw
