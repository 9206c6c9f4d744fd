# exercise: mha_backward
# style: float64 inside, a loop over heads on column slices, np.einsum for the weight gradients
import numpy as np


def mha_backward(dout, query, key, value, params, num_heads):
    dt = query.dtype
    P = {n: np.asarray(a, np.float64) for n, a in params.items()}
    X = {"q": query.astype(np.float64), "k": key.astype(np.float64), "v": value.astype(np.float64)}
    g_out = dout.astype(np.float64)
    Q = X["q"] @ P["W_q"] + P["b_q"]
    K = X["k"] @ P["W_k"] + P["b_k"]
    V = X["v"] @ P["W_v"] + P["b_v"]
    dk = Q.shape[-1] // num_heads
    dv = V.shape[-1] // num_heads
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    heads = []
    d_concat = g_out @ P["W_o"].T
    for i in range(num_heads):
        cq, cv = slice(i * dk, (i + 1) * dk), slice(i * dv, (i + 1) * dv)
        s = np.einsum("bld,bsd->bls", Q[..., cq], K[..., cq]) / np.sqrt(dk)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        heads.append(w @ V[..., cv])
        d_head = d_concat[..., cv]
        dV[..., cv] = np.einsum("bls,bld->bsd", w, d_head)
        dw = np.einsum("bld,bsd->bls", d_head, V[..., cv])
        ds = w * (dw - np.sum(dw * w, -1, keepdims=True))
        dQ[..., cq] = ds @ K[..., cq] / np.sqrt(dk)
        dK[..., cq] = np.einsum("bls,bld->bsd", ds, Q[..., cq]) / np.sqrt(dk)
    concat = np.concatenate(heads, axis=-1)
    grads = {"W_o": np.einsum("blc,bld->cd", concat, g_out), "b_o": g_out.sum((0, 1))}
    for n, dZ in (("q", dQ), ("k", dK), ("v", dV)):
        grads["W_" + n] = np.einsum("bld,blc->dc", X[n], dZ)
        grads["b_" + n] = dZ.sum((0, 1))
    grads = {n: g.astype(params[n].dtype) for n, g in grads.items()}
    return ((dQ @ P["W_q"].T).astype(dt), (dK @ P["W_k"].T).astype(dt), (dV @ P["W_v"].T).astype(dt), grads)
