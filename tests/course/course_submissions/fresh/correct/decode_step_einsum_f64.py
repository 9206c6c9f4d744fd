# exercise: decode_step
# style: einsum with (d_model, h, d) weight views in float64; the cache grown by np.append; results cast back.
import numpy as np


def decode_step(x, k_cache, v_cache, params, num_heads):
    dt = x.dtype
    h = num_heads
    dm = x.shape[-1]
    X = x[:, 0].astype(np.float64)  # (B, d_model)
    proj = {}
    for n in ("q", "k", "v"):
        W = params["W_" + n].astype(np.float64).reshape(dm, h, -1)
        proj[n] = np.einsum("bd,dhk->bhk", X, W) + params["b_" + n].astype(np.float64).reshape(h, -1)
    K = np.append(k_cache.astype(np.float64), proj["k"][:, :, None, :], axis=2)
    V = np.append(v_cache.astype(np.float64), proj["v"][:, :, None, :], axis=2)
    s = np.einsum("bhk,bhtk->bht", proj["q"], K) / np.sqrt(K.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    heads = np.einsum("bht,bhtv->bhv", w, V)
    Wo = params["W_o"].astype(np.float64).reshape(h, -1, dm)
    out = np.einsum("bhv,hvd->bd", heads, Wo) + params["b_o"]
    return out[:, None, :].astype(dt), K.astype(dt), V.astype(dt)
