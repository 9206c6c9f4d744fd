# exercise: mha_backward
# slip: dW_o = dout^T @ concat, the transpose: the shape fits only when h*d_v == d_model
import numpy as np


def mha_backward(dout, query, key, value, params, num_heads):
    h = num_heads
    B, L, D = query.shape
    W_q, W_k, W_v, W_o = params["W_q"], params["W_k"], params["W_v"], params["W_o"]
    dk, dv = W_q.shape[1] // h, W_v.shape[1] // h
    c = query.dtype.type(1 / np.sqrt(dk))

    def split(x, d):
        return x.reshape(x.shape[0], x.shape[1], h, d).transpose(0, 2, 1, 3)

    def merge(x):
        return x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)

    q = split(query @ W_q + params["b_q"], dk)
    k = split(key @ W_k + params["b_k"], dk)
    v = split(value @ W_v + params["b_v"], dv)
    s = q @ k.transpose(0, 1, 3, 2) * c
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    concat = merge(p @ v)

    grads = {"W_o": dout.reshape(-1, D).T @ concat.reshape(-1, h * dv), "b_o": dout.sum(axis=(0, 1))}
    do = split(dout @ W_o.T, dv)
    dp = do @ v.transpose(0, 1, 3, 2)
    dvh = p.transpose(0, 1, 3, 2) @ do
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dQ, dK, dV = merge(ds @ k * c), merge(ds.transpose(0, 1, 3, 2) @ q * c), merge(dvh)
    out = []
    for x, dX, W, name in ((query, dQ, W_q, "q"), (key, dK, W_k, "k"), (value, dV, W_v, "v")):
        grads["W_" + name] = x.reshape(-1, D).T @ dX.reshape(-1, dX.shape[-1])
        grads["b_" + name] = dX.sum(axis=(0, 1))
        out.append(dX @ W.T)
    return out[0], out[1], out[2], grads
