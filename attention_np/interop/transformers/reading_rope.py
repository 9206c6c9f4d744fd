"""A layer's RoPE: theta, scaling, rotated width, pair layout, and how its angles reach it.

Read per layer (the layer type's own parameters, a per-layer theta, whether a layer of a model of
several types rotates at all) and probed from the family's ``apply_rotary_pos_emb``, ``rotate_half``
or ``rotate_every_two``, whatever the names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attention_np.interop.transformers.layer_source import (
    family_function,
    forward_parameters,
    forward_source,
    function_source,
    layer_type,
)
from attention_np.interop.transformers.refusal import refuse
from attention_np.interop.transformers.rotary import rope_scaling_from_config
from attention_np.variants.rope_scaling import ROPE_TYPES
from attention_np.variants.spec import RoPE


@dataclass(frozen=True)
class RopeInputs:
    """How a RoPE layer is handed its rotation (what turns q and k is its ``RoPE``). The
    defaults: the model's rotary embedding passes it ``position_embeddings = (cos, sin)``,
    ``(B, L, r)`` each, the ``r/2`` angles repeated as its pair layout pairs them.

    Attributes
    ----------
    sin_first : bool
        ``position_embeddings`` are ``(sin, cos)`` of the ``r/2`` angles (GPT-J).
    angles_layout : {"half"}, optional
        How ``position_embeddings`` repeat the ``r/2`` angles when not as the pair layout pairs
        them: ``"half"``, concatenated, for interleaved pairs (GLM, Helium, ERNIE 4.5).
    sections : bool
        ``position_embeddings`` are multimodal RoPE's three sections ``(3, B, L, r)``, which
        the layer interleaves itself (Qwen2-VL's text layers in transformers 5.15, 5.16; with
        text-only positions the three are alike).
    in_layer : bool
        The layer turns q and k itself, its own ``rotary_emb`` run on its ``position_ids``
        argument (IDEFICS), not given cos and sin.
    table : str, optional
        The layer turns q and k itself from its own buffer of that name, rows ``[sin | cos]``
        indexed by its ``position_ids`` argument (GPT-J in transformers 5.15-5.17:
        ``embed_positions``).
    """

    sin_first: bool = False
    angles_layout: str | None = None
    sections: bool = False
    in_layer: bool = False
    table: str | None = None


def _in_width(projections) -> int:
    """d_model: the input width of the query (or fused) projection."""
    lin = projections.q if projections.q is not None else projections.fused
    return int(lin.weight.shape[0 if type(lin).__name__ == "Conv1D" else 1])


def _ignores_rotary(module, projections, r: int) -> bool:
    """Whether the layer's output does not depend on the ``position_embeddings`` it is passed
    (Cohere 2, EXAONE 4: the full-attention layers of a sliding/full model take them and skip
    RoPE), probed: two calls of its ``forward`` (no hooks run) on the same input, with
    cos = 1, sin = 0 and with other angles. False when the probe cannot run (the layer then
    counts as rotating)."""
    import torch
    dtype = next(module.parameters()).dtype
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((1, 3, _in_width(projections)), generator=gen, dtype=dtype)
    angles = torch.randn((1, 3, r), generator=gen, dtype=dtype)
    outs = []
    cfg = getattr(module, "config", None)      # probed under eager: flex_attention would compile
    own = getattr(cfg, "_attn_implementation", None)
    try:
        if own not in (None, "eager"):
            cfg._attn_implementation = "eager"
        for cos, sin in ((torch.ones_like(angles), torch.zeros_like(angles)),
                         (torch.cos(angles), torch.sin(angles))):
            try:
                with torch.no_grad(), torch.random.fork_rng():
                    torch.manual_seed(0)
                    out = module.forward(x, position_embeddings=(cos, sin), attention_mask=None)
            except (TypeError, RuntimeError, ValueError, AttributeError, IndexError):
                return False
            outs.append(out[0] if isinstance(out, tuple) else out)
    finally:
        if own not in (None, "eager"):
            cfg._attn_implementation = own
    return bool(torch.equal(outs[0], outs[1]))


def _may_skip_rotary(module, cfg) -> bool:
    """Whether a layer given cos and sin may not rotate (then probed, :func:`_ignores_rotary`):
    a model of several layer types (Cohere 2), or a forward that rotates under a condition
    (EXAONE 4's ``if self.sliding_window is None or self.is_sliding:``, which with every layer
    full and a window configured rotates none)."""
    return len(set(getattr(cfg, "layer_types", None) or ())) > 1 or re.search(
        r"\n\s*if [^\n]*:\s*\n\s*\w+, \w+ = apply_rotary_pos_emb\(", forward_source(module)) is not None


def read_rope(module, cfg, family: str, d: int, alibi: bool, projections) -> tuple:
    """``(rope, inputs)``: the layer's :class:`~attention_np.RoPE` (theta, scaling, rotated
    width, pair layout; None: no RoPE, and with ALiBi, as Falcon rotates only without it) and
    how it is handed its angles (:class:`RopeInputs`), read per layer: the layer type's own
    parameters (Gemma 3, ModernBERT), a per-layer theta (``layer_rope_theta``, 0: none), and in a
    model of several layer types whether this layer rotates at all (:func:`_ignores_rotary`)."""
    none = None, RopeInputs()
    how = _rotation_inputs(module, cfg, alibi)
    if how is None:
        return none
    in_layer, table = how
    if "num_prefix_tokens" in function_source(family_function(module, "apply_rotary_pos_emb")):
        refuse(module, "2-D RoPE of the patches' continuous (row, column) coordinates, the "
                        "class and register tokens not rotated (DINOv3: apply_rotary_pos_emb "
                        "turns only the last tokens, by angles of both coordinates)")
    rope = getattr(cfg, "rope_parameters", None) or {}
    kind = layer_type(module, cfg) or getattr(module, "attention_type", None)
    rope = rope.get(kind, rope)               # Gemma 3, ModernBERT, OLMo 3: one per layer type
    theta = _theta(module, cfg, rope)
    if theta is None:
        return none
    r = _rotated_width(module, cfg, rope, d)
    scaling = _scaling(module, cfg, rope, d, r)
    if _may_skip_rotary(module, cfg) and family != "gpt_oss" and \
            _ignores_rotary(module, projections, r):
        return none
    layout = "half" if family == "gpt_oss" else _rope_layout(module)
    return (RoPE(theta=theta, layout=layout, rotary_dim=None if r == d else r, scaling=scaling),
            RopeInputs(sin_first="sin, cos = position_embeddings" in forward_source(module),
                       angles_layout=_angles_layout(module, layout, r),
                       sections="apply_multimodal_rotary_pos_emb(" in forward_source(module),
                       in_layer=in_layer, table=table))


def _rotation_inputs(module, cfg, alibi: bool) -> tuple | None:
    """``(in_layer, table)`` of a layer that rotates: whether it turns q and k itself from its
    own rotary embedding (:func:`_own_rotary`), the name of its own table (:func:`_own_table`);
    None for a layer that does not rotate (ALiBi, SmolLM3's NoPE layers, ESM unless "rotary",
    Zamba 2 without ``config.use_mem_rope``)."""
    if alibi or not getattr(module, "use_rope", True):               # SmolLM3's NoPE layers
        return None
    in_layer = "position_embeddings" not in forward_parameters(module)
    table = _own_table(module) if in_layer else None
    if in_layer and not _own_rotary(module) and table is None:
        return None
    in_layer = in_layer and table is None
    if getattr(module, "position_embedding_type", "rotary") != "rotary":
        return None              # ESM: takes position_embeddings, rotates only when "rotary"
    flag = re.search(r"if self\.config\.(\w+):\s*\n\s*cos, sin = position_embeddings",
                     forward_source(module))
    if flag is not None and getattr(cfg, flag.group(1), True) is False:
        return None              # Zamba 2: rotates only with config.use_mem_rope
    return in_layer, table


def _theta(module, cfg, rope: dict) -> float | None:
    """The layer's theta: its layer type's, the config's, or a per-layer ``layer_rope_theta``
    (None when that is 0: Granite's SWA layers do not rotate)."""
    theta = float(rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0)))
    thetas, i = getattr(cfg, "layer_rope_theta", None), getattr(module, "layer_idx", None)
    if isinstance(thetas, (list, tuple)) and isinstance(i, int) and 0 <= i < len(thetas):
        if not thetas[i]:                         # Granite SWA: theta 0, the layer gets None
            return None
        theta = float(thetas[i])
    return theta


def _rotated_width(module, cfg, rope: dict, d: int) -> int:
    """The number of features RoPE turns: the layer's ``rotary_ndims`` or ``rotary_dim``, else
    ``head_dim`` times the partial rotary factor (``rope_type`` ``"proportional"``: the whole
    head, its rotary embedding's angles zero past the factor); an odd width, or one
    outside ``2..head_dim``, is refused."""
    partial = rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 1.0))
    proportional = rope.get("rope_type", "default") == "proportional"
    r = None if proportional else getattr(module, "rotary_ndims", None)   # (GPT-NeoX turns
    if r is None and isinstance(getattr(module, "rotary_dim", None), int):   # cos's width: the
        r = module.rotary_dim                   # whole head's, proportional's zeros included)
    if r is None:
        r = int(d * partial) if not proportional else d
    r = int(r)
    if r % 2 and 2 < r < d:               # Moonshine's tiny head: int(4 * 0.9) = 3
        refuse(module, f"an odd rotated width of {r} features (head_dim {d} x "
                        f"partial_rotary_factor {partial}: its rotary embedding turns {r + 1} "
                        f"features at the frequencies theta^(-2k/{r}) of a width of {r})")
    if r % 2 or not 2 <= r <= d:
        refuse(module, f"a rotated width of {r} features (head_dim {d})")
    return r


def _scaling(module, cfg, rope: dict, d: int, r: int):
    """RoPE's scaling (``rope_scaling_from_config``) of the layer's RoPE parameters, the partial
    factor dropped where the layer turns only ``r`` of its ``d`` features; an unknown
    ``rope_type`` refused."""
    partial_ok = r != d and (hasattr(module, "rotary_ndims") or hasattr(module, "rotary_dim")
                             or _rotates_part(module, d, r))
    # a layer that rotates the whole head keeps the factor: rope_scaling_from_config refuses it
    plain = {k: v for k, v in rope.items() if k != "partial_rotary_factor"} if partial_ok \
        else rope
    kind = plain.get("rope_type", "default")
    if kind not in ROPE_TYPES:
        refuse(module, f"RoPE of type {kind!r}" + (" (2-D axial RoPE: a patch's row and column "
                                                   "angles, each on its own features)"
                                                   if kind == "axial" else "")
               + f" (rope_type={kind!r}; the known ones are {sorted(ROPE_TYPES)})")
    return rope_scaling_from_config(plain, cfg, type(module).__name__)

def _own_table(module) -> str | None:
    """The name of the buffer a layer turns q and k from itself, rows ``[sin | cos]`` of the
    ``r/2`` angles gathered at its ``position_ids`` argument (GPT-J's ``embed_positions`` in
    transformers 5.15 to 5.17: ``create_sinusoidal_positions``, split ``sin, cos``), else None."""
    buf = getattr(module, "embed_positions", None)
    src = forward_source(module)
    if getattr(buf, "ndim", 0) == 2 and "position_ids" in forward_parameters(module) and \
            "embed_positions" in src and "sin, cos = torch.split(sincos" in src:
        return "embed_positions"
    return None


def _own_rotary(module) -> bool:
    """Whether a self-attention layer turns q and k with its own rotary embedding, run on the
    ``position_ids`` it is passed (IDEFICS: ``self.rotary_emb(value_states, position_ids)``
    in its forward), instead of taking the model's ``position_embeddings``."""
    return getattr(module, "rotary_emb", None) is not None and \
        "position_ids" in forward_parameters(module) and \
        not getattr(module, "is_cross_attention", False) and \
        "self.rotary_emb(" in forward_source(module)


def _rotates_part(module, d: int, r: int) -> bool:
    """Whether the family's ``apply_rotary_pos_emb`` takes cos, sin narrower than the head
    (GPT-NeoX's turns the first ``r`` features; Llama's broadcasts them against all ``d`` and
    fails)."""
    fn = family_function(module, "apply_rotary_pos_emb")
    if fn is None:
        return False
    import torch
    q, cs = torch.ones((1, 1, 2, d)), torch.ones((1, 2, r))
    try:
        out = fn(q, q, cs, cs)[0]
    except (RuntimeError, ValueError):
        return False
    return tuple(out.shape) == (1, 1, 2, d)


def _rope_layout(module) -> str:
    """Which features a RoPE pair joins, probed from the family's ``apply_rotary_pos_emb``
    (else its ``rotate_half``, GPT-J's ``rotate_every_two``): (0, 1, 2, 3)
    -> (-2, -3, 0, 1) pairs m with m + d/2 ("half"), -> (-1, 0, -3, 2) pairs 2m, 2m+1."""
    layout = rope_rotation(family_function(module, "apply_rotary_pos_emb"))
    if layout is not None:
        return layout
    import torch
    rotate_half = family_function(module, "rotate_half")
    every_two = family_function(module, "rotate_every_two")             # GPT-J: (B, L, h, r)
    if rotate_half is None and every_two is None:
        refuse(module, "a rotary embedding without a rotate_half or rotate_every_two function "
                        "(pair layout unknown)")
    got = (rotate_half(torch.arange(4.0)) if rotate_half is not None else
           every_two(torch.arange(4.0).reshape(1, 1, 1, 4))).reshape(-1).tolist()
    if tuple(got) not in LAYOUTS:
        refuse(module, f"a rotary pair layout with rotate_half([0, 1, 2, 3]) = {got}")
    return LAYOUTS[tuple(got)]


LAYOUTS = {(-2.0, -3.0, 0.0, 1.0): "half", (-1.0, 0.0, -3.0, 2.0): "interleaved"}


def rope_rotation(apply_rotary_pos_emb) -> str | None:
    """The pair layout a family's ``apply_rotary_pos_emb`` turns, probed with ``cos = 0`` and
    ``sin = 1`` (the same for every layout of the angles) on ``q = (0, 1, 2, 3)``: the rotation
    it calls, whatever its name (GLM-4V's text layers: ``rotate_half_llm``, interleaved, beside
    a ``rotate_half`` for its vision tower). None: no such function, or another signature."""
    if apply_rotary_pos_emb is None:
        return None
    import torch
    q, sin = torch.arange(4.0).reshape(1, 1, 1, 4), torch.ones((1, 1, 4))
    try:
        got = apply_rotary_pos_emb(q, q, torch.zeros_like(sin), sin)[0].reshape(-1).tolist()
    except (RuntimeError, TypeError, ValueError):
        return None
    return LAYOUTS.get(tuple(got))


def _angles_layout(module, layout: str, r: int) -> str | None:
    """How the ``position_embeddings`` of an interleaved-RoPE layer hold the ``r/2`` angles:
    ``"half"`` (concatenated, as Llama's rotary embedding gives them) when the family's
    ``apply_rotary_pos_emb`` interleaves the first half itself (GLM, Helium, ERNIE 4.5), None
    when it takes them already repeated in turn (Cohere)."""
    fn = family_function(module, "apply_rotary_pos_emb")
    if layout != "interleaved" or fn is None:
        return None
    return "half" if interleaves_first_half(fn, r) else None


def interleaves_first_half(apply_rotary_pos_emb, r: int = 4) -> bool:
    """Whether a family's ``apply_rotary_pos_emb`` repeats the first half of its cos and sin
    each twice in turn (GLM's ``cos[..., :r/2].repeat_interleave(2)``): probed with ``sin = 0``
    and ``cos`` the angles ``1..r/2`` concatenated, which it turns into ``1, 1, 2, 2, ...``."""
    import torch
    a = torch.arange(1.0, r // 2 + 1)
    q, cos = torch.ones((1, 1, 1, r)), torch.cat([a, a]).reshape(1, 1, r)
    try:
        out = apply_rotary_pos_emb(q, q, cos, torch.zeros_like(cos))[0].reshape(-1)
    except (RuntimeError, TypeError, ValueError):
        return False
    return bool(torch.equal(out, a.repeat_interleave(2)))


def refuse_rope_only_in_self_attention(module, rope: RoPE | None) -> None:
    """Refuse a RoPE layer that is cross-attention when called with ``key_value_states`` and
    then turns neither q nor k (Moonshine Streaming's decoder: one class for self- and
    cross-attention, ``is_cross_attention = key_value_states is not None``): one spec for both
    calls would turn them in the cross calls too (a false MISMATCH; the sweep, one layer per
    class, compared only the self-attention)."""
    src = forward_source(module)
    if rope is not None and \
            "is_cross_attention = key_value_states is not None" in src and \
            "if not is_cross_attention" in src:
        refuse(module, "RoPE in self-attention only (the same layer called with "
                        "key_value_states is cross-attention without RoPE: one spec cannot "
                        "describe both calls)")

