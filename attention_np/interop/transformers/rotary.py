"""RoPE scaling types in transformers models: a config's ``rope_parameters`` as attention_np's
``scaling`` (:func:`~attention_np.variants.rope_scaling.rope_frequencies`), and the check of our
frequencies against the model's rotary embedding (its ``inv_freq`` buffer is float32).

Also transformers' ``position_embeddings`` in float64 (:func:`rope_cos_sin`) and a model's
rotary embedding made to give them (:func:`float64_rotary`). Needs ``torch`` and
``transformers`` only for :func:`rotary_embedding`.
"""

from __future__ import annotations

import importlib

import numpy as np

from attention_np.interop.tolerance import (
    EPS32,
    Check,
    check_float64,
    max_abs_error,
    reference_size,
)
from attention_np.interop.torch import to_numpy
from attention_np.variants.rope import rope_angles
from attention_np.variants.rope_scaling import ROPE_TYPES, rope_frequencies


def rope_scaling_from_config(rope: dict, cfg, name: str) -> dict | None:
    """A config's ``rope_parameters`` as :func:`rope_frequencies`' ``scaling`` (None: default),
    with the values transformers takes from elsewhere in the config filled in."""
    t = rope.get("rope_type", "default")
    if t not in ROPE_TYPES:
        raise ValueError(f"{name} uses rope_type={t!r}; the known ones are {sorted(ROPE_TYPES)}")
    partial = rope.get("partial_rotary_factor", 1.0)
    if t != "proportional" and partial != 1.0:
        raise ValueError(f"{name} has partial_rotary_factor={partial!r}: this layer rotates the "
                         f"whole head (only rope_type 'proportional' reads it)")
    if t == "default":
        return None
    required, optional = ROPE_TYPES[t]
    scaling = {k: v for k, v in rope.items() if k in required or k in optional}
    if t == "dynamic":        # transformers scales from max_position_embeddings, whatever else
        scaling["original_max_position_embeddings"] = cfg.max_position_embeddings
    if t in ("yarn", "longrope") and scaling.get("factor") is None and \
            "original_max_position_embeddings" in scaling:     # Phi-3, DeepSeek: the ratio
        scaling["factor"] = cfg.max_position_embeddings / scaling["original_max_position_embeddings"]
    if t == "yarn":
        _yarn_truncate(rope, cfg, scaling)
    return {"rope_type": t, **{k: v for k, v in scaling.items() if v is not None}}


def _yarn_truncate(rope: dict, cfg, scaling: dict) -> None:
    """YaRN's ``truncate`` in ``scaling`` as transformers reads it: ``None`` is False (its
    ``if truncate:``; only absent means True); a per-layer-type dict's (Gemma 3's, ModernBERT's)
    from the top-level ``rope_parameters`` where transformers reads it there
    (:func:`_truncate_from_top`)."""
    if "truncate" in scaling and scaling["truncate"] is None:
        scaling["truncate"] = False
    top = getattr(cfg, "rope_parameters", None)
    if isinstance(top, dict) and rope is not top and _truncate_from_top():
        scaling["truncate"] = top.get("truncate", True)


def _truncate_from_top() -> bool:
    """Whether transformers' YaRN reads ``truncate`` from ``config.rope_parameters`` itself, not
    from the layer type's dict the other parameters come from (5.24: a per-layer-type YaRN,
    Gemma 3's, truncates unless the top-level dict says otherwise)."""
    import inspect

    try:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
        source = inspect.getsource(ROPE_INIT_FUNCTIONS["yarn"])
    except (ImportError, KeyError, OSError, TypeError):
        return False
    return 'config.rope_parameters.get("truncate"' in source


# inv_freq: transformers keeps a float32 buffer (base ** (arange / d) in float32); ours is
# float64. Each entry is held to a relative error of 8 float32 ulps.
RTOL_INV_FREQ = 8 * EPS32


def check_rope_frequencies(spec, inv_freq, attention_scaling,
                           seq_len: int | None = None, name: str = "") -> list:
    """Our :func:`rope_frequencies` for ``spec`` (a
    :class:`~attention_np.interop.transformers.LayerSpec`: ``head_dim`` and
    ``attention.rope``) against a transformers rotary embedding's
    ``inv_freq`` (float32 buffer: each entry within :data:`RTOL_INV_FREQ` relative) and
    ``attention_scaling`` (a Python float: the float64 rule)."""
    rope = spec.attention.rope
    ours, factor = rope_frequencies(spec.rotated_width, theta=rope.theta, scaling=rope.scaling,
                                    seq_len=seq_len)
    theirs = np.asarray(to_numpy(inv_freq), dtype=np.float64)
    if theirs.shape != ours.shape:
        raise ValueError(f"the rotary embedding has {theirs.shape} frequencies, ours "
                         f"{ours.shape} (head_dim {spec.head_dim})")
    rel = np.abs(theirs - ours) / np.where(ours == 0, 1.0, ours)             # (d/2,)
    return [Check(f"inv_freq{name} rel", float(rel.max()), 1.0, RTOL_INV_FREQ, "float32"),
            check_float64(f"attn_factor{name}", np.array([float(attention_scaling)]),
                          np.array([factor]))]


# cos and sin of a model's rotary embedding: transformers computes the angles ``p * inv_freq``
# in float32, so an angle is off by a few float32 ulps of its size; each entry of cos and sin is
# held to 16 ulps of the largest angle (times the attention factor) from ours in float64
ULPS_ANGLE = 16


def check_position_embeddings(spec, positions, cos, sin) -> list:
    """The ``position_embeddings`` a model passed a RoPE layer, ``cos, sin`` ``(B | 1, L, r)``,
    against ours for ``positions (B, L)`` (:func:`spec_cos_sin`, float64): checks "cos" and
    "sin", each within ``ULPS_ANGLE * eps32 * max(1, max|angle|) * max(1, factor)``, the
    float32 rounding of the model's angles. A wrong ``theta``, ``inv_freq``, scaling or
    attention factor is off by far more (a 1 % change: ~1e-2 at position 1)."""
    ours = spec_cos_sin(spec, positions)                              # (B, L, r) each
    rope = spec.attention.rope
    inv_freq, factor = rope_frequencies(spec.rotated_width, theta=rope.theta, scaling=rope.scaling,
                                        seq_len=int(np.max(positions)) + 1)
    angle = float(np.max(np.abs(positions))) * float(np.max(inv_freq))
    tol = ULPS_ANGLE * EPS32 * max(1.0, angle) * max(1.0, abs(factor))
    checks = []
    names = ("sin", "cos") if spec.rope_inputs.sin_first else ("cos", "sin")
    for name, theirs, mine in ((names[0], cos, ours[0]), (names[1], sin, ours[1])):
        t = np.asarray(to_numpy(theirs), dtype=np.float64)
        if t.ndim == mine.ndim + 1 and t.shape[0] == 3:   # multimodal sections, text-only
            mine = np.broadcast_to(mine, t.shape[:1] + mine.shape)        # positions: alike
        if t.ndim == mine.ndim and t.shape[0] == 1:
            t = np.broadcast_to(t, (mine.shape[0],) + t.shape[1:])
        if t.shape != mine.shape:            # a different width or layout: no number to compare
            checks.append(Check(f"{name} shape {t.shape} != ours {mine.shape}", float("inf"),
                                1.0, tol, "float32 angles"))
            continue
        checks.append(Check(name, max_abs_error(t, mine), reference_size(mine), tol,
                            "float32 angles"))
    return checks


def rotary_embedding(module):
    """A fresh rotary embedding of a RoPE layer's family (``LlamaRotaryEmbedding``, ...), built
    from the layer's config: the module the model runs once per forward."""
    for base in type(module).__mro__:               # a subclass: its nearest base's family
        if "Attention" not in base.__name__:        # (nn.Module is no family's)
            continue
        family_module = importlib.import_module(base.__module__)
        for old in ("SelfAttention", "Attention"):  # T5Gemma: T5GemmaSelfAttention
            name = base.__name__.replace(old, "RotaryEmbedding")
            cls = getattr(family_module, name, None) if name != base.__name__ else None
            if cls is not None:
                return cls(module.config)
    return None


def _run_rotary(module, positions, torch):
    """A fresh rotary embedding of ``module``'s family (:func:`rotary_embedding`) run once on
    ``positions (B, L)``: ``(rotary, prefix, (cos, sin) as it returns them)``, None when the
    family has none. Gemma 3 and ModernBERT keep one set per layer type
    (``{layer_type}_inv_freq``): the layer's own type is run (its ``layer_type``, else
    ``config.layer_types[layer_idx]``) and ``prefix`` is ``"{layer_type}_"``."""
    rotary = rotary_embedding(module)
    if rotary is None:
        return None
    layer_type = getattr(module, "layer_type", None)
    types, i = getattr(module.config, "layer_types", None), getattr(module, "layer_idx", None)
    if layer_type is None and isinstance(types, (list, tuple)) and isinstance(i, int) and \
            0 <= i < len(types):
        layer_type = types[i]
    typed = layer_type is not None and hasattr(rotary, f"{layer_type}_inv_freq")
    extra = (layer_type,) if typed else ()
    with torch.no_grad():
        try:
            out = rotary(torch.zeros(1), torch.from_numpy(np.array(positions)), *extra)
        except (IndexError, RuntimeError):  # multimodal RoPE taking (3, B, L) positions only
            three = np.broadcast_to(positions, (3,) + np.shape(positions))   # (Qwen2-VL, 5.17)
            out = rotary(torch.zeros(1), torch.from_numpy(np.array(three)), *extra)
    return rotary, f"{layer_type}_" if typed else "", out


def model_frequencies(module, positions, torch) -> tuple:
    """The ``(inv_freq, attention_scaling)`` a RoPE layer's model uses for ``positions (B, L)``:
    a fresh rotary embedding (:func:`rotary_embedding`) run once on them, so that ``"dynamic"``
    and ``"longrope"`` update theirs (None when the family has none, or when its rotary
    embedding keeps no ``inv_freq`` and ``attention_scaling``: GPT-J's and CodeGen's a table of
    sin and cos, :func:`model_rotary_checks`). Gemma 3 and ModernBERT keep one set per layer type
    (``{layer_type}_inv_freq``); the layer's own type is read."""
    run = _run_rotary(module, positions, torch)
    if run is None:
        return None
    rotary, prefix, _ = run
    inv_freq = getattr(rotary, f"{prefix}inv_freq", None)
    scaling = getattr(rotary, f"{prefix}attention_scaling", None)
    return None if inv_freq is None or scaling is None else (inv_freq, scaling)


def model_rotary_checks(spec, module, positions, torch) -> list | None:
    """The checks of a RoPE layer's model's rotary embedding against ours for ``positions (B,
    L)`` (None when the family has no rotary embedding class): its ``inv_freq`` and
    ``attention_scaling`` (:func:`check_rope_frequencies`) when it keeps them, else the
    ``(cos, sin)`` it returns (:func:`check_position_embeddings`; GPT-J and CodeGen: a float32
    table ``embed_positions`` of sin and cos, returned as ``(sin, cos)``, no ``inv_freq``)."""
    run = _run_rotary(module, positions, torch)
    if run is None:
        return None
    rotary, prefix, out = run
    inv_freq = getattr(rotary, f"{prefix}inv_freq", None)
    scaling = getattr(rotary, f"{prefix}attention_scaling", None)
    if inv_freq is not None and scaling is not None:
        return check_rope_frequencies(spec, inv_freq, scaling, int(np.max(positions)) + 1)
    if not (isinstance(out, tuple) and len(out) == 2):
        return [Check(f"{type(rotary).__name__}: neither inv_freq nor (cos, sin) returned",
                      float("inf"), 1.0, 0.0, "float32 angles")]
    return check_position_embeddings(spec, positions, *out)


def rope_cos_sin(positions, head_dim: int, theta: float,
                 scaling: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """transformers' ``position_embeddings`` for split-half RoPE, in float64.

    positions : (B, L) int -> cos, sin : (B, L, head_dim), the ``d/2`` angles of
    :func:`~attention_np.variants.rope.rope_angles` repeated once (transformers' layout); with a
    ``scaling`` type its frequencies (``seq_len = 1 + max(positions)``, as transformers'
    ``dynamic_rope_update``) and its attention factor times cos and sin.
    """
    cos, sin = rope_angles(positions, head_dim, theta=theta, scaling=scaling)  # (B, L, d/2)
    return np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)


def spec_cos_sin(spec, positions) -> tuple[np.ndarray, np.ndarray]:
    """The ``position_embeddings`` a layer of ``spec`` takes, in float64: cos, sin
    ``(B, L, r)`` over the rotated width ``r`` (partial rotary: GPT-NeoX, Phi, StableLM), the
    ``r/2`` angles repeated as its pair layout needs (``"half"``: concatenated, transformers'
    Llama; ``"interleaved"``: each twice in turn, Cohere); gpt-oss takes the ``r/2`` angles,
    GPT-J the ``r/2`` angles as ``(sin, cos)`` (returned in that order: as the layer takes them)."""
    rope, given = spec.attention.rope, spec.rope_inputs
    cos, sin = rope_angles(positions, spec.rotated_width, theta=rope.theta, scaling=rope.scaling)
    if spec.family == "gpt_oss":
        return cos, sin
    if given.sin_first:                    # GPT-J: (sin, cos) of the r/2 angles
        return sin, cos
    if (given.angles_layout or rope.layout) == "interleaved":
        cos, sin = np.repeat(cos, 2, axis=-1), np.repeat(sin, 2, axis=-1)
    else:
        cos, sin = np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
    if given.sections:                     # Qwen2-VL (transformers 5.15, 5.16): the
        return tuple(np.ascontiguousarray(np.broadcast_to(a, (3,) + a.shape))  # 3 sections of
                     for a in (cos, sin))                                 # text: alike
    return cos, sin


def rope_table(spec, rows: int) -> np.ndarray:
    """A layer's own RoPE table (GPT-J in transformers 5.15 to 5.17) in float64: ``(rows, r)``, row
    ``p`` the ``[sin | cos]`` of position ``p``'s ``r/2`` angles."""
    rope = spec.attention.rope
    cos, sin = rope_angles(np.arange(rows)[None], spec.rotated_width, theta=rope.theta,
                           scaling=rope.scaling)
    return np.concatenate([sin, cos], axis=-1)[0]


def float64_table(layer, spec, torch) -> list:
    """Check a layer's own RoPE table (``spec.rope_inputs.table``, float32 angles) against ours,
    and put ours (float64) in its place in the copy ``layer``: a row "sin|cos table" within the
    float32 rounding of its largest angle (:data:`ULPS_ANGLE` ulps, as
    :func:`check_position_embeddings`)."""
    theirs = to_numpy(getattr(layer, spec.rope_inputs.table), np.float64)
    ours = rope_table(spec, theirs.shape[0])
    rope = spec.attention.rope
    inv_freq, _ = rope_frequencies(spec.rotated_width, theta=rope.theta, scaling=rope.scaling)
    tol = ULPS_ANGLE * EPS32 * max(1.0, (theirs.shape[0] - 1) * float(np.max(inv_freq)))
    check = (Check("sin|cos table", max_abs_error(theirs, ours), reference_size(ours), tol,
                   "float32 angles") if theirs.shape == ours.shape else
             Check(f"sin|cos table shape {theirs.shape} != ours {ours.shape}", float("inf"), 1.0,
                   tol, "float32 angles"))
    setattr(layer, spec.rope_inputs.table, torch.from_numpy(ours))
    return [check]


def float64_rotary(rotary, specs: dict, replayed, torch, positions_seen: list,
                   rope_checks: list) -> None:
    """Make a model copy's rotary embedding ``rotary`` compute cos and sin in float64
    (transformers: float32), and record the ``position_ids`` of every forward (left padding
    shifts them). Its own forward still runs first, so that a ``"dynamic"`` or ``"longrope"``
    type updates its ``inv_freq`` for the length seen; that and its ``attention_scaling`` are
    checked against ours and appended to ``rope_checks``.

    ``specs`` maps a layer type (``None`` for a model without types) to the ``LayerSpec`` whose
    RoPE it runs; ``replayed`` is the type of the layer being replayed. Gemma 3's rotary
    embedding runs once per layer type, ``forward(x, position_ids, layer_type)``, with
    ``{layer_type}_inv_freq`` buffers: each type gets the cos and sin of its own layers' RoPE,
    and only the replayed layer's type is checked and recorded. gpt-oss takes the ``d/2``
    angles, not repeated."""
    own = rotary.forward

    def forward(x, position_ids, *layer_type):      # Gemma 3: (x, position_ids, layer_type)
        own(x, position_ids, *layer_type)          # transformers' update of inv_freq
        kind = layer_type[0] if layer_type else None                  # None: one rotary for all
        spec = specs[kind if kind is not None else replayed]
        positions = to_numpy(position_ids).copy()
        if kind is None or kind == replayed:
            positions_seen.append(positions)
            prefix = f"{kind}_" if kind is not None else ""
            rope_checks.extend(check_rope_frequencies(
                spec, getattr(rotary, f"{prefix}inv_freq"),
                getattr(rotary, f"{prefix}attention_scaling"), int(positions.max()) + 1,
                f" {len(positions_seen) - 1}"))
        cos, sin = spec_cos_sin(spec, positions)
        return torch.from_numpy(cos), torch.from_numpy(sin)

    rotary.forward = forward
