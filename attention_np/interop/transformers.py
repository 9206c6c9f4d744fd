"""Diff one attention layer of a Hugging Face ``transformers`` model against attention_np::

    from attention_np.interop.transformers import compare_transformers_attention
    print(compare_transformers_attention(model.model.layers[0].self_attn, hidden_states))

The layer is read as it is stored (``nn.Linear`` or GPT-2's packed ``Conv1D``, grouped-query
heads, a free ``head_dim``, with or without biases, RoPE parameters, a sliding window); a copy is
cast to float64, both sides run forward and backward with one random upstream gradient, and the
report (:class:`~attention_np.interop.compare.MHAReport`) lists the output, the input gradients
and every parameter gradient. The traps this meets are in ``docs/frameworks.md``.

Needs ``torch`` and ``transformers``; no network: build the model from a tiny config.
"""

from __future__ import annotations

import copy

import numpy as np

from attention_np._optional import import_optional
from attention_np.compose.multihead import mha_backward, mha_forward
from attention_np.interop.compare import MHAReport
from attention_np.interop.tolerance import judge
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers_layers import (  # noqa: F401  (re-exported)
    ROPE,
    SUPPORTED,
    LayerSpec,
    attention_spec,
    gpt2_cross,
    layer_spec,
    params_from_transformers,
)
from attention_np.interop.transformers_recent import EAGER_FLOAT64, prepare_recent_layer
from attention_np.interop.transformers_rope import (  # noqa: F401  (rope_cos_sin re-exported)
    check_rope_frequencies,
    model_frequencies,
    rope_cos_sin,
)
from attention_np.variants.position_bias import (
    relative_position_bias,
    relative_position_bias_backward,
    relative_positions,
    t5_relative_buckets,
)
from attention_np.variants.window import sliding_window_mask

# what compare_transformers_attention runs the copy with (None: the module's own)
IMPLEMENTATIONS = ("sdpa", "eager", EAGER_FLOAT64, None)


def build_mask(spec: LayerSpec, batch: int, L: int, S: int,
               attention_mask=None) -> np.ndarray | None:
    """Our bool mask (B, 1, L, S), True = may attend: padding, causal, sliding window.

    ``attention_mask`` (B, S) is transformers' 0/1 padding mask (1 = a real token). The causal
    and window masks compare cache indices, as transformers' ``masking_utils`` does: query ``t``
    is index ``S - L + t`` (the last ``L`` of ``S``), key ``j`` is index ``j``; RoPE's
    ``position_ids`` do not enter.
    """
    mask = None
    if attention_mask is not None:
        mask = np.asarray(attention_mask).astype(bool)[:, None, None, :]      # (B, 1, 1, S)
    if spec.is_causal:        # the L queries are the last L of the S positions; W counts i itself
        left = None if spec.window is None else spec.window - 1
        keep = sliding_window_mask(L, S, left=left, right=0, align="bottom_right")        # (L, S)
        mask = keep if mask is None else mask & keep
    if mask is None:
        return None
    return np.broadcast_to(mask, (batch, 1, L, S))


def _torch_mask(mask, torch):
    """transformers' own 4-D additive mask: 0 where allowed, the dtype's minimum elsewhere."""
    if mask is None:
        return None
    fill = np.where(mask, 0.0, np.finfo(np.float64).min)
    return torch.from_numpy(np.ascontiguousarray(fill))


def compare_transformers_attention(module, hidden_states, *, key_value_states=None,
                                   attention_mask=None, position_ids=None,
                                   attn_implementation: str | None = "sdpa",
                                   seed: int = 0) -> MHAReport:
    """Run a transformers attention layer and attention_np in float64, forward and backward, and diff.

    Parameters
    ----------
    module : a layer of :data:`SUPPORTED`
        BERT, ViT, GPT-2, BART (self- and cross-attention), Llama, Mistral, Qwen2 or T5 (with
        its relative-position bias table, whose gradient is diffed as "dbias_table"); GPT-2's
        cross-attention (``is_cross_attention=True``: ``q_attn`` for q, ``c_attn`` packs k, v);
        Qwen3 and Gemma 3 (QK-norm: "dq_norm", "dk_norm"), Gemma 2 (soft-cap), gpt-oss (sinks:
        "dsinks"). A copy is cast to float64 and run in eval mode (Qwen3's and Gemma 3's
        QK-norms in float64, see :mod:`~attention_np.interop.transformers_recent`); the module
        itself is left untouched.
    hidden_states : (B, L, d_model) array or tensor
    key_value_states : (B, S, d_model), optional
        BART, T5 or GPT-2 cross-attention: the encoder output the keys and values come from
        (GPT-2's ``encoder_hidden_states``; its padding goes in as ``encoder_attention_mask``).
    attention_mask : (B, S) 0/1, optional
        transformers' 2-D padding mask (1 = a real token). The layer gets the model's 4-D float
        mask (0 or ``finfo(float64).min``), with the causal and sliding-window masks of the
        layer folded in; attention_np gets the same as a bool mask.
    position_ids : (B, L) or (1, L) int, optional
        RoPE positions, default ``arange(L)`` (``(1, L)``: the same for every sequence). cos
        and sin are computed in float64 here, with the frequencies of the config's
        ``rope_type``, and passed to the layer as ``position_embeddings`` (transformers
        computes them in float32).
    attn_implementation : {"sdpa", "eager", "attention_np_eager_float64", None}
        The copy's ``config._attn_implementation``; ``None`` keeps the module's. "eager" runs
        the softmax in float32 for ViT, Llama, Mistral, Qwen2, Qwen3 and Gemma (see
        docs/frameworks.md). Gemma 2 with a soft-cap needs "attention_np_eager_float64"
        (transformers' eager with a float64 softmax) or "eager"; gpt-oss needs "eager" (float64
        there): transformers' sdpa refuses the soft-cap and drops the sinks.
    seed : int
        Seed of the random upstream gradient.

    Returns
    -------
    MHAReport
        ``checks`` for "out", "dhidden_states" (and "dkey_value"), and "dW_q", ... in
        attention_np's layout; for RoPE layers also "inv_freq rel" (our frequencies against
        the family's rotary embedding's after a forward on ``position_ids``, relative, within
        :data:`~attention_np.interop.transformers_rope.RTOL_INV_FREQ`) and "attn_factor" (its
        ``attention_scaling``).
    """
    torch = import_optional("torch", "attention_np.interop.transformers")
    import_optional("transformers", "attention_np.interop.transformers")
    spec = layer_spec(module)
    if attn_implementation not in IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {IMPLEMENTATIONS} (float64 forward "
                         f"and backward on CPU), got {attn_implementation!r}")
    is_gpt2_cross = gpt2_cross(module)
    if key_value_states is not None and not (spec.family in ("bart", "t5") or is_gpt2_cross):
        raise ValueError(f"key_value_states (cross-attention) is supported for BartAttention, "
                         f"T5Attention and GPT2Attention(is_cross_attention=True) only, got "
                         f"{type(module).__name__}"
                         f"{' (a self-attention)' if spec.family == 'gpt2' else ''}")
    if is_gpt2_cross and key_value_states is None:
        raise ValueError("GPT2Attention(is_cross_attention=True) needs key_value_states, the "
                         "encoder output (B, S, d_model) its keys and values come from")
    x = to_numpy(hidden_states).astype(np.float64)
    if x.ndim != 3:
        raise ValueError(f"hidden_states must be (B, L, d_model), got shape {x.shape}")
    weights, _ = params_from_transformers(module)          # d_model: the rows of W_q and W_k
    if x.shape[-1] != weights["W_q"].shape[0]:
        raise ValueError(f"hidden_states must be (B, L, d_model) with d_model = "
                         f"{weights['W_q'].shape[0]} (the layer's), got shape {x.shape}")
    kv = None if key_value_states is None else to_numpy(key_value_states).astype(np.float64)
    B, L = x.shape[:2]
    S = L if kv is None else kv.shape[1]
    if attention_mask is not None and np.shape(to_numpy(attention_mask)) != (B, S):
        raise ValueError(f"attention_mask must be (B, S) = {(B, S)}, got "
                         f"{np.shape(to_numpy(attention_mask))}")
    if kv is not None and (kv.ndim != 3 or kv.shape[0] != B
                           or kv.shape[-1] != weights["W_k"].shape[0]):
        raise ValueError(f"key_value_states must be (B, S, d_model) with B = {B}, d_model = "
                         f"{weights['W_k'].shape[0]} (the layer's), got shape {kv.shape}")
    pad = None if attention_mask is None else to_numpy(attention_mask)
    positions = np.arange(L) if position_ids is None else np.asarray(to_numpy(position_ids))
    if positions.shape in ((L,), (1, L)):          # transformers' arange(L)[None]: every sequence
        positions = np.broadcast_to(positions.reshape(1, L), (B, L))
    if positions.shape != (B, L) or not np.issubdtype(positions.dtype, np.integer):
        raise ValueError(f"position_ids must be (B, L) = {(B, L)} integers (or (1, L), shared "
                         f"by the batch), got {positions.dtype} {positions.shape}")
    mask = build_mask(spec if kv is None else _no_causal(spec), B, L, S, pad)

    layer = copy.deepcopy(module).double().eval()
    if attn_implementation is not None:
        layer.config._attn_implementation = attn_implementation
    impl = layer.config._attn_implementation
    if impl == "eager" and getattr(module, "reorder_and_upcast_attn", False):
        # GPT-2's _upcast_and_reordered_attn: float32 scores, and a float64 mask makes its
        # softmax float64, on which it raises RuntimeError("Error with upcasting ...")
        raise ValueError("GPT2Attention with reorder_and_upcast_attn=True computes its scores "
                         "in float32 under eager (and raises on a float64 mask): pass "
                         "attn_implementation='sdpa' (float64, ignores reorder_and_upcast_attn)")
    prepare_recent_layer(layer, spec, impl)
    for p in layer.parameters():
        p.requires_grad_(True)
        p.grad = None
    xt = torch.tensor(x, requires_grad=True)
    kvt = None if kv is None else torch.tensor(kv, requires_grad=True)
    mask_name = {"t5": "mask", "gpt2": "encoder_attention_mask" if is_gpt2_cross else None}.get(
        spec.family) or "attention_mask"
    kwargs = {mask_name: _torch_mask(mask, torch)}
    if kvt is not None:                   # GPT-2 names the encoder output differently
        kwargs["encoder_hidden_states" if is_gpt2_cross else "key_value_states"] = kvt
    if spec.family in ROPE:
        cos, sin = rope_cos_sin(positions, spec.head_dim, spec.rope_theta, spec.rope_scaling)
        if spec.family == "gpt_oss":          # gpt-oss takes the d/2 angles, not repeated
            cos, sin = cos[..., :spec.head_dim // 2], sin[..., :spec.head_dim // 2]
        kwargs["position_embeddings"] = (torch.from_numpy(cos), torch.from_numpy(sin))
    out_t = layer(xt, **kwargs)[0]
    dout = np.random.default_rng(seed).standard_normal(tuple(out_t.shape))
    out_t.backward(torch.from_numpy(dout))
    got = {"out": to_numpy(out_t), "dhidden_states": to_numpy(xt.grad)}
    if kvt is not None:
        got["dkey_value"] = to_numpy(kvt.grad)
    params, _ = params_from_transformers(layer)
    grads, _ = params_from_transformers(layer, grads=True)
    got.update({f"d{n}": g for n, g in grads.items()})

    p = dict(params)
    if not spec.has_w_o:        # BERT stops at the concatenated heads: W^O = I
        p["W_o"] = np.eye(spec.num_heads * spec.head_dim)
    table = p.pop("bias_table", None)
    bias = bucket = None
    if table is not None:      # T5: bias[n, i, j] = table[bucket(j - i), n]
        num_buckets, max_distance, bidirectional = spec.buckets
        bucket = t5_relative_buckets(relative_positions(L, S, align="bottom_right"),
                                     bidirectional=bidirectional, num_buckets=num_buckets,
                                     max_distance=max_distance)                 # (L, S)
        bias = relative_position_bias(table, bucket)                         # (h, L, S)
    src = x if kv is None else kv
    # QK-norm weights and gpt-oss's sinks are in p: params decide them
    out, cache = mha_forward(x, src, src, p, mask, spec=attention_spec(spec), bias=bias,
                             positions=positions if spec.family in ROPE else None)
    dq, dk, dv, g, dbias = mha_backward(dout, cache, return_dbias=True)
    if table is not None:
        g["bias_table"] = relative_position_bias_backward(dbias, bucket, spec.buckets[0])
    ours = {"out": out, "dhidden_states": dq if kv is not None else dq + dk + dv}
    if kv is not None:
        ours["dkey_value"] = dk + dv
    ours.update({f"d{n}": g[n] for n in params})
    report = MHAReport(f"transformers {type(module).__name__} ({impl})", "float64")
    report.checks = judge(got, ours)
    if spec.family in ROPE:        # the model's own frequencies, after a forward on positions
        inv_freq, attention_scaling = model_frequencies(module, positions, torch)
        report.checks += check_rope_frequencies(spec, inv_freq, attention_scaling,
                                                int(positions.max()) + 1)
    if mask is not None:
        n_rows = int((~mask.any(axis=-1)).sum())
        if n_rows:
            report.notes.append(f"{n_rows} query row(s) have every key masked: transformers' "
                                "finfo.min mask gives them mean(V), attention_np 0; a known "
                                "difference, see docs/frameworks.md")
    if position_ids is not None and spec.family not in ROPE:
        report.notes.append(f"position_ids not used: {type(module).__name__} has no rotary "
                            "embedding (its positions, if any, enter before the layer or, T5, "
                            "as the relative bias)")
    if impl == "eager" and spec.family in ("vit", *ROPE) and spec.family != "gpt_oss":
        instead = "'sdpa'" if spec.softcap is None else f"{EAGER_FLOAT64!r} (sdpa refuses the soft-cap)"
        report.notes.append("eager attention of this family runs its softmax in float32 even "
                            f"in float64: use attn_implementation={instead} for a float64 diff")
    return report


def _no_causal(spec: LayerSpec) -> LayerSpec:
    """Cross-attention: every query sees every (unpadded) key."""
    return LayerSpec(**{**spec.__dict__, "is_causal": False, "window": None})
