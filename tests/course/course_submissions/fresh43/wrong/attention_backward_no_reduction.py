# exercise: attention_backward
# slip: returns dk and dv at the broadcast batch shape: a k shared across the batch gets a gradient per
# query batch
import numpy as np


def _reduce_to(g, shape):
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def attention_backward(dout, q, k, v, mask=None):
    scale = q.dtype.type(1 / np.sqrt(q.shape[-1]))
    s = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    alive = allowed.any(axis=-1, keepdims=True)
    s = np.where(alive, np.where(allowed, s, -np.inf), 0)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True) * alive
    dp = dout @ np.swapaxes(v, -1, -2)
    dv = np.swapaxes(p, -1, -2) @ dout
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    return dq, dk, dv
