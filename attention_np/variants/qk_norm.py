r"""QK-norm (beyond the paper): RMSNorm on each query and key head before the scores.

Qwen3, Gemma 3 and OLMo 2 normalise ``q`` and ``k`` per head (after the projection, before RoPE) so
that the logits ``q·k`` cannot grow without bound during training:

.. math:: \mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \varepsilon}} \odot w,
          \qquad w \in \mathbb{R}^{d_k}\ \text{learned (shared by the heads, or one per head)}.

:func:`attention_np.mha_forward` applies it when ``params`` holds ``params["q_norm"]`` and
``params["k_norm"]``, each ``(d_k,)`` or one per head; ``mha_backward`` returns their gradients in
``grads``. ``AttentionSpec(qk_norm="layer")`` takes a LayerNorm instead
(:mod:`attention_np.variants.qk_layernorm`).
(transformers' ``Qwen3RMSNorm`` normalises in float32 even in a float64 model; this module stays in
the input's dtype.)
"""

from __future__ import annotations

import numpy as np

NORMS = ("q_norm", "k_norm")
QK_NORMS = ("rms", "layer")   # the kinds of norm AttentionSpec.qk_norm names


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


