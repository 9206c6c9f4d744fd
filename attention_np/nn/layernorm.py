r"""Layer normalization (Ba, Kiros & Hinton, 2016), around every sub-layer (§3.1):

.. math:: \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta

with :math:`\mu, \sigma^2` the mean and (biased) variance over the last axis, one per position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_array, check_cache, check_dout, check_number, check_same_dtype


@dataclass(frozen=True)
class LayerNormCache:
    xhat: np.ndarray      # (..., d) the normalized input
    rstd: np.ndarray      # (..., 1) 1 / sqrt(var + eps)
    gamma: np.ndarray     # (d,)


def layernorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float = 1e-5):
    """Normalize each position's feature vector, then scale and shift.

    Parameters
    ----------
    x : (..., d) float array
    gamma, beta : (d,) float array
        The learned scale and shift, of ``x``'s dtype.
    eps : float >= 0
        Added to the variance (PyTorch's default 1e-5; BERT uses 1e-12); 0 is allowed.

    Returns
    -------
    y : (..., d)
    cache : LayerNormCache
    """
    x = check_array(x, "x", min_ndim=1, layout="(..., d)")
    d = x.shape[-1]
    for name, a in (("gamma", gamma), ("beta", beta)):
        a = check_array(a, name, ndim=1, layout="(d,)")
        if a.shape != (d,):
            raise ValueError(f"{name} has shape {a.shape} but x of shape {x.shape} needs (d,) = ({d},)")
    gamma, beta = np.asarray(gamma), np.asarray(beta)
    check_same_dtype(x=x, gamma=gamma, beta=beta)
    check_number(eps, "eps", low=0)
    mu = x.mean(axis=-1, keepdims=True)                  # (..., 1)
    xc = x - mu                                          # (..., d)
    var = (xc * xc).mean(axis=-1, keepdims=True)         # (..., 1), biased: divide by d
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))        # (..., 1)
    xhat = xc * rstd                                     # (..., d)
    y = xhat * gamma + beta                              # (..., d)
    return y, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dy: np.ndarray, cache: LayerNormCache):
    """Gradients of :func:`layernorm_forward`: ``(dx, dgamma, dbeta)``.

    forward: y = xhat * gamma + beta  ->  dgamma = sum(dy * xhat), dbeta = sum(dy), dxhat = dy * gamma
    forward: xhat = (x - mu) * rstd   ->  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    (the last line folds the paths through mu and var into two means; no Jacobian is built).

    Parameters
    ----------
    dy : (..., d) float array, the gradient of the output
    cache : LayerNormCache from :func:`layernorm_forward`
    """
    check_cache(cache, LayerNormCache, "layernorm_forward")
    c = cache
    dy = check_dout(dy, c.xhat.shape, c.xhat.dtype, "dy", "the output of layernorm_forward")
    d = dy.shape[-1]
    dgamma = (dy * c.xhat).reshape(-1, d).sum(axis=0)   # (d,)
    dbeta = dy.reshape(-1, d).sum(axis=0)               # (d,)
    dxhat = dy * c.gamma                                # (..., d)
    dx = c.rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                   - c.xhat * (dxhat * c.xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta
