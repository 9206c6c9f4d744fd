# exercise: attention_backward
# the student's style: einsum throughout; broadcast gradients summed with np.add.reduce over the added axes
import numpy as np


def attention_backward(dout, q, k, v, mask=None):
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    s = np.einsum("...ld,...sd->...ls", q, k) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), 0, m))
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z == 0, 1, z)
    dv = np.einsum("...ls,...ld->...sd", p, dout)
    dp = np.einsum("...ld,...sd->...ls", dout, v)
    ds = p * (dp - np.einsum("...ls,...ls->...l", dp, p)[..., None])
    dq = np.einsum("...ls,...sd->...ld", ds, k) * scale
    dk = np.einsum("...ls,...ld->...sd", ds, q) * scale

    def back(g, shape):
        g = np.add.reduce(g, axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
        return np.add.reduce(g, axis=axes, keepdims=True) if axes else g
    return dq, back(dk, k.shape), back(dv, v.shape)
