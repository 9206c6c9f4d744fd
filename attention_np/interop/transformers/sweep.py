"""Every model class of the installed transformers, diffed: a tiny random model of each, and a
verdict an engineer can act on (docs/transformers_sweep.md is this module's table).

For each ``model_type`` of transformers' ``AutoModel`` mapping, :func:`tiny_config` shrinks
the family's default config (widths 32, 4 heads, 2 key/value heads, 2 layers, feed-forward 37,
vocabulary 99, every sub-config likewise; no download), :func:`sweep_one` builds the model with
random weights and diffs it:

- a text model (``main_input_name == "input_ids"``) whole, with
  :func:`~attention_np.interop.transformers.model_diff.compare_transformers_model` (its rotary
  embedding's cos and sin, every attention layer call, forward and backward);
- any other model layer by layer, the first layer of each attention class with
  :func:`~attention_np.interop.transformers.compare_transformers_attention`.

A model that agrees is diffed again with ``1e-6`` added to the output of its first attention
layer (a forward hook on the torch side): the verdict must become MISMATCH and name that layer.
The row's verdict is one of ``"AGREE"`` (and the change caught), ``"refused"`` (the feature
named), ``"skipped"`` (no model: the tiny config could not be built, the reason said),
``"no attention"`` (no attention layer in the model), ``"MISMATCH"``, ``"not caught"`` or
``"error"`` (the last three: a false verdict, each a bug to fix).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from attention_np._optional import import_optional

WIDTH = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "model_dim",
         "word_embed_proj_dim", "embedding_size", "projection_dim", "text_embed_dim",
         "vision_embed_dim")
HEADS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
         "decoder_attention_heads", "num_heads", "attention_heads")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers",
          "n_layers", "num_decoder_layers", "num_encoder_layers")
FFN = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
       "ffn_hidden_size", "moe_intermediate_size", "shared_expert_intermediate_size")
SMALL = {"num_key_value_heads": 2, "num_key_value_attention_heads": 2, "num_kv_heads": 2,
         "head_dim": 8, "vocab_size": 99, "num_local_experts": 2,
         "num_experts": 2, "n_routed_experts": 2, "num_experts_per_tok": 1,
         "max_position_embeddings": 64, "image_size": 32, "patch_size": 8,
         **{n: 32 for n in WIDTH}, **{n: 4 for n in HEADS}, **{n: 2 for n in LAYERS},
         **{n: 37 for n in FFN},
         "rotary_dim": 4,                      # GPT-J, CodeGen: partial RoPE of the 8
         "d_head": 8}                          # XLNet, Funnel: d_model / heads, not derived
VOCAB = 99
# families whose tiny config needs more than the generic shrink, each for the reason given
OVERRIDES = {
    # Swin's per-stage head counts (3, 6, 12, 24) do not divide its shrunk widths (32, 64, ...),
    # which transformers cannot run; 2x2 windows on the 4x4 patches of a 32x32 image, so that
    # the second block of the first stage attends shifted windows
    "swin": {"num_heads": [4, 4], "depths": [2, 2], "window_size": 2,
             "stage_names": ["stem", "stage1", "stage2"], "out_features": ["stage2"],
             "out_indices": [2]},
    # the 2-D relative position bias table of each layer (BEiT's checkpoints use one); the
    # default config has none (BEiT's backbone outputs name a stage of the full depth)
    "data2vec-vision": {"use_relative_position_bias": True},
    "beit": {"use_relative_position_bias": True, "out_features": ["stage2"], "out_indices": [2]},
    # ERNIE 4.5 VL's sections are [h, w, t] (default [22, 22, 20]), h and w stacked: equal
    "ernie4_5_vl_moe": {"text_config": {"rope_parameters": {"mrope_section": [1, 1, 2]}}},
    # Zamba ties every hybrid layer's shared attention block to the first one's: with a single
    # hybrid layer transformers' tie_weights finds nothing to tie and raises; its attention
    # widths are stored, not derived (2 x hidden: the block reads [hidden | embeddings])
    # Nemotron 3's audio attention: v_proj is num_attention_heads wide whatever
    # num_key_value_heads says (k_proj follows it); its checkpoints have the two equal (the
    # config's default). With fewer key/value heads eager cannot run it and sdpa groups the
    # keys but not the values: the reader refuses that by name (tests), the sweep builds
    # the family as its checkpoints are
    **{t: {"num_key_value_heads": 4} for t in (
        "nemotron3_5_transcribe_asr_audio", "nemotron3_5_transcribe_word_timestamp",
        "nemotron3_diarization_audio")},
    "zamba": {"num_hidden_layers": 3,
              "layers_block_type": ["linear_attention", "hybrid", "hybrid"],
              "attention_hidden_size": 64, "attention_head_dim": 16, "mamba_dt_rank": 4},
    # Swin V2, as Swin: 2 stages of 2x2 windows on the 4x4 patches (4 stages end below 1x1)
    "swinv2": {"num_heads": [4, 4], "depths": [2, 2], "window_size": 2,
               "stage_names": ["stem", "stage1", "stage2"], "out_features": ["stage2"],
               "out_indices": [2]},
    # the last 15 of 35 layers reuse earlier layers' keys and values: the last 2 of 4 here
    "gemma3n_text": {"num_kv_shared_layers": 2},
    # its adapter reads vision layers 24 and 18 of 27: the last of 2
    "molmo2": {"adapter_config": {"vision_feature_layer": [-1]}},
    # defaults that do not build at full size (None where the modeling reads a value)
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "chameleon": {"vocabulary_map": {"<image>": 1}},
    "emu3": {"vocabulary_map": {"<image>": 1}},
    "funnel": {"architectures": ["FunnelModel"]},      # AutoModel picks a class by it
    "autoformer": {"prediction_length": 4},
    "informer": {"prediction_length": 4},
    "time_series_transformer": {"prediction_length": 4},
    # its decoder views its queries as num_key_value_heads heads: it runs only with as many
    # key/value heads as query heads (transformers 5.24)
    "moonshine_streaming": {"num_key_value_heads": 4},
    # no grouped-query attention (the validator requires as many key/value heads as heads)
    "esmc": {"num_key_value_heads": 4},
    "glm5_next": {"text_config": {"num_key_value_heads": 4}},
    "glm5_next_text": {"num_key_value_heads": 4},
    # axial position embeddings: their widths sum to the model's, their shape the positions
    "reformer": {"axial_pos_embds_dim": [16, 16], "axial_pos_shape": [8, 8]},
    # its vision tower has width // 64 heads
    "bridgetower": {"vision_config": {"hidden_size": 64}},
    # a gated feed-forward of even width (the generic 37 is odd)
    "moshi": {"ffn_dim": 38, "depth_decoder_config": {"ffn_dim": 38}},
    "kyutai_speech_to_text": {"ffn_dim": 38},
    # Mamba-2 heads dividing the expanded width (2 x 32 = 4 x 16)
    "bamba": {"mamba_n_heads": 4, "mamba_d_head": 16},
    "granitemoehybrid": {"mamba_n_heads": 4, "mamba_d_head": 16},
    # its layers cycle through block_types (recurrent, recurrent, attention): 2 layers of
    # that cycle have no attention; one of each kind
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # its audio encoder's num_hidden_layers counts the 4 stages of its per-stage lists
    "muse_spark_audio": {"num_hidden_layers": 4},
    "muse_spark": {"audio_config": {"num_hidden_layers": 4}},
    # a local attention context within the 64 positions
    "granite_speech5_encoder": {"context_size": 32},
    "granite_speech5_ctc": {"encoder_config": {"context_size": 32}},
}
# the widths _narrow shrinks (the names' ends) and the ones it leaves alone (inputs' shapes,
# kernels, positions: their own rules)
NARROW = (r"(hidden_sizes?|_dims?|^dim|hidden_dim|channels?|_units|_rank|^d_latents|num_latents"
          r"|_vocab|intermediate_size|embed_dim_per_stage|_size_global|_width|feature_size"
          r"|num_embeddings|codebook_size|num_filters)$|vocab_size|hidden_size")
NOT_NARROW = (r"(patch_size|image_size|kernel|stride|mel|spec|position|window|pool|sampling"
              r"|^num_channels$)")
CAP = 5_000_000                         # parameters of a tiny model (keeps the sweep fast)
B, L = 2, 6                             # the inputs: 2 sequences of 6 tokens
CHANGE = 1e-6                           # added to one layer's output: must be caught and named
CACHED_NEW = 2                          # the cached mode: the last 2 of the L tokens on the cache
# the decoder families CI runs in the cached mode (sweep(CACHED_FAMILIES, cached=True)), one of
# each kind of position and attention: all the decoder families would take minutes more
CACHED_FAMILIES = (
    "llama",          # RoPE, grouped-query attention
    "mistral",        # a sliding window (DynamicSlidingWindowLayer: the window's keys only)
    "gpt2",           # absolute positions, a fused Conv1D c_attn
    "gemma2",         # soft-cap, sliding and full layers
    "gemma3_text",    # a rotary embedding per layer type, QK-norm
    "qwen2",          # q, k, v biases
    "qwen3",          # QK-norm
    "olmo2",          # QK-norm over all heads
    "gpt_oss",        # sinks, r/2 angles
    "phi",            # partial rotary, biases
    "gpt_neox",       # fused per-head query_key_value, partial rotary
    "gptj",           # (sin, cos) of interleaved pairs
    "cohere",         # interleaved pairs
    "falcon",         # fused grouped query_key_value
    "bloom",          # ALiBi, causal by its mask alone
)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shrink(d: dict, mrope: bool = False) -> dict:
    """A config dict with every width, head count, depth, vocabulary made small (recursively
    into sub-configs, with or without a ``model_type``); per-layer lists and dicts cut to the
    new depth (:func:`_cut_layers`); per-stage lists of heads and depths (:func:`_stages`);
    backbone outputs naming a stage beyond the new depth dropped; token ids inside the
    vocabulary; a head width or vocabulary the family leaves ``None`` given; with ``mrope``
    (the family's modeling reads ``mrope_section``, its default sized for a large head) the
    sections of multimodal RoPE given for the small head."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "rope_parameters" and (
                "model_type" in v or any(n in v for n in SMALL)):
            v = _shrink(v, mrope)     # a sub-config (DBRX's attn_config, a layer's overrides)
        elif k in SMALL and _is_int(v):
            v = SMALL[k]
        elif isinstance(k, str) and k.endswith("_num_key_value_heads") and _is_int(v) and v > 2:
            v = 2               # Dia's cross_, Inkling's swa_num_key_value_heads (16 over 4)
        elif k in FFN and isinstance(v, list) and all(_is_int(n) for n in v):
            v = [SMALL[k]] * len(v)                 # Gemma 3n's feed-forward width per layer
        elif k in ("head_dim", "vocab_size", "num_key_value_heads") and v is None and \
                _is_int(d.get("hidden_size")):
            v = SMALL[k]      # Ministral's, ESM's, Nemotron's None reach arithmetic (32 / 4 heads)
        elif k.endswith("_token_id") and _is_int(v) and v >= VOCAB:
            v = 1
        elif k == "rope_parameters" and isinstance(v, dict) and ("mrope_section" in v or (
                mrope and "rope_type" in v)):       # not one dict per layer type (NeoMME's)
            # multimodal RoPE: sections of the head's r/2 = 4 frequencies (Qwen2-VL's default
            # [16, 24, 24], GLM-4V's [8, 12, 12]); 2 with partial rotary 0.5 (GLM-4V-MoE)
            n = int(SMALL["head_dim"] * v.get("partial_rotary_factor", 1.0)) // 2
            v = {**v, "mrope_section": [n - 2 * (n // 4), n // 4, n // 4] if n >= 4 else [1, 1, 0]}
        out[k] = v
    _cut_layers(d, out)
    _stages(out)
    return out


def _layer_index(k) -> int | None:
    """A per-layer dict's key as a layer index (``"05"`` -> 5), else None."""
    return int(k) if _is_int(k) or (isinstance(k, str) and k.isdigit()) else None


def _cut_layers(d: dict, out: dict) -> None:
    """Every per-layer list (its length the family's depth) and per-layer dict (keyed by
    layer index, Gemma 4's ``per_layer_config``) of ``out`` cut to the new depth, all at the
    same layers: the first layer of each kind, a kind being what the lists and the dict say
    of a layer together (Gemma 4's full-attention layers are the ones with a wider head), then
    the next layers up to the new depth. A list of layer indices (every layer its own KV
    source) becomes ``0 .. depth - 1``."""
    key = next((n for n in LAYERS if _is_int(d.get(n))), None)
    if key is None or not _is_int(out.get(key)) or d[key] <= out[key] or \
            isinstance(out.get("depths"), list):         # Swin's num_layers: its stages
        return
    depth0, depth = d[key], out[key]

    def indices(v):             # layer ids of another model (EAGLE-3's target_layer_ids)
        return all(_is_int(i) for i in v) and all(a < b for a, b in zip(v, v[1:], strict=False))
    lists = [k for k, v in out.items() if isinstance(v, list) and len(v) == depth0 and
             (not indices(v) or v == list(range(depth0)))]
    dicts = [k for k, v in out.items() if isinstance(v, dict) and v and all(
        _layer_index(i) is not None and _layer_index(i) < depth0 and isinstance(c, dict)
        for i, c in v.items())]
    ranges = [k for k in lists if out[k] == list(range(depth0))]
    lists = [k for k in lists if k not in ranges]
    if not lists and not dicts and not ranges:
        return
    per_layer = [{_layer_index(i): c for i, c in out[k].items()} for k in dicts]

    def kind(i):
        return tuple(repr(out[k][i]) for k in lists) + tuple(repr(p.get(i)) for p in per_layer)
    keep = list({kind(i): i for i in reversed(range(depth0))}.values())[::-1]   # first of each
    keep = sorted(keep + [i for i in range(depth0) if i not in keep][:max(depth - len(keep), 0)])
    if len(keep) > depth:      # more kinds than layers: one layer of each (a deeper model)
        for n in LAYERS:
            if out.get(n) == depth:
                out[n] = len(keep)
    heads = next((d[n] for n in HEADS if _is_int(d.get(n))), None)
    for k in lists:
        out[k] = [out[k][i] for i in keep]
        if "heads" in k and heads and all(_is_int(h) for h in out[k]):    # per-layer heads:
            out[k] = [4 if h >= heads else 2 for h in out[k]]     # all of them, or fewer (GQA)
    for k in ranges:
        out[k] = list(range(len(keep)))
    for k, p in zip(dicts, per_layer, strict=True):
        width = max(len(str(i)) for i in out[k])
        out[k] = {str(j).zfill(width): _shrink(p[i]) for j, i in enumerate(keep) if i in p}


def _stages(out: dict) -> None:
    """Per-stage lists of a hierarchical vision model (Swin V2's heads ``[3, 6, 12, 24]``,
    depths ``[2, 2, 6, 2]``): 4 heads and at most 2 blocks a stage; a backbone's
    ``out_features``/``out_indices`` naming a stage beyond the new depth dropped (the last
    stage then, transformers' default)."""
    for k in HEADS:
        if isinstance(out.get(k), list) and all(_is_int(h) for h in out[k]):
            out[k] = [SMALL[k]] * len(out[k])
    if isinstance(out.get("depths"), list) and all(_is_int(n) for n in out["depths"]):
        out["depths"] = [min(n, 2) for n in out["depths"]]
    stages = len(out["depths"]) if isinstance(out.get("depths"), list) else \
        next((out[n] for n in LAYERS if _is_int(out.get(n))), None)
    names = out.get("out_features")
    if stages is not None and isinstance(names, list) and any(
            not n.startswith("stage") or not n[5:].isdigit() or int(n[5:]) > stages
            for n in names):
        out["out_features"] = out["out_indices"] = None
        if isinstance(out.get("stage_names"), list) and len(out["stage_names"]) != stages + 1:
            out["stage_names"] = None


def _narrow(d: dict) -> dict:
    """The second shrink of a config still over :data:`CAP` parameters after :func:`_shrink`
    (recursively, into every dict): each remaining width over 64 a name says is a width
    (:data:`NARROW`: an entity vocabulary, a latent width, a projector's output) made 32, a
    feed-forward width 64, a head width 8; a per-stage list of widths divided by a power of
    two (its ratios, and its multiples of 4 heads, kept) to at most 64; a per-stage list of
    depths at most 2 a stage."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            v = _narrow(v)
        elif isinstance(k, str) and re.search(NARROW, k) and not re.search(NOT_NARROW, k):
            if _is_int(v) and v > 64:
                v = 8 if "head_dim" in k else 64 if re.search("interm|ffn|mlp|inner", k) \
                    else VOCAB if "vocab" in k else 32
            elif isinstance(v, list) and v and all(_is_int(x) and x > 0 for x in v):
                while max(v) > 64 and all(x % 8 == 0 for x in v):
                    v = [x // 2 for x in v]
        elif isinstance(k, str) and re.search(r"(depths?|repeats)$", k) and \
                isinstance(v, list) and v and all(_is_int(x) for x in v):
            v = [min(x, 2) for x in v]
        elif k in FFN and v == SMALL[k]:
            v = 64                                             # even (Moshi's gated one)
        elif k not in HEADS and isinstance(k, str) and _is_int(v) and v > 4 and re.search(
                r"num_(attention_)?heads$", k):
            v = 4                      # a prefixed count (V-JEPA 2's pred_num_attention_heads)
        elif k not in LAYERS and isinstance(k, str) and _is_int(v) and v > 2 and \
                re.search(r"num_(hidden_)?layers$", k):
            v = 2
        elif isinstance(k, str) and k.endswith("_coefficient") and isinstance(v, float):
            v = 1.0                    # EfficientNet's width and depth multipliers
        out[k] = v
    return out


def _merge(d: dict, override: dict) -> dict:
    """``d`` with ``override``'s keys set, a sub-config's inside it (a dict merged)."""
    return {**d, **{k: _merge(d[k], v) if isinstance(v, dict) and isinstance(d.get(k), dict)
                    else v for k, v in override.items()}}


def _reads_mrope(cfg) -> bool:
    """Whether the family's modeling, or a sub-config's, reads ``mrope_section`` (GLM-4.6V's
    text model is GLM-4V's, built by ``AutoModel``: its own modeling does not)."""
    for c in (cfg, *(getattr(cfg, k, None) for k in getattr(cfg, "sub_configs", {}) or {})):
        name = type(c).__module__.replace(".configuration_", ".modeling_")
        try:
            if "mrope_section" in inspect.getsource(sys.modules.get(name)
                                                    or importlib.import_module(name)):
                return True
        except (ImportError, OSError, TypeError):
            continue
    return False


def tiny_config(model_type: str, narrow: bool = False):
    """The family's default config, shrunk (:func:`_shrink`, and :func:`_narrow` with
    ``narrow``; :data:`OVERRIDES`), built again from its dict."""
    tf = import_optional("transformers", "attention_np.interop.transformers.sweep")
    cfg = tf.AutoConfig.for_model(model_type)
    small = _shrink(cfg.to_dict(), _reads_mrope(cfg))
    small = _merge(_narrow(small) if narrow else small, OVERRIDES.get(model_type, {}))
    small.pop("transformers_version", None)
    return type(cfg).from_dict(small)


@dataclass
class SweepRow:
    """One model class: its ``model_type``, class, verdict, largest error, reason or layers."""

    family: str
    model: str
    verdict: str
    max_error: float = float("nan")
    reason: str = ""

    @property
    def false_verdict(self) -> bool:
        return self.verdict in ("MISMATCH", "not caught", "error")


def build(model_type: str, seed: int = 0):
    """A tiny random ``AutoModel`` of ``model_type`` in eval mode (float32 as built); weights
    redrawn from N(0, 0.3^2) as in :mod:`~attention_np.interop.transformers.family_cases`."""
    tf = import_optional("transformers", "attention_np.interop.transformers.sweep")
    torch = import_optional("torch", "attention_np.interop.transformers.sweep")
    def size(cfg):
        with torch.device("meta"):
            return sum(p.numel() for p in tf.AutoModel.from_config(cfg).parameters())
    try:
        cfg = tiny_config(model_type)
        fits = size(cfg) <= CAP
    except Exception:                           # noqa: BLE001  (a validator: a width the
        fits = False                            # names above miss must equal one they set)
    if not fits:                                # or over the cap: every width by its name
        try:
            cfg = tiny_config(model_type, narrow=True)
            n = size(cfg)
        except ImportError:                     # a missing library (timm, natten), named
            raise
        except Exception as e:
            try:
                size(tf.AutoConfig.for_model(model_type))
            except Exception:                   # noqa: BLE001
                raise ValueError(f"transformers' own default config does not build either: "
                                 f"{_one_line(e)}") from e
            raise
        if n > CAP:
            raise ValueError(f"the shrunk config still has {n} parameters")
    model = tf.AutoModel.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model.eval()


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


def _text_inputs(model) -> dict | None:
    """``input_ids`` (and a mask of ones) for a text model whose forward takes them, else None."""
    import torch
    if getattr(model, "main_input_name", None) != "input_ids" or \
            getattr(model.config, "is_encoder_decoder", False):
        return None
    names = inspect.signature(model.forward).parameters
    if "input_ids" not in names:                  # a tower alone (BLIP-2's Q-Former, SmolVLM's)
        return None
    rng = np.random.default_rng(0)
    inputs = {"input_ids": torch.from_numpy(rng.integers(3, VOCAB, (B, L)))}
    if "attention_mask" in names:
        inputs["attention_mask"] = torch.ones((B, L), dtype=torch.long)
    return inputs


def _runs(model, inputs, rest=None) -> str | None:
    """None if the model runs on ``inputs`` (before any diff; a copy, its experts run as the
    diff runs them), else the exception's type: CLIP also needs pixel_values, X-MOD a
    language, LayoutLMv3 boxes. With ``rest``: ``inputs`` as a prompt (``use_cache=True``),
    then ``rest`` on the cache it filled."""
    import copy

    import torch

    from attention_np.interop.transformers.recent import float64_experts
    try:
        work = copy.deepcopy(model)
        float64_experts(work)
        with torch.no_grad():
            out = work(**inputs, **({} if rest is None else {"use_cache": True}))
            cache = getattr(out, "past_key_values", None)
            if rest is not None and cache is not None:
                takes = inspect.signature(work.forward).parameters
                work(**rest, use_cache=True,
                     **{"cache" if "cache" in takes else "past_key_values": cache})
    except Exception as e:                                         # noqa: BLE001
        return type(e).__name__
    return None


def _change(module):
    """A forward hook adding :data:`CHANGE` to a layer's output (its first element)."""
    def hook(mod, args, output):
        if isinstance(output, (tuple, list)):                 # (GPT-1's layer: a list)
            return type(output)([output[0] + CHANGE, *output[1:]])
        return output + CHANGE
    return module.register_forward_hook(hook)


def _only_the_change(checks) -> bool:
    """Whether the only disagreement among ``checks`` is the output, off by :data:`CHANGE`
    (within the output's tolerance): the layer agrees but for the change, which is caught."""
    bad = [c for c in checks if not c.ok]
    return [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol


def _run_changed(model, inputs, layer, prompt=None):
    from attention_np.interop.transformers.model_diff import compare_transformers_model
    handle = _change(layer)
    try:
        return compare_transformers_model(model, prompt=prompt, **inputs)
    finally:
        handle.remove()


def decoder(model, found) -> str | None:
    """None if ``model`` may be a decoder whose forward continues from a cache (it takes a
    cache and ``use_cache``, no attention layer read is cross-attention), else why not. (One
    whose prompt leaves no cache, an encoder, is found by running it: :func:`_diff_model`.)"""
    params = inspect.signature(model.forward).parameters
    if getattr(model.config, "is_encoder_decoder", False):
        return "an encoder-decoder (its cache: EncoderDecoderCache)"
    if not any(n in params for n in ("cache", "past_key_values")) or "use_cache" not in params:
        return f"{type(model).__name__}.forward takes no cache"
    if any(spec.cross for _, _, spec in found):
        return "a cross-attention layer"
    return None


def _split(inputs: dict) -> tuple:
    """``(prompt, inputs)``: the first ``L - CACHED_NEW`` tokens as the prompt, the last
    :data:`CACHED_NEW` continuing from its cache (the mask of all ``L``)."""
    prompt = {k: v[:, :-CACHED_NEW] for k, v in inputs.items()}
    rest = {k: (v if k == "attention_mask" else v[:, -CACHED_NEW:]) for k, v in inputs.items()}
    return prompt, rest


def _diff_model(model, inputs, found, cached: bool = False) -> tuple:
    """One whole-model diff with :data:`CHANGE` added to the first attention layer's output
    that runs: every layer is replayed on its recorded inputs, so that layer alone may
    disagree, and only by the change (one run shows both the agreement and the change
    caught). The layers the input never runs (a vision or audio tower, given text) are diffed
    one by one (:func:`_diff_layers`): an AGREE covers only what was compared. With
    ``cached``: the prompt, then :data:`CACHED_NEW` tokens continuing from its cache
    (``prompt=``): every call of the changed layer must differ by the change alone, and every
    cached keys and values row agree."""
    first = found[0]
    prompt = None
    if cached:
        prompt, inputs = _split(inputs)
    report = _run_changed(model, inputs, first[1], prompt)
    if cached and (any(n == "forward" for n, _ in report.refused) or not report.refused and
                   not any(r.kind == "cache" for r in report.layers)):
        why = next((w for n, w in report.refused if n == "forward"),
                   "its layers' second calls continued from no cache")
        return "skipped", float("nan"), f"no cached mode: {why}"
    not_run = {n for n, _ in report.not_run}
    if first[0] in not_run:
        ran = [f for f in found if f[0] not in not_run]
        if not ran:                                    # nothing ran: each class alone
            return _diff_layers(found)
        first = ran[0]
        report = _run_changed(model, inputs, first[1], prompt)
    if report.refused and not [r for r in report.layers if not r.ok]:
        return "refused", float("nan"), "; ".join(f"{n}: {w}" for n, w in report.refused[:2])
    rows = report.attention
    changed = [r for r in rows if r.name.split("#")[0] == first[0]]
    others = [r for r in report.layers if r not in changed]
    err = max((r.forward_error for r in others if r.kind == "attention"), default=float("nan"))
    bad = next((r for r in others if not r.ok), None)
    if bad is not None:
        return "MISMATCH", err, f"{bad.name}: " + ", ".join(
            f"{c.name} {c.err:.1e}" for c in bad.checks if not c.ok)[:200]
    off = next((r for r in changed if not r.ok and not _only_the_change(r.checks)), None)
    if off is not None:                # off by more than the change: a MISMATCH of its own
        return "MISMATCH", err, f"{off.name}: " + ", ".join(
            f"{c.name} {c.err:.1e}" for c in off.checks if not c.ok)[:200]
    if not changed or not all(_only_the_change(r.checks) for r in changed):
        return "not caught", err, f"+{CHANGE:g} on {first[0]}: {report.verdict}"
    why = f"{len(rows)} layer calls (whole model); +{CHANGE:g} caught at {changed[0].name}"
    if cached:
        why = f"{len(rows)} layer calls (prompt, then {CACHED_NEW} tokens on its cache), " \
              f"{sum(r.kind == 'cache' for r in report.layers)} cache rows; +{CHANGE:g} caught " \
              f"at {', '.join(r.name for r in changed)}"
    if not not_run:
        return "AGREE", err, why
    verdict, layer_err, layers_why = _diff_layers([f for f in found if f[0] in not_run])
    return verdict, np.nanmax([err, layer_err]), f"{why}; not run by text input ids, " \
                                                 f"{layers_why}"


def _diff_layers(found) -> tuple:
    """Each attention class's first layer alone, with :data:`CHANGE` added to its output."""
    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    from attention_np.interop.transformers.layer_reading import UnsupportedLayer, params_from_transformers
    from attention_np.interop.transformers.recent import EAGER_FLOAT64
    seen, names, errs = set(), [], []
    for name, module, spec in found:
        if type(module) in seen:
            continue
        seen.add(type(module))
        params = params_from_transformers(module)[0]
        d_model, d_kv = params["W_q"].shape[0], params["W_k"].shape[0]    # (Dia: encoder width)
        x = np.random.default_rng(1).standard_normal((B, L, d_model))
        kv = np.random.default_rng(2).standard_normal((B, L + 1, d_kv)) if spec.cross else None
        if spec.grid_table is not None:          # its table's grid (and class token), or window
            H, W, cls = spec.grid_table
            x = np.random.default_rng(1).standard_normal((B, H * W + cls, d_model))
        handle = _change(module)
        try:
            # sdpa drops the sinks; eager's softmax is float32 (the soft-cap: ours in float64)
            own = getattr(getattr(module, "config", None), "_attn_implementation", None)
            interface = "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(type(module).forward)
            impl = "eager" if spec.sinks else EAGER_FLOAT64 if spec.softcap is not None or \
                (own == "eager" and interface and spec.buckets is None) else None   # T5's
            # bias goes to the interface as position_bias, which the float64 eager leaves out
            r = compare_transformers_attention(module, x, key_value_states=kv,
                                               attn_implementation=impl)
        except UnsupportedLayer as e:
            return "refused", float("nan"), f"{name}: {e}"
        finally:
            handle.remove()
        if not _only_the_change(r.checks):
            bad = ", ".join(f"{c.name} {c.err:.1e}" for c in r.checks if not c.ok)
            return ("not caught" if r.ok else "MISMATCH"), float("nan"), f"{name}: {bad}"[:200]
        names.append(type(module).__name__)
        errs.append(max(c.err for c in r.checks if c.name != "out"))     # the gradients
    return "AGREE", max(errs), f"{len(names)} layer kind(s) one by one " \
                                  f"({', '.join(names)}); +{CHANGE:g} caught in each"


def sweep_one(model_type: str, seed: int = 0, cached: bool = False) -> SweepRow:
    """Build and diff one family; every failure becomes the row's verdict, none escapes.

    ``cached``: a decoder (:func:`decoder`) continuing from a filled cache (:func:`_diff_model`);
    any other model is ``"skipped"``, the reason said."""
    from attention_np.interop.transformers.model_diff import attention_layers
    quiet = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(quiet):
        warnings.simplefilter("ignore")
        try:
            model = build(model_type, seed)
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, "-", "skipped", reason=f"tiny model not built: "
                                                               f"{_one_line(e)}")
        cls = type(model).__name__
        try:
            found, refused = attention_layers(model)
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, cls, "error", reason=f"reading the layers: "
                                                             f"{_one_line(e)}")
        if not found and not refused:
            return SweepRow(model_type, cls, "no attention")
        if refused and not found:
            n, why = refused[0]
            return SweepRow(model_type, cls, "refused", reason=f"{n}: {why}")
        try:
            inputs = _text_inputs(model)
            own = None if inputs is None else _runs(model, inputs)
            why_not = "not a text model run on input ids" if inputs is None or own else \
                decoder(model, found)
            if cached and not why_not:
                why_not = _runs(model, *_split(inputs))
                why_not = why_not and f"the model does not run continuing from its cache ({why_not})"
            if cached and why_not:
                return SweepRow(model_type, cls, "skipped", reason=f"no cached mode: {why_not}")
            if cached:
                verdict, err, why = _diff_model(model, inputs, found, cached=True)
            elif inputs is not None and own is None:
                verdict, err, why = _diff_model(model, inputs, found)
            else:
                verdict, err, why = _diff_layers(found)
                if own is not None:
                    why = f"the model does not run on input ids alone ({own}): {why}"
            if verdict == "AGREE" and refused:
                verdict, why = "refused", f"{refused[0][0]}: {refused[0][1]}"
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, cls, "error", reason=_one_line(e))
    return SweepRow(model_type, cls, verdict, err, why)


def model_types() -> list:
    """Every ``model_type`` of transformers' ``AutoModel`` mapping, sorted."""
    import_optional("transformers", "attention_np.interop.transformers.sweep")
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    return sorted(MODEL_MAPPING_NAMES)


def _worker_init() -> None:
    """A sweep worker: one torch thread (the workers share the cores), transformers quiet."""
    import torch
    import transformers
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


def sweep(types=None, seed: int = 0, workers: int | None = None, cached: bool = False) -> list:
    """:func:`sweep_one` for each of ``types`` (default: :func:`model_types`), in order
    (``cached``: each decoder continuing from a filled cache).

    ``workers`` processes (default: one per core, ``os.cpu_count()``) each diff one family at a
    time with one torch thread; ``workers=1`` runs them here, one after another. The rows do
    not depend on it: each family is built from its seed in whichever process runs it."""
    import os
    types = model_types() if types is None else list(types)
    workers = os.cpu_count() or 1 if workers is None else workers
    if workers <= 1 or len(types) <= 1:
        _worker_init()
        return [sweep_one(t, seed, cached) for t in types]
    import concurrent.futures
    import functools
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init) as pool:
        return list(pool.map(functools.partial(sweep_one, seed=seed, cached=cached), types,
                             chunksize=1))


VERDICTS = ("AGREE", "refused", "skipped", "no attention", "MISMATCH", "not caught", "error")


def counts(rows) -> dict:
    """How many rows have each verdict (every key of :data:`VERDICTS`)."""
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def counts_line(rows) -> str:
    """The sentence the README carries (tests/interop/test_transformers_sweep.py keeps them equal)."""
    c = counts(rows)
    return (f"{len(rows)} model classes: {c['AGREE']} agree (a 1e-6 change caught in each), "
            f"{c['refused']} refused by name, {c['MISMATCH']} mismatch, {c['not caught']} "
            f"change not caught, {c['error']} errors, {c['skipped']} skipped (no tiny model), "
            f"{c['no attention']} without an attention layer")


def markdown(rows, version: str) -> str:
    """docs/transformers_sweep.md: the counts and one table row per model class."""
    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")
    lines = [
        "# Every transformers model class, diffed",
        "",
        f"Generated by `python -m attention_np.interop.transformers.sweep docs/transformers_sweep.md`"
        f" with transformers {version}; `tests/interop/test_transformers_sweep.py` runs the sweep again "
        "and holds this table (family, model, verdict, reason) and the README's counts to it.",
        "A tiny random model of each `model_type` of transformers' `AutoModel` mapping "
        "(widths 32, 4 heads, 2 layers or one of each kind of layer, vocabulary 99, under 5M "
        "parameters; no download) is diffed in float64 with "
        "1e-6 added to its first attention layer's output on the torch side: AGREE means every "
        "other row agrees and that layer differs by exactly the change (a text model whole, with "
        "`compare_transformers_model`, and the layers its input ids never run, a vision or audio "
        "tower, one layer of each attention class; any other model, or a text model that does "
        "not run on input ids alone, one layer of each attention class, with "
        "`compare_transformers_attention`: the row says which). An AGREE covers only layers "
        "that ran and were compared. MISMATCH, `not caught` and `error` are open bugs "
        "of attention_np's reader, listed as they are. max error: the largest output error of "
        "the unchanged layers (whole model) or the largest gradient error (layer by layer). "
        "The sweep runs one worker process per core (`sweep(workers=...)`).",
        "",
        f"**{counts_line(rows)}.**",
        "",
        "| family | model | verdict | max error | reason or layers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        err = "" if np.isnan(r.max_error) else f"{r.max_error:.0e}"
        lines.append(f"| {cell(r.family)} | {cell(r.model)} | {r.verdict} | {err} | "
                     f"{cell(r.reason)} |")
    return "\n".join(lines) + "\n"


def read_table(text: str) -> list:
    """``[(family, model, verdict, reason)]`` from :func:`markdown`'s table."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith(("| family", "| ---")):
            continue
        cells = [c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")]
        rows.append((cells[0], cells[1], cells[2], cells[4] if len(cells) > 4 else ""))
    return rows


if __name__ == "__main__":          # python -m attention_np.interop.transformers.sweep OUT.md
    import sys

    import transformers
    result = sweep()
    with open(sys.argv[1], "w") as f:
        f.write(markdown(result, transformers.__version__))
    print(counts_line(result))
