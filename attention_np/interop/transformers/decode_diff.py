"""Replay a ``generate()`` call step by step against attention_np's KV cache.

A float64 copy of the model generates greedily; a hook on one attention layer records what the
layer receives and returns at every step (the prompt, then one token at a time). attention_np
replays the same steps from the recorded inputs with
:func:`~attention_np.compose.decode.mha_decode_step` and a
:class:`~attention_np.compose.decode.KVCache`, with the layer's padding mask, sliding window
and RoPE positions, and the per-step outputs are diffed.

For an encoder-decoder (T5, BART) the decoder's first layer has two attention layers, and both
are replayed: the causal **self-attention** on the KV cache (T5: with the row of its bias table
at the new query's absolute position, ``relative_positions(T, S, align="bottom_right")``), and the
**cross-attention** to the encoder output, projected once by
:func:`~attention_np.compose.cross_decode.cross_kv_cache` and attended by
:func:`~attention_np.compose.cross_decode.mha_cross_decode_step` (source padding as its mask).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from attention_np._checks import check_int
from attention_np._optional import import_optional
from attention_np.compose.cross_decode import cross_kv_cache, mha_cross_decode_step
from attention_np.compose.decode import KVCache, mha_decode_step
from attention_np.interop.tolerance import RTOL64, check_float64
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.layer_reading import (
    layer_spec,
    mha_options,
    params_from_transformers,
)
from attention_np.interop.transformers.recent import (
    EAGER_FLOAT64,
    float64_experts,
    prepare_recent_layer,
)
from attention_np.interop.transformers.rotary import float64_rotary
from attention_np.variants.position_bias import (
    relative_position_bias,
    relative_positions,
    t5_relative_buckets,
)


@dataclass
class DecodeReport:
    """What :func:`replay_generate` found: one :class:`~attention_np.interop.tolerance.Check`
    per step and layer (step 0 is the prompt), the generated tokens, and a verdict ``ok``.

    ``layers`` names the attention layers replayed at each step (``("self",)`` for a decoder,
    ``("self", "cross")`` for an encoder-decoder); ``cross_projections`` counts how often the
    cross-attention's key projection ran in transformers during ``generate()`` (once, when its
    cache works; ``None`` for a decoder)."""

    module: str
    tokens: np.ndarray
    max_new_tokens: int
    checks: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    layers: tuple = ("self",)
    cross_projections: int | None = None
    rope_checks: list = field(default_factory=list)   # inv_freq, attention factor, per step

    @property
    def ok(self) -> bool:
        """Every step agrees, each layer ran once per new token (the prompt is the first), the
        cross-attention's keys and values were projected once, and the RoPE frequencies agree."""
        return (len(self.checks) == self.max_new_tokens * len(self.layers)
                and all(c.ok for c in self.checks + self.rope_checks)
                and self.cross_projections in (None, 1))

    def __str__(self) -> str:
        lines = [f"generate() replay, {self.module} (float64) vs attention_np KV cache -> "
                 f"{'AGREE' if self.ok else 'MISMATCH'}",
                 f"tolerance float64: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|)",
                 f"{'step':<18} {'max abs err':>12} {'tolerance':>10}  ok"]
        lines += [f"{c.name:<18} {c.err:>12.2e} {c.tol:>10.1e}  {'yes' if c.ok else 'NO'}"
                  for c in self.checks + self.rope_checks]
        if self.cross_projections is not None:
            lines.append(f"cross-attention keys/values projected by transformers "
                         f"{self.cross_projections} time(s) in generate(), by attention_np once "
                         f"(cross_kv_cache)")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


DECODERS = ("GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
            "Qwen3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "GptOssForCausalLM")
ENCODER_DECODERS = ("T5ForConditionalGeneration", "BartForConditionalGeneration")


def _attention(model):
    """The first attention layer of one of :data:`DECODERS`; for one of
    :data:`ENCODER_DECODERS`, the decoder's first ``(self_attention, cross_attention)``."""
    name = type(model).__name__
    if name not in DECODERS + ENCODER_DECODERS:
        raise TypeError(f"model must be one of {list(DECODERS + ENCODER_DECODERS)}, got {name}")
    if name == "GPT2LMHeadModel":
        return model.transformer.h[0].attn
    if name == "T5ForConditionalGeneration":
        block = model.decoder.block[0]
        return block.layer[0].SelfAttention, block.layer[1].EncDecAttention
    if name == "BartForConditionalGeneration":
        layer = model.model.decoder.layers[0]
        return layer.self_attn, layer.encoder_attn
    return model.model.layers[0].self_attn


def replay_generate(model, input_ids, *, attention_mask=None,
                    max_new_tokens: int = 3) -> DecodeReport:
    """Greedy ``generate()`` on a float64 copy of ``model``, replayed on attention_np's KV cache.

    Parameters
    ----------
    model : transformers ``GPT2LMHeadModel``, ``LlamaForCausalLM``, ``MistralForCausalLM``,
        ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``, ``Gemma2ForCausalLM``,
        ``Gemma3ForCausalLM``, ``GptOssForCausalLM``, ``T5ForConditionalGeneration`` or
        ``BartForConditionalGeneration``
        A decoder's first attention layer is diffed; an encoder-decoder's decoder's first
        self-attention and cross-attention. Left untouched: a copy runs in float64 with
        ``attn_implementation="sdpa"`` (Gemma 2: ``"attention_np_eager_float64"``, its soft-cap;
        gpt-oss: ``"eager"``, its sinks, and ``experts_implementation="eager"``), a float64
        rotary embedding (Gemma 3: per layer type) and QK-norms (Qwen3, Gemma 3).
    input_ids : (B, L) int
        The prompts; for an encoder-decoder, the sources (the decoder starts from its
        ``decoder_start_token_id``).
    attention_mask : (B, L) 0/1, optional
        Padding of the prompts (left padding, as for batched generation); default none. The
        padded query rows are left out of the diff (transformers gives them mean(V), attention_np
        0: see docs/frameworks.md), the keys they hold are masked on both sides. For an
        encoder-decoder, the source padding (either side): the cross-attention's mask.
    max_new_tokens : int
        Tokens generated after the prompt.

    Returns
    -------
    DecodeReport
        ``checks``: "step 0 (T=L)" for the prompt, then one per generated token; for an
        encoder-decoder "self step n (T=1)" and "cross step n (T=1)" for each of the
        ``max_new_tokens`` decoder steps.
        ``rope_checks``: at every step, our ``inv_freq`` and attention factor against the
        model's rotary embedding's (updated for the length of that step by ``"dynamic"`` and
        ``"longrope"``).
    """
    torch = import_optional("torch", "attention_np.interop.transformers.decode_diff")
    import_optional("transformers", "attention_np.interop.transformers.decode_diff")
    ids, pad = _read_prompts(input_ids, attention_mask)
    _attention(model)                              # TypeError for an unsupported model
    check_int(max_new_tokens, "max_new_tokens")
    m = copy.deepcopy(model).double().eval()
    m.config._attn_implementation = "sdpa"
    if type(m).__name__ in ENCODER_DECODERS:
        return _replay_encoder_decoder(m, ids, pad, max_new_tokens, torch)
    positions, rope_checks = _float64_model_rotary(m, torch)
    layer = _attention(m)
    spec = layer_spec(layer)
    _float64_recent_layers(m, spec)
    seen, tokens = _generate_recorded(m, layer, ids, pad, max_new_tokens, torch)
    params, _ = params_from_transformers(layer)
    report = DecodeReport(type(layer).__name__, to_numpy(tokens), max_new_tokens,
                          rope_checks=rope_checks)
    if len(seen) != max_new_tokens:                # the prompt, then one call per new token
        report.notes.append(f"the layer ran {len(seen)} times for {max_new_tokens} tokens")
    padded = attention_mask is not None and not pad.all()
    report.checks += _replay_steps(spec, params, seen, positions, pad, padded,
                                   max_new_tokens)
    if padded:
        report.notes.append(f"{int((pad == 0).sum())} padded prompt position(s) left out of "
                            "the diff (transformers: mean(V) there, attention_np: 0)")
    if spec.attention.rope is not None:
        report.notes.append("the copy's rotary embedding computes cos/sin in float64 "
                            "(transformers: float32, see docs/frameworks.md)")
    return report


def _read_prompts(input_ids, attention_mask) -> tuple:
    """``(ids, pad)``: the prompts (B, L) as integers and their 0/1 padding (default all 1)."""
    ids = np.asarray(to_numpy(input_ids))
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"input_ids must be (B, L) integers, got {ids.dtype} {ids.shape}")
    pad = np.ones(ids.shape, np.int64) if attention_mask is None else np.asarray(
        to_numpy(attention_mask)).astype(np.int64)
    if pad.shape != ids.shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {ids.shape}, "
                         f"got {pad.shape}")
    return ids, pad


def _float64_model_rotary(m, torch) -> tuple:
    """``(positions, rope_checks)``: the model's rotary embedding checked against ours and run
    in float64 (per layer type: Gemma 3), the positions of each of its calls logged; empty
    for a model without one (GPT-2)."""
    positions, rope_checks = [], []
    rotary = getattr(getattr(m, "model", m), "rotary_emb", None)       # GPT-2 has none
    if rotary is not None:
        blocks = m.model.layers      # layer type -> the spec of its first layer, and the replayed
        specs = {getattr(b.self_attn, "layer_type", None): layer_spec(b.self_attn)
                 for b in blocks[::-1]}
        float64_rotary(rotary, specs, getattr(blocks[0].self_attn, "layer_type", None), torch,
                       positions, rope_checks)
    return positions, rope_checks


def _float64_recent_layers(m, spec) -> None:
    """Every layer of Qwen 3, Gemma 2 and 3, gpt-oss in float64: QK-norms, Gemma 2's soft-cap,
    gpt-oss's sinks (eager: float64) and experts."""
    if spec.family not in ("qwen3", "gemma2", "gemma3", "gpt_oss"):
        return
    m.config._attn_implementation = {"gemma2": EAGER_FLOAT64, "gpt_oss": "eager"}.get(
        spec.family, "sdpa")
    if spec.family == "gpt_oss":
        float64_experts(m)                     # grouped_mm takes no float64
    for block in m.model.layers:
        prepare_recent_layer(block.self_attn, layer_spec(block.self_attn),
                             m.config._attn_implementation)


def _generate_recorded(m, layer, ids, pad, max_new_tokens: int, torch) -> tuple:
    """``(seen, tokens)``: greedy ``generate()``'s tokens, and ``(x, out)`` of each call of
    ``layer`` (the prompt, then one per new token)."""
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
    return seen, tokens


def _replay_steps(spec, params: dict, seen: list, positions: list, pad, padded: bool,
                  max_new_tokens: int) -> list:
    """A check per recorded step ``(x, theirs)``: :func:`~attention_np.compose.decode.
    mha_decode_step` on our KV cache (heads, scale, RoPE at the positions ``generate()`` used,
    QK-norm, soft-cap, sinks: from the spec) against the layer's output, the padded query rows
    left out."""
    checks = []
    # the padding of every position: the prompt's, then 1 for each generated token
    full = np.concatenate([pad, np.ones((pad.shape[0], max_new_tokens), np.int64)], axis=1)
    kv = KVCache(pad.shape[1] + max_new_tokens)
    for step, (x, theirs) in enumerate(seen):
        T = x.shape[1]
        S = kv.length + T
        options = mha_options(spec, positions[step] if spec.attention.rope is not None else None,
                              window=True)
        if padded:        # key padding of the S cached positions, (B, 1, 1, S)
            options["mask"] = full[:, None, None, :S].astype(bool)
        # heads, scale, RoPE at the positions generate() used (shifted by padding), QK-norm,
        # soft-cap, sinks: from the spec, as every diff takes them
        ours = mha_decode_step(x, params, kv, **options)
        real = full[:, kv.length - x.shape[1]:kv.length].astype(bool)     # (B, T) query rows
        checks.append(check_float64(f"step {step} (T={x.shape[1]})", theirs[real], ours[real]))
    return checks


def _replay_encoder_decoder(m, ids, pad, max_new_tokens: int, torch) -> DecodeReport:
    """:func:`replay_generate` of a float64 T5 or BART copy ``m``: the decoder's first
    self-attention on a :class:`KVCache`, its cross-attention on :func:`cross_kv_cache`."""
    self_attn, cross_attn = _attention(m)
    self_spec, cross_spec = layer_spec(self_attn), layer_spec(cross_attn)
    seen = {"self": [], "cross": []}
    projections = []

    def record(name):
        def hook(mod, args, kwargs, out):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            memory = kwargs.get("key_value_states")
            seen[name].append((to_numpy(x).copy(), None if memory is None else
                               to_numpy(memory).copy(), to_numpy(out[0]).copy()))
        return hook

    k_proj = cross_attn.k if self_spec.family == "t5" else cross_attn.k_proj
    handles = [self_attn.register_forward_hook(record("self"), with_kwargs=True),
               cross_attn.register_forward_hook(record("cross"), with_kwargs=True),
               k_proj.register_forward_hook(lambda *_: projections.append(1))]
    try:
        with torch.no_grad():
            tokens = m.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(pad),
                                max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                                do_sample=False)
    finally:
        for handle in handles:
            handle.remove()
    report = DecodeReport(f"{type(self_attn).__name__} (self + cross)", to_numpy(tokens),
                          max_new_tokens, layers=("self", "cross"),
                          cross_projections=len(projections))
    for name in ("self", "cross"):
        if len(seen[name]) != max_new_tokens:          # one decoder call per new token
            report.notes.append(f"the {name}-attention ran {len(seen[name])} times for "
                                f"{max_new_tokens} tokens")
    p_self, _ = params_from_transformers(self_attn)
    p_cross, _ = params_from_transformers(cross_attn)
    table = p_self.pop("bias_table", None)                       # T5's decoder: (buckets, h)
    kv = KVCache(sum(x.shape[1] for x, _, _ in seen["self"]))
    memory = seen["cross"][0][1]                                 # (B, S, d_model), the encoder's
    cross = cross_kv_cache(memory, p_cross, num_heads=cross_spec.num_heads)    # projected once
    source = pad.astype(bool)[:, None, None, :]                  # (B, 1, 1, S) source padding
    for step, ((x, _, theirs), (y, memory_t, theirs_cross)) in enumerate(
            zip(seen["self"], seen["cross"], strict=False)):      # unequal counts: noted
        T = x.shape[1]
        bias = None
        if table is not None:     # T5: the bias rows of the T new queries, at S - T .. S - 1
            t5 = self_spec.relative_bias
            bucket = t5_relative_buckets(relative_positions(T, kv.length + T,
                                                            align="bottom_right"),
                                         bidirectional=t5.bidirectional,
                                         num_buckets=t5.num_buckets,
                                         max_distance=t5.max_distance)              # (T, S)
            bias = relative_position_bias(table, bucket)                            # (h, T, S)
        ours = mha_decode_step(x, p_self, kv, bias=bias, **mha_options(self_spec))  # (B, T, d)
        report.checks.append(check_float64(f"self step {step} (T={T})", theirs, ours))
        if not np.array_equal(memory_t, memory):
            report.notes.append(f"step {step}: the cross-attention got another encoder output")
        ours = mha_cross_decode_step(y, p_cross, cross, num_heads=cross_spec.num_heads,
                                     scale=cross_spec.scale, mask=source)           # (B, T, d)
        report.checks.append(check_float64(f"cross step {step} (T={y.shape[1]})", theirs_cross,
                                           ours))
    if not pad.all():
        report.notes.append(f"{int((pad == 0).sum())} padded source position(s) masked in the "
                            "cross-attention")
    return report
