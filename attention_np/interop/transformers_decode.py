"""Replay a ``generate()`` call step by step against attention_np's KV cache.

A float64 copy of the model generates greedily; a hook on one attention layer records what the
layer receives and returns at every step (the prompt, then one token at a time). attention_np
replays the same steps from the recorded inputs with
:func:`~attention_np.efficient.kv_cache.mha_decode_step` and a
:class:`~attention_np.efficient.kv_cache.KVCache`, with the layer's padding mask, sliding window
and RoPE positions, and the per-step outputs are diffed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from attention_np.core._checks import check_int
from attention_np.core.optional import import_optional
from attention_np.efficient.kv_cache import KVCache, mha_decode_step
from attention_np.interop.tolerance import RTOL64, check_float64
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers import (
    ROPE,
    layer_spec,
    params_from_transformers,
    rope_cos_sin,
)
from attention_np.interop.transformers_recent import EAGER_FLOAT64, prepare_recent_layer


@dataclass
class DecodeReport:
    """What :func:`replay_generate` found: one :class:`~attention_np.interop.tolerance.Check`
    per step (step 0 is the prompt), the generated tokens, and a verdict ``ok``."""

    module: str
    tokens: np.ndarray
    max_new_tokens: int
    checks: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every step agrees, and the layer ran once per new token (the prompt is the first)."""
        return len(self.checks) == self.max_new_tokens and all(c.ok for c in self.checks)

    def __str__(self) -> str:
        lines = [f"generate() replay, {self.module} (float64) vs attention_np KV cache -> "
                 f"{'AGREE' if self.ok else 'MISMATCH'}",
                 f"tolerance float64: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|)",
                 f"{'step':<14} {'max abs err':>12} {'tolerance':>10}  ok"]
        lines += [f"{c.name:<14} {c.err:>12.2e} {c.tol:>10.1e}  {'yes' if c.ok else 'NO'}"
                  for c in self.checks]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _float64_rotary(model, torch, positions_seen: list):
    """Make the copy's rotary embedding compute cos and sin in float64 (transformers: float32),
    and record the ``position_ids`` of every forward (left padding shifts them)."""
    rotary = getattr(getattr(model, "model", model), "rotary_emb", None)
    if rotary is None:
        return
    d = int(rotary.inv_freq.shape[-1]) * 2
    theta = layer_spec(model.model.layers[0].self_attn).rope_theta

    def forward(x, position_ids):
        positions_seen.append(to_numpy(position_ids).copy())
        cos, sin = rope_cos_sin(positions_seen[-1], d, theta)
        return torch.from_numpy(cos), torch.from_numpy(sin)

    rotary.forward = forward


DECODERS = ("GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
            "Qwen3ForCausalLM", "Gemma2ForCausalLM")


def _attention(model):
    """The first attention layer of one of :data:`DECODERS`."""
    name = type(model).__name__
    if name not in DECODERS:
        raise TypeError(f"model must be one of {list(DECODERS)}, got {name}")
    if name == "GPT2LMHeadModel":
        return model.transformer.h[0].attn
    return model.model.layers[0].self_attn


def replay_generate(model, input_ids, *, attention_mask=None,
                    max_new_tokens: int = 3) -> DecodeReport:
    """Greedy ``generate()`` on a float64 copy of ``model``, replayed on attention_np's KV cache.

    Parameters
    ----------
    model : transformers ``GPT2LMHeadModel``, ``LlamaForCausalLM``, ``MistralForCausalLM``,
        ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM`` or ``Gemma2ForCausalLM``
        Its first attention layer is diffed. Left untouched: a copy runs in float64 with
        ``attn_implementation="sdpa"`` (Gemma 2: ``"attention_np_eager_float64"``, its soft-cap)
        and a float64 rotary embedding (and QK-norms, Qwen3).
    input_ids : (B, L) int
    attention_mask : (B, L) 0/1, optional
        Padding of the prompts (left padding, as for batched generation); default none. The
        padded query rows are left out of the diff (transformers gives them mean(V), attention_np
        0: see docs/frameworks.md), the keys they hold are masked on both sides.
    max_new_tokens : int
        Tokens generated after the prompt.

    Returns
    -------
    DecodeReport
        ``checks``: "step 0 (T=L)" for the prompt, then one per generated token.
    """
    torch = import_optional("torch", "attention_np.interop.transformers_decode")
    import_optional("transformers", "attention_np.interop.transformers_decode")
    ids = np.asarray(to_numpy(input_ids))
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"input_ids must be (B, L) integers, got {ids.dtype} {ids.shape}")
    pad = np.ones(ids.shape, np.int64) if attention_mask is None else np.asarray(
        to_numpy(attention_mask)).astype(np.int64)
    if pad.shape != ids.shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {ids.shape}, "
                         f"got {pad.shape}")
    _attention(model)                              # TypeError for an unsupported model
    check_int(max_new_tokens, "max_new_tokens")
    m = copy.deepcopy(model).double().eval()
    m.config._attn_implementation = "sdpa"
    positions = []
    _float64_rotary(m, torch, positions)
    layer = _attention(m)
    spec = layer_spec(layer)
    if spec.family in ("qwen3", "gemma2"):   # every layer: float64 QK-norms, Gemma 2's soft-cap
        m.config._attn_implementation = EAGER_FLOAT64 if spec.family == "gemma2" else "sdpa"
        for block in m.model.layers:
            prepare_recent_layer(block.self_attn, layer_spec(block.self_attn),
                                 m.config._attn_implementation)
    seen = []

    def hook(mod, args, kwargs, out):
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        seen.append((to_numpy(x).copy(), to_numpy(out[0]).copy()))

    handle = layer.register_forward_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            tokens = m.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(pad),
                                max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                                do_sample=False, pad_token_id=m.config.eos_token_id)
    finally:
        handle.remove()
    params, _ = params_from_transformers(layer)
    report = DecodeReport(type(layer).__name__, to_numpy(tokens), max_new_tokens)
    if len(seen) != max_new_tokens:                # the prompt, then one call per new token
        report.notes.append(f"the layer ran {len(seen)} times for {max_new_tokens} tokens")
    # the padding of every position: the prompt's, then 1 for each generated token
    full = np.concatenate([pad, np.ones((pad.shape[0], max_new_tokens), np.int64)], axis=1)
    padded = attention_mask is not None and not pad.all()
    kv = KVCache(ids.shape[1] + max_new_tokens)
    for step, (x, theirs) in enumerate(seen):
        T = x.shape[1]
        S = kv.length + T
        options = {}
        if padded:        # key padding of the S cached positions, (B, 1, 1, S)
            options["mask"] = full[:, None, None, :S].astype(bool)
        if spec.window is not None:        # Mistral's window W counts the query itself
            options["window"] = (spec.window - 1, 0)
        if spec.family in ROPE:            # the positions generate() used (shifted by padding)
            options.update(rope={"theta": spec.rope_theta, "layout": "half"},
                           positions=positions[step])                      # (B, T)
        if spec.qk_norm_eps is not None:   # Qwen3
            options.update(qk_norm=True, qk_norm_eps=spec.qk_norm_eps)
        if spec.softcap is not None:       # Gemma 2
            options["softcap"] = spec.softcap
        ours = mha_decode_step(x, params, kv, num_heads=spec.num_heads,
                               num_kv_heads=spec.num_kv_heads, scale=spec.scale, **options)
        real = full[:, kv.length - x.shape[1]:kv.length].astype(bool)     # (B, T) query rows
        report.checks.append(check_float64(f"step {step} (T={x.shape[1]})", theirs[real],
                                           ours[real]))
    if padded:
        report.notes.append(f"{int((pad == 0).sum())} padded prompt position(s) left out of "
                            "the diff (transformers: mean(V) there, attention_np: 0)")
    if spec.family in ROPE:
        report.notes.append("the copy's rotary embedding computes cos/sin in float64 "
                            "(transformers: float32, see docs/frameworks.md)")
    return report
