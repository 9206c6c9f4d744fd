# exercise: mha_forward
# style: small helper functions (split, merge, masked softmax) in float64, cast back once at the end.
import numpy as np


def _split(x, h):
    B, n, w = x.shape
    return x.reshape(B, n, h, w // h).transpose(0, 2, 1, 3)


def _masked_softmax(s, mask):
    if mask is not None:
        s = np.where(np.broadcast_to(mask, s.shape), s, -np.inf)
    m = np.nan_to_num(s.max(axis=-1, keepdims=True), neginf=0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.divide(e, z, out=np.zeros_like(e), where=z > 0)


def mha_forward(query, key, value, params, num_heads, mask=None):
    P = {n: a.astype(np.float64) for n, a in params.items()}
    q = _split(query.astype(np.float64) @ P["W_q"] + P["b_q"], num_heads)
    k = _split(key.astype(np.float64) @ P["W_k"] + P["b_k"], num_heads)
    v = _split(value.astype(np.float64) @ P["W_v"] + P["b_v"], num_heads)
    w = _masked_softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), mask)
    heads = w @ v
    B, h, L, dv = heads.shape
    concat = heads.transpose(0, 2, 1, 3).reshape(B, L, h * dv)
    return (concat @ P["W_o"] + P["b_o"]).astype(query.dtype)
