"""A tiny random model of every transformers family, from its default config (no download).

:func:`tiny_config` shrinks the family's default config: widths 32, 4 heads, 2 key/value heads, 2
layers, feed-forward 37, vocabulary 99, every sub-config likewise (:func:`_shrink`, its rules
:data:`SHRINK`); per-layer lists and dicts cut to the new depth at the same layers, one of each
kind kept (:func:`_cut_layers`); per-stage lists made small (:func:`_stages`); a config still over
:data:`CAP` parameters shrunk again by the names of its widths (:func:`_narrow`, its rules
:data:`NARROWER`); and the families that need more, each for the reason given (:data:`OVERRIDES`).
:func:`build` makes the model with random weights. The sweep
(:mod:`~attention_np.interop.transformers.sweep`) diffs what these build.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

from attention_np._checks import is_integer
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


def is_config_int(v) -> bool:
    return isinstance(v, int) and is_integer(v)           # a config's int: Python's, not a bool


def is_config_ints(v) -> bool:
    return isinstance(v, list) and all(is_config_int(n) for n in v)


def _shrink(d: dict, mrope: bool = False) -> dict:
    """A config dict with every width, head count, depth, vocabulary made small (recursively
    into sub-configs, with or without a ``model_type``); per-layer lists and dicts cut to the
    new depth (:func:`_cut_layers`); per-stage lists of heads and depths (:func:`_stages`);
    backbone outputs naming a stage beyond the new depth dropped; token ids inside the
    vocabulary; a head width or vocabulary the family leaves ``None`` given; with ``mrope``
    (the family's modeling reads ``mrope_section``, its default sized for a large head) the
    sections of multimodal RoPE given for the small head. Each entry's rule is the first of
    :data:`SHRINK` that matches it."""
    out = {}
    for k, v in d.items():
        rule = next((small for _, matches, small in SHRINK if matches(k, v, d, mrope)), None)
        out[k] = v if rule is None else rule(k, v, d, mrope)
    _cut_layers(d, out)
    _stages(out)
    return out


def _sub_config(k, v, d, mrope) -> bool:
    return isinstance(v, dict) and k != "rope_parameters" and (
        "model_type" in v or any(n in v for n in SMALL))


def _mrope_parameters(k, v, d, mrope) -> bool:
    """Multimodal RoPE's parameters (not one dict per layer type, NeoMME's)."""
    return k == "rope_parameters" and isinstance(v, dict) and (
        "mrope_section" in v or (mrope and "rope_type" in v))


def _mrope_sections(k, v, d, mrope) -> dict:
    """Sections of the head's r/2 = 4 frequencies (Qwen2-VL's default [16, 24, 24], GLM-4V's
    [8, 12, 12]); 2 with partial rotary 0.5 (GLM-4V-MoE)."""
    n = int(SMALL["head_dim"] * v.get("partial_rotary_factor", 1.0)) // 2
    return {**v, "mrope_section": [n - 2 * (n // 4), n // 4, n // 4] if n >= 4 else [1, 1, 0]}


# (what, matches(k, v, d, mrope), small(k, v, d, mrope)): _shrink's rules, the first that matches
SHRINK = (
    ("a sub-config (DBRX's attn_config, a layer's overrides)", _sub_config,
     lambda k, v, d, mrope: _shrink(v, mrope)),
    ("a width, head count, depth or vocabulary", lambda k, v, d, mrope: k in SMALL and is_config_int(v),
     lambda k, v, d, mrope: SMALL[k]),
    ("a prefixed key/value head count (Dia's cross_, Inkling's swa_: 16 over 4)",
     lambda k, v, d, mrope: isinstance(k, str) and k.endswith("_num_key_value_heads") and is_config_int(v)
     and v > 2, lambda k, v, d, mrope: 2),
    ("a feed-forward width per layer (Gemma 3n's)", lambda k, v, d, mrope: k in FFN and is_config_ints(v),
     lambda k, v, d, mrope: [SMALL[k]] * len(v)),
    ("a head width, vocabulary or key/value head count left None (Ministral's, ESM's, Nemotron's "
     "reach arithmetic: 32 / 4 heads)",
     lambda k, v, d, mrope: k in ("head_dim", "vocab_size", "num_key_value_heads") and v is None
     and is_config_int(d.get("hidden_size")), lambda k, v, d, mrope: SMALL[k]),
    ("a token id beyond the vocabulary", lambda k, v, d, mrope: isinstance(k, str)
     and k.endswith("_token_id") and is_config_int(v) and v >= VOCAB, lambda k, v, d, mrope: 1),
    ("multimodal RoPE's sections", _mrope_parameters, _mrope_sections),
)


def _layer_index(k) -> int | None:
    """A per-layer dict's key as a layer index (``"05"`` -> 5), else None."""
    return int(k) if is_config_int(k) or (isinstance(k, str) and k.isdigit()) else None


def _cut_layers(d: dict, out: dict) -> None:
    """Every per-layer list (its length the family's depth) and per-layer dict (keyed by
    layer index, Gemma 4's ``per_layer_config``) of ``out`` cut to the new depth, all at the
    same layers: the first layer of each kind, a kind being what the lists and the dict say
    of a layer together (Gemma 4's full-attention layers are the ones with a wider head), then
    the next layers up to the new depth. A list of layer indices (every layer its own KV
    source) becomes ``0 .. depth - 1``."""
    depth0, depth = _depths(d, out)
    lists, ranges, dicts = _per_layer_entries(out, depth0) if depth < depth0 else ([], [], [])
    if not lists and not dicts and not ranges:
        return
    per_layer = [{_layer_index(i): c for i, c in out[k].items()} for k in dicts]
    keep = _kept_layers([out[k] for k in lists], per_layer, depth0, depth)
    if len(keep) > depth:      # more kinds than layers: one layer of each (a deeper model)
        out.update({n: len(keep) for n in LAYERS if out.get(n) == depth})
    heads = next((d[n] for n in HEADS if is_config_int(d.get(n))), None)
    for k in lists:
        out[k] = _cut_list(k, out[k], keep, heads)
    out.update({k: list(range(len(keep))) for k in ranges})
    for k, p in zip(dicts, per_layer, strict=True):
        width = max(len(str(i)) for i in out[k])
        out[k] = {str(j).zfill(width): _shrink(p[i]) for j, i in enumerate(keep) if i in p}


def _depths(d: dict, out: dict) -> tuple:
    """The family's depth and the shrunk one, ``(0, 0)`` when there is no depth to cut (none
    named, or Swin's num_layers: its stages, cut by :func:`_stages`)."""
    key = next((n for n in LAYERS if is_config_int(d.get(n))), None)
    if key is None or not is_config_int(out.get(key)) or isinstance(out.get("depths"), list):
        return 0, 0
    return d[key], out[key]


def _cut_list(k: str, v: list, keep: list, heads) -> list:
    """A per-layer list at the kept layers; a per-layer head count all the heads or fewer (GQA)."""
    v = [v[i] for i in keep]
    if "heads" in k and heads and is_config_ints(v):
        v = [4 if h >= heads else 2 for h in v]
    return v


def _layer_ids(v: list) -> bool:
    """Increasing ints: layer ids of another model (EAGLE-3's target_layer_ids)."""
    return is_config_ints(v) and all(a < b for a, b in zip(v, v[1:], strict=False))


def _per_layer_dict(v, depth0: int) -> bool:
    return isinstance(v, dict) and bool(v) and all(
        _layer_index(i) is not None and _layer_index(i) < depth0 and isinstance(c, dict)
        for i, c in v.items())


def _per_layer_entries(out: dict, depth0: int) -> tuple:
    """The keys of ``out`` that are per layer of a ``depth0``-layer model: ``(lists, ranges,
    dicts)``, a range being the list ``0 .. depth0 - 1`` (every layer its own KV source)."""
    lists = [k for k, v in out.items() if isinstance(v, list) and len(v) == depth0 and
             (not _layer_ids(v) or v == list(range(depth0)))]
    ranges = [k for k in lists if out[k] == list(range(depth0))]
    dicts = [k for k, v in out.items() if _per_layer_dict(v, depth0)]
    return [k for k in lists if k not in ranges], ranges, dicts


def _kept_layers(lists: list, per_layer: list, depth0: int, depth: int) -> list:
    """The layers kept: the first of each kind (what ``lists`` and the dicts ``per_layer`` say
    of a layer together), then the next ones up to ``depth``, in order."""
    def kind(i):
        return tuple(repr(v[i]) for v in lists) + tuple(repr(p.get(i)) for p in per_layer)
    keep = list({kind(i): i for i in reversed(range(depth0))}.values())[::-1]   # first of each
    return sorted(keep + [i for i in range(depth0) if i not in keep][:max(depth - len(keep), 0)])


def _stages(out: dict) -> None:
    """Per-stage lists of a hierarchical vision model (Swin V2's heads ``[3, 6, 12, 24]``,
    depths ``[2, 2, 6, 2]``): 4 heads and at most 2 blocks a stage; a backbone's
    ``out_features``/``out_indices`` naming a stage beyond the new depth dropped (the last
    stage then, transformers' default)."""
    for k in HEADS:
        if is_config_ints(out.get(k)):
            out[k] = [SMALL[k]] * len(out[k])
    if is_config_ints(out.get("depths")):
        out["depths"] = [min(n, 2) for n in out["depths"]]
    stages = len(out["depths"]) if isinstance(out.get("depths"), list) else \
        next((out[n] for n in LAYERS if is_config_int(out.get(n))), None)
    if stages is not None and _names_beyond(out.get("out_features"), stages):
        out["out_features"] = out["out_indices"] = None
        if isinstance(out.get("stage_names"), list) and len(out["stage_names"]) != stages + 1:
            out["stage_names"] = None


def _names_beyond(names, stages: int) -> bool:
    """Whether a backbone's ``out_features`` name something other than ``stage1 .. stage<stages>``."""
    return isinstance(names, list) and any(
        not n.startswith("stage") or not n[5:].isdigit() or int(n[5:]) > stages for n in names)


def _narrow(d: dict) -> dict:
    """The second shrink of a config still over :data:`CAP` parameters after :func:`_shrink`
    (recursively, into every dict): each remaining width over 64 a name says is a width
    (:data:`NARROW`: an entity vocabulary, a latent width, a projector's output) made 32, a
    feed-forward width 64, a head width 8; a per-stage list of widths divided by a power of
    two (its ratios, and its multiples of 4 heads, kept) to at most 64; a per-stage list of
    depths at most 2 a stage."""
    out = {}
    for k, v in d.items():
        rule = next((narrow for _, matches, narrow in NARROWER if matches(k, v)), None)
        out[k] = v if rule is None else rule(k, v)
    return out


def _named_width(k, v) -> bool:
    return isinstance(k, str) and bool(re.search(NARROW, k)) and not re.search(NOT_NARROW, k)


def _narrow_width(k, v):
    """A width over 64 made 32 (a head width 8, a feed-forward width 64, a vocabulary VOCAB);
    a per-stage list of widths halved while over 64 and all multiples of 8."""
    if is_config_int(v) and v > 64:
        return 8 if "head_dim" in k else 64 if re.search("interm|ffn|mlp|inner", k) \
            else VOCAB if "vocab" in k else 32
    if isinstance(v, list) and v and all(is_config_int(x) and x > 0 for x in v):
        while max(v) > 64 and all(x % 8 == 0 for x in v):
            v = [x // 2 for x in v]
    return v


def _named(pattern: str):
    """A predicate: the key is a string matching ``pattern`` and the value an int over ``low``."""
    def matches(k, v, low: int) -> bool:
        return isinstance(k, str) and is_config_int(v) and v > low and bool(re.search(pattern, k))
    return matches


_PREFIXED_HEADS, _PREFIXED_LAYERS = _named(r"num_(attention_)?heads$"), _named(r"num_(hidden_)?layers$")

# (what, matches(k, v), narrow(k, v)): _narrow's rules, the first that matches
NARROWER = (
    ("a sub-config", lambda k, v: isinstance(v, dict), lambda k, v: _narrow(v)),
    ("a width a name says is one (NARROW)", _named_width, _narrow_width),
    ("a per-stage list of depths", lambda k, v: isinstance(k, str) and bool(re.search(
        r"(depths?|repeats)$", k)) and isinstance(v, list) and bool(v) and is_config_ints(v),
     lambda k, v: [min(x, 2) for x in v]),
    ("a feed-forward width, even (Moshi's gated one)", lambda k, v: k in FFN and v == SMALL[k],
     lambda k, v: 64),
    ("a prefixed head count (V-JEPA 2's pred_num_attention_heads)",
     lambda k, v: k not in HEADS and _PREFIXED_HEADS(k, v, 4), lambda k, v: 4),
    ("a prefixed depth", lambda k, v: k not in LAYERS and _PREFIXED_LAYERS(k, v, 2), lambda k, v: 2),
    ("a width or depth multiplier (EfficientNet's)", lambda k, v: isinstance(k, str)
     and k.endswith("_coefficient") and isinstance(v, float), lambda k, v: 1.0),
)


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
    tf = import_optional("transformers", "attention_np.interop.transformers.tiny_models")
    cfg = tf.AutoConfig.for_model(model_type)
    small = _shrink(cfg.to_dict(), _reads_mrope(cfg))
    small = _merge(_narrow(small) if narrow else small, OVERRIDES.get(model_type, {}))
    small.pop("transformers_version", None)
    return type(cfg).from_dict(small)


def build(model_type: str, seed: int = 0):
    """A tiny random ``AutoModel`` of ``model_type`` in eval mode (float32 as built); weights
    redrawn from N(0, 0.3^2) as in :mod:`~attention_np.interop.transformers.family_cases`."""
    tf = import_optional("transformers", "attention_np.interop.transformers.tiny_models")
    torch = import_optional("torch", "attention_np.interop.transformers.tiny_models")
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
                                 f"{one_line(e)}") from e
            raise
        if n > CAP:
            raise ValueError(f"the shrunk config still has {n} parameters")
    model = tf.AutoModel.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model.eval()


def one_line(e: BaseException) -> str:
    """An exception as one line of at most 300 characters: its type and its words."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]
