"""PyTorch reference computations for the diff tests: outputs and autograd gradients as NumPy."""

from __future__ import annotations

import numpy as np

from tests.helpers import require


def sdpa(q, k, v, dout, mask=None, bias=None, is_causal=False, scale=None, enable_gqa=False,
         return_dbias=False):
    """torch.nn.functional.scaled_dot_product_attention forward and autograd backward.

    Returns (out, dq, dk, dv), and dbias after them if ``return_dbias``. Run it on float64 inputs
    for an oracle independent of attention_np, on float32 ones for torch's float32 result.
    """
    torch = require("torch")
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    attn_mask = tb = None
    if mask is not None:
        attn_mask = torch.tensor(mask)                       # same polarity: True = attend
    if bias is not None:                                     # a float attn_mask is added;
        tb = torch.tensor(np.asarray(bias), requires_grad=True)   # -inf removes a key
        attn_mask = tb if mask is None else tb.masked_fill(~torch.tensor(mask), float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    out.backward(torch.tensor(dout))
    result = (out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy())
    return (*result, tb.grad.numpy()) if return_dbias else result


def formula(q, k, v, dout, mask=None, bias=None, softcap=None, sinks=None, groups=1):
    """Eq. (1) with the extensions torch's sdpa lacks, written out in torch ops (autograd backward):
    ``s = cap * tanh(q k^T / sqrt(d_k) / cap) + bias``, masked keys ``-inf``, one sink logit per
    head appended to each row's softmax and dropped after it, each key/value head used by
    ``groups`` query heads.

    Returns [out, dq, dk, dv] then dbias if ``bias`` is given, then dsinks if ``sinks`` is.
    """
    torch = require("torch")
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tb = None if bias is None else torch.tensor(np.asarray(bias), requires_grad=True)
    ts = None if sinks is None else torch.tensor(sinks, requires_grad=True)
    kk, vv = tk.repeat_interleave(groups, -3), tv.repeat_interleave(groups, -3)
    s = tq @ kk.transpose(-1, -2) / np.sqrt(q.shape[-1]).astype(q.dtype)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if tb is not None:
        s = s + tb
    if mask is not None:
        s = s.masked_fill(~torch.tensor(mask), float("-inf"))
    if ts is not None:
        s = torch.cat([s, ts.reshape(-1, 1, 1).expand(*s.shape[:-1], 1)], -1)
        out = torch.softmax(s, -1)[..., :-1] @ vv
    else:
        out = torch.softmax(s, -1) @ vv
    out.backward(torch.tensor(dout))
    return [out.detach().numpy(), *(t.grad.numpy() for t in (tq, tk, tv, tb, ts) if t is not None)]


def mha_module(params, num_heads):
    """An nn.MultiheadAttention holding ``params`` (the API.md mapping, W -> W.T)."""
    torch = require("torch")
    W_q, W_k, W_v, W_o = (params[n] for n in ("W_q", "W_k", "W_v", "W_o"))
    E = W_q.shape[0]
    has_bias = "b_q" in params
    module = torch.nn.MultiheadAttention(E, num_heads, batch_first=True, bias=has_bias,
                                         kdim=W_k.shape[0], vdim=W_v.shape[0],
                                         dtype=torch.from_numpy(W_q).dtype)
    t = lambda a: torch.tensor(a)  # noqa: E731
    with torch.no_grad():
        if module._qkv_same_embed_dim:
            module.in_proj_weight.copy_(t(np.concatenate([W_q.T, W_k.T, W_v.T])))
        else:
            module.q_proj_weight.copy_(t(W_q.T))
            module.k_proj_weight.copy_(t(W_k.T))
            module.v_proj_weight.copy_(t(W_v.T))
        module.out_proj.weight.copy_(t(W_o.T))
        if has_bias:
            module.in_proj_bias.copy_(t(np.concatenate([params["b_q"], params["b_k"], params["b_v"]])))
            module.out_proj.bias.copy_(t(params["b_o"]))
    return module


def module_grads_as_params(module, params):
    """The module's parameter gradients in this project's layout (the keys of ``params``)."""
    E = params["W_q"].shape[0]
    g = {}
    if module._qkv_same_embed_dim:
        w = module.in_proj_weight.grad.numpy()
        g["W_q"], g["W_k"], g["W_v"] = w[:E].T, w[E:2 * E].T, w[2 * E:].T
    else:
        g["W_q"] = module.q_proj_weight.grad.numpy().T
        g["W_k"] = module.k_proj_weight.grad.numpy().T
        g["W_v"] = module.v_proj_weight.grad.numpy().T
    g["W_o"] = module.out_proj.weight.grad.numpy().T
    if "b_q" in params:
        b = module.in_proj_bias.grad.numpy()
        g["b_q"], g["b_k"], g["b_v"] = b[:E], b[E:2 * E], b[2 * E:]
        g["b_o"] = module.out_proj.bias.grad.numpy()
    return g


def mha(query, key, value, params, num_heads, dout, attn_mask=None, key_padding_mask=None):
    """nn.MultiheadAttention forward and backward. Masks in torch's polarity (True = blocked).

    Returns out, per-head weights (B, h, L, S), dquery, dkey, dvalue, param grads.
    """
    torch = require("torch")
    module = mha_module(params, num_heads)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (query, key, value))
    out, weights = module(tq, tk, tv, need_weights=True, average_attn_weights=False,
                          attn_mask=None if attn_mask is None else torch.tensor(attn_mask),
                          key_padding_mask=None if key_padding_mask is None
                          else torch.tensor(key_padding_mask))
    out.backward(torch.tensor(dout))
    return (out.detach().numpy(), weights.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(),
            tv.grad.numpy(), module_grads_as_params(module, params))
