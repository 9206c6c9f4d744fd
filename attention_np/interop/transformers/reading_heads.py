"""A layer's heads and scales: query and key/value heads, head width, score scale, value scale.

Heads are read from the layer (or its config), widths from its weights, the score scale from an
attribute, the keyword its forward passes, or measured from its own ``_attn``: never assumed.
"""

from __future__ import annotations

import inspect
import re

import numpy as np

from attention_np._checks import is_integer, is_number
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.layer_source import forward_source
from attention_np.interop.transformers.refusal import refuse
from attention_np.interop.transformers.weights import torch_mha


def read_heads(module, cfg, projections) -> tuple:
    """``(h, h_kv, head_dim)``: heads from the layer (or its config), widths from its weights."""
    def attr(names):
        return next((int(getattr(module, a)) for a in names
                     if is_integer(getattr(module, a, None))), None)
    h = attr(("num_heads", "num_attention_heads", "n_heads", "n_head", "num_attn_heads"))
    h = h if h is not None else getattr(cfg, "num_attention_heads", None)
    d = attr(("head_dim", "attention_head_size", "head_size", "key_value_proj_dim"))
    if h is None:
        refuse(module, "a layer whose number of heads is not readable (no num_heads, "
                        "num_attention_heads, n_heads attribute or config.num_attention_heads)")
    if d is None:
        if projections.fused is not None and not _splits_in_three(module, projections, h):
            refuse(module, "a fused q/k/v projection without a readable head_dim")
        if projections.fused is not None:                   # [q | k | v], h heads each
            return h, h, _fused_width(projections) // (3 * h)
        d = projections.widths(h, 1)["q"] // h
    widths = projections.widths(h, d)
    if widths["q"] != h * d:
        refuse(module, f"a query projection of width {widths['q']} != heads {h} x head_dim {d}"
               + (f" ({h} heads do not divide its {widths['q']} features)"
                  if widths["q"] % h else ""))
    o = projections.o
    if widths["v"] == h * d != widths["k"] and o is not None and \
            int(o.weight.shape[0 if type(o).__name__ == "Conv1D" else 1]) == h * d:
        # Nemotron 3 audio with num_key_value_heads < num_attention_heads: k_proj h_kv heads
        # wide, v_proj h (eager cannot run it; sdpa's enable_gqa groups keys, not values)
        refuse(module, f"keys of {widths['k'] // d} heads beside values of {h} heads (k_proj "
                        f"{widths['k']} wide, v_proj {widths['v']}: the keys shared by groups "
                        "of query heads, the values not; attention_np groups both)")
    return h, widths["k"] // d, d


def _fused_width(projections) -> int:
    """The output width of the fused projection (a ``Conv1D``'s weight is ``(in, out)``)."""
    fused = projections.fused
    return int(fused.weight.shape[1 if type(fused).__name__ == "Conv1D" else 0])


def _splits_in_three(module, projections, h: int) -> bool:
    """Whether a fused ``qkv`` projection without a ``head_dim`` attribute is split by its
    forward into three equal parts of ``h`` heads each (TimeSformer, MGP-STR:
    ``qkv(x).reshape(B, L, 3, self.num_heads, C // self.num_heads)``): read from its source
    and checked against the projection's width."""
    src = re.sub(r"\s+", "", forward_source(module))
    width = _fused_width(projections) if projections.layout == "contiguous" else 0
    three = re.search(r"\.reshape\([^()]*,3,self\.num_(attention_)?heads,", src) is not None or \
        "split(self.split_size,dim=2)" in src and getattr(module, "split_size", 0) * 3 == width
    return width > 0 and width % (3 * h) == 0 and three     # (GPT-1: x.split(split_size, 2))


def score_scale(module, d: int) -> float:
    """The score scale: an attribute (``scaling``, ``scale``, ...), the keyword the forward
    passes to transformers' attention function (ModernBERT: ``scaling=self.head_dim**-0.5``),
    or probed from the layer's own ``_attn`` (GPT-Neo: unscaled); never assumed."""
    for a in ("scaling", "scale", "inv_norm_factor", "softmax_scale"):
        v = getattr(module, a, None)
        if is_number(v):
            return float(v) * query_prescale(module)
    if torch_mha(module):           # torch's multi_head_attention_forward: q * sqrt(1 / head_dim)
        return float(d) ** -0.5
    attn = getattr(module, "_attn", None)           # GPT-1: Attention(scale=True or False)
    if isinstance(getattr(module, "scale", None), bool) and callable(attn) and re.search(
            r"if self\.scale:\s*w = w / math\.sqrt\(v\.size\(-1\)\)", inspect.getsource(attn)):
        return float(d) ** -0.5 if module.scale else 1.0
    inline = _scale_in_source(module)
    if inline is not None:
        return inline
    probed = _probed_scale(module, d)
    if probed is not None:
        return probed
    refuse(module, "a layer whose score scale is not readable (no scaling, scale or "
                    f"inv_norm_factor attribute; 1/sqrt({d}) is not assumed)")


def _scale_in_source(module) -> float | None:
    """The scale a layer's forward divides by inline, 1/sqrt of its ``attention_head_size`` or
    ``head_dim`` (BERT's older copies, Data2VecVision, Swin; ProphetNet's queries; XLM's, FlauBERT's;
    the keyword ``scaling=self.head_dim**-0.5``), else None."""
    src = forward_source(module)
    if isinstance(getattr(module, "attention_head_size", None), int) and re.search(
            r"(attention_scores\s*=\s*attention_scores|scaling\s*=\s*1)\s*/\s*math\.sqrt\("
            r"self\.attention_head_size\)", src):   # BERT's older copies, Data2VecVision,
        return 1.0 / float(np.sqrt(module.attention_head_size))  # Swin's: in their forward
    if re.search(r"self\.q\w*\(hidden_states\)\s*/\s*\(self\.head_dim\s*\*\*\s*0\.5\)",
                 src) and isinstance(getattr(module, "head_dim", None), int):
        return float(module.head_dim) ** -0.5                   # ProphetNet: q / sqrt(d)
    if re.search(r"^\s*q = q / math\.sqrt\(self\.head_dim\)", src, re.MULTILINE) \
            and isinstance(getattr(module, "head_dim", None), int):     # XLM, FlauBERT: the
        return float(module.head_dim) ** -0.5                             # queries, inline
    if re.search(r"scaling=self\.head_dim\s*\*\*\s*-0\.5\b", src) and \
            isinstance(getattr(module, "head_dim", None), int):
        return float(module.head_dim) ** -0.5
    return None


def query_prescale(module) -> float:
    """The factor a layer's forward multiplies its queries by before the attention function
    (ESM: ``query_layer * self.attention_head_size**-0.5``, then ``scaling=1.0``; before RoPE,
    which is linear, so the scores are scaled the same), else 1."""
    m = re.search(r"\bquery\w* = query\w* \* self\.(attention_head_size|head_dim)\s*\*\*\s*"
                  r"-0\.5\s*$", forward_source(module), re.MULTILINE)
    width = None if m is None else getattr(module, m.group(1), None)
    if not is_integer(width):
        return 1.0
    return float(width) ** -0.5


def _probed_scale(module, d: int) -> float | None:
    """The scale of a layer that scores in its own ``_attn(query, key, value, attention_mask)``
    (GPT-Neo; OpenAI GPT's ``_attn(q, k, v, ...)``), measured: two queries over two keys,
    ``0`` and ``e_0``, values ``e_0`` and ``e_1``; the second query ``e_0`` (the last
    position, so that a causal or local mask keeps both keys, its buffer sliced top-left or
    bottom-right) gives the two weights, ``log(w_1 / w_0)`` the scale. It is named 1 or 1/sqrt(d) when
    it is one of them within 1e-5 (the layer may score in float32); another value is refused
    with the number. None: no such method."""
    fn = getattr(module, "_attn", None)
    names = tuple(inspect.signature(fn).parameters)[:3] if callable(fn) else ()
    if names not in (("query", "key", "value"), ("q", "k", "v")):     # GPT-Neo; OpenAI GPT
        return None
    import torch
    dtype = next(module.parameters()).dtype
    q, k, v = (torch.zeros((1, 1, 2, d), dtype=dtype) for _ in range(3))   # the 2nd query:
    q[..., 1, 0], k[..., 1, 0], v[..., 0, 0], v[..., 1, 1] = 1.0, 1.0, 1.0, 1.0  # the last, it
    if names[1] == "k":                                 # sees both keys top-left or bottom-right
        k = k.transpose(-1, -2)                         # OpenAI GPT: (B, h, d, S), split_heads(k=True)
    with torch.no_grad():
        out = to_numpy(fn(q, k, v, None)[0]).astype(np.float64)[0, 0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        measured = float(np.log(out[1] / out[0]))
    for scale in (1.0, d ** -0.5):
        if abs(measured - scale) <= 1e-5 * scale:
            return scale
    refuse(module, f"a score scale measured as {measured:.6g} (neither 1 nor 1/sqrt({d}))")


def value_scale(module) -> float:
    """The factor a layer's forward multiplies its projected values by (MiMo-V2-Flash:
    ``v_proj(x) * self.v_scale``, ``config.attention_value_scale``), else 1: linear, so read
    into ``W_v`` and ``b_v`` (:func:`.layer_reading.params_from_transformers`)."""
    s = getattr(module, "v_scale", None)
    if not is_number(s) or \
            not re.search(r"\* self\.v_scale\b", forward_source(module)):
        return 1.0
    if not np.isfinite(s) or s == 0:
        refuse(module, f"values scaled by v_scale={s!r} (not a finite nonzero number)")
    return float(s)

