"""Flax ⇄ attention_np: ``flax.linen.MultiHeadDotProductAttention`` parameters and masks.

Importing this module needs only NumPy; Flax is imported by :func:`flax_mha`.

Flax keeps the heads as their own kernel axis where we keep them side by side as column blocks:

============  ==========================  ===================================
 ours          Flax ``params``             conversion
============  ==========================  ===================================
 W_q (E, h*d)  query/kernel (E, h, d)      ``W_q.reshape(E, h, d)``
 W_k (kdim,..) key/kernel (kdim, h, d)     ``W_k.reshape(kdim, h, d)``
 W_v (vdim,..) value/kernel (vdim, h, d)   ``W_v.reshape(vdim, h, d)``
 W_o (h*d, E)  out/kernel (h, d, E)        ``W_o.reshape(h, d, E)``
 b_q (h*d,)    query/bias (h, d)           ``b_q.reshape(h, d)``
 b_o (E,)      out/bias (E,)               unchanged
============  ==========================  ===================================

The reshapes are exact because head ``i`` owns columns ``[i*d, (i+1)*d)`` in both. Flax uses one
head width for queries, keys and values (``qkv_features``), so ``d_k == d_v``. Its mask is ours
(True = may attend, broadcastable to ``(B, h, L, S)``). A fully masked query row gets uniform
weights, output ``mean(V)`` projected; ours gets 0. With ``jax_enable_x64`` and float64
parameters Flax's softmax runs in float64 (unlike ``jax.nn.dot_product_attention``).
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_count, check_params_dict
from attention_np._optional import import_optional

_NAMES = (("query", "W_q", "b_q"), ("key", "W_k", "b_k"), ("value", "W_v", "b_v"))


def params_to_flax(params: dict, num_heads: int) -> dict:
    """Our ``params`` as Flax variables ``{"params": {"query": {"kernel", "bias"}, ...}}``.

    Raises ``ValueError`` when ``d_k != d_v`` or only some biases are present (Flax has one
    ``use_bias`` switch).
    """
    check_params_dict(params)
    missing = [n for n in ("W_q", "W_k", "W_v", "W_o") if n not in params]
    if missing:
        raise ValueError(f"params is missing {missing} (init_mha_params makes W_q, W_k, W_v, W_o)")
    h = check_count(num_heads, "num_heads")
    W_q, W_v, W_o = (np.asarray(params[n]) for n in ("W_q", "W_v", "W_o"))
    if W_q.shape[1] != W_v.shape[1] or W_q.shape[1] % h:
        raise ValueError(f"Flax uses one head width for q, k and v: params['W_q'] has "
                         f"{W_q.shape[1]} columns, params['W_v'] {W_v.shape[1]}, num_heads={h}")
    d = W_q.shape[1] // h
    biases = [b for b in ("b_q", "b_k", "b_v", "b_o") if b in params]
    if biases and len(biases) != 4:
        raise ValueError(f"Flax has all four biases or none (use_bias); params has {biases}")
    flax_params = {}
    for module, W, b in _NAMES:
        w = np.asarray(params[W])
        flax_params[module] = {"kernel": w.reshape(w.shape[0], h, d)}          # (in, h, d)
        if biases:
            flax_params[module]["bias"] = np.asarray(params[b]).reshape(h, d)  # (h, d)
    flax_params["out"] = {"kernel": W_o.reshape(h, d, W_o.shape[1])}           # (h, d, E)
    if biases:
        flax_params["out"]["bias"] = np.asarray(params["b_o"])
    for ln, norm in (("query_ln", "q_norm"), ("key_ln", "k_norm")):   # normalize_qk=True
        if norm in params and np.shape(params[norm]) != (d,):
            raise ValueError(f"params[{norm!r}] has shape {np.shape(params[norm])}: Flax's "
                             f"normalize_qk has one ({d},) scale per head width, no QK-norm per "
                             f"head ((h, d)) nor over all heads at once (qk_norm_scope='all')")
        if norm in params:
            flax_params[ln] = {"scale": np.asarray(params[norm])}
    return {"params": flax_params}


def params_from_flax(variables: dict) -> tuple[dict, int]:
    """Flax variables (or their gradients, same tree) as ``(params, num_heads)``."""
    if not isinstance(variables, dict) and not hasattr(variables, "get"):
        raise TypeError(f"variables must be Flax variables, {{'params': ...}}, got "
                        f"{type(variables).__name__}")
    p = variables.get("params", variables)
    missing = [m for m in ("query", "key", "value", "out") if m not in p or "kernel" not in p[m]]
    if missing:
        raise ValueError(f"variables has no kernel for {missing}: expected a MultiHeadDotProductAttention's "
                         f"variables ({{'params': {{'query': {{'kernel', ...}}, ...}}}})")
    params = {}
    for module, W, b in _NAMES:
        kernel = np.array(p[module]["kernel"])               # (in, h, d), a copy: jax's is read-only
        params[W] = kernel.reshape(kernel.shape[0], -1)                     # (in, h*d)
        if "bias" in p[module]:
            params[b] = np.array(p[module]["bias"]).reshape(-1)
    out = np.array(p["out"]["kernel"])                                    # (h, d, E)
    params["W_o"] = out.reshape(-1, out.shape[-1])                          # (h*d, E)
    if "bias" in p["out"]:
        params["b_o"] = np.array(p["out"]["bias"])
    for ln, norm in (("query_ln", "q_norm"), ("key_ln", "k_norm")):   # normalize_qk=True:
        if ln in p:                                        # LayerNorm over d, no bias
            params[norm] = np.array(p[ln]["scale"])
            if "bias" in p[ln]:
                params[f"{norm}_bias"] = np.array(p[ln]["bias"])
    return params, int(np.asarray(p["query"]["kernel"]).shape[1])


def flax_mha(params: dict, num_heads: int):
    """A ``MultiHeadDotProductAttention`` and its variables computing our ``mha_forward``.

    Returns ``(module, variables)``; call ``module.apply(variables, query, key, value,
    mask=mask)``. The dtype follows ``params`` (float64 needs :func:`attention_np.interop.jax.x64`).
    """
    jnp = import_optional("jax.numpy", "attention_np.interop.flax.flax_mha")   # flax needs jax
    nn = import_optional("flax.linen", "attention_np.interop.flax.flax_mha")

    variables = params_to_flax(params, num_heads)       # checks params and num_heads
    dtype = jnp.dtype(np.asarray(params["W_q"]).dtype)
    module = nn.MultiHeadDotProductAttention(
        num_heads=num_heads, qkv_features=np.asarray(params["W_q"]).shape[1],
        out_features=np.asarray(params["W_o"]).shape[1], use_bias="b_q" in params,
        normalize_qk="q_norm" in params, dtype=dtype, param_dtype=dtype)
    return module, variables


def forward_backward(module, variables, query, key, value, dout, mask=None):
    """A Flax attention module's forward and its ``jax.vjp`` backward, w.r.t. the inputs and
    every parameter; dropout off (``deterministic=True``).

    Returns
    -------
    out : NumPy array (..., L, out_features)
    dinputs : (dquery, dkey, dvalue), NumPy arrays
    grads : dict, the parameter gradients in our names and layout (:func:`params_from_flax`)
    """
    jax = import_optional("jax", "attention_np.interop.flax.forward_backward")
    jnp = import_optional("jax.numpy", "attention_np.interop.flax.forward_backward")

    nn = import_optional("flax.linen", "attention_np.interop.flax.forward_backward")
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a flax.linen attention module, got {type(module).__name__}")
    params_from_flax(variables)                       # the variables are an attention's
    mask = None if mask is None else jnp.asarray(mask)

    def forward(variables, query, key, value):
        return module.apply(variables, query, key, value, mask=mask, deterministic=True)

    @jax.jit  # one compilation instead of one per primitive, as in interop.jax.forward_backward
    def run(variables, query, key, value, dout):
        out, vjp = jax.vjp(forward, variables, query, key, value)
        return (out, *vjp(dout))

    variables = jax.tree_util.tree_map(jnp.asarray, variables)
    out, dvariables, *dinputs = run(variables, *map(jnp.asarray, (query, key, value)),
                                    jnp.asarray(dout))
    grads, _ = params_from_flax(jax.tree_util.tree_map(np.asarray, dvariables))
    return np.asarray(out), tuple(np.asarray(d) for d in dinputs), grads
