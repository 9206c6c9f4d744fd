# exercise: attention_backward
# slip: recomputes the softmax without guarding a fully masked row, so its gradients are NaN instead of 0.
import numpy as np


def _reduce(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] > 1:
            g = g.sum(axis=ax, keepdims=True)
    return g


def attention_backward(dout, q, k, v, mask=None):
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    p = e / z
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True)) * scale
    dq = ds @ k
    dk = np.swapaxes(ds, -1, -2) @ q
    return _reduce(dq, q.shape), _reduce(dk, k.shape), _reduce(dv, v.shape)
