"""What a layer does to its scores besides the scale: the causal mask and sliding window (from its own
buffer, its attribute or its config), soft-cap, the relative position bias it adds (T5's buckets,
ALiBi's slopes, a 2-D table: one record each, :class:`T5Buckets`, :class:`ALiBi`,
:class:`GridTable`), and whether its ``mask`` argument keeps or masks.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import numpy as np

from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.layer_source import (
    family_function,
    forward_parameters,
    forward_source,
    layer_type,
)
from attention_np.interop.transformers.refusal import refuse
from attention_np.variants.position_bias import alibi_slopes
from attention_np.variants.window import sliding_window_mask


@dataclass(frozen=True)
class T5Buckets:
    """T5's relative position bias: a learned table ``(num_buckets, h)``, the row of the pair
    ``(i, j)`` the bucket of ``j - i`` (:func:`~attention_np.variants.position_bias.
    t5_relative_buckets`), added to the scores.

    Attributes
    ----------
    num_buckets : int
        The table's rows (``relative_attention_num_buckets``).
    max_distance : int
        The distance from which on every offset shares the last bucket.
    bidirectional : bool
        Buckets for both signs of ``j - i`` (T5's encoder; its decoder is causal).
    """

    num_buckets: int
    max_distance: int
    bidirectional: bool


@dataclass(frozen=True)
class ALiBi:
    """ALiBi: the bias ``-m_n |j - i|`` of head ``n`` added to the scaled scores (BLOOM, MPT;
    Falcon adds it before the scale: its slopes are held times the scale).

    Attributes
    ----------
    slopes : tuple of float (h,)
        The slopes ``m_n``.
    """

    slopes: tuple


@dataclass(frozen=True)
class GridTable:
    """A 2-D relative position bias table the layer holds: its rows ``(2H - 1)(2W - 1)``
    (``+ 3`` with a class token) gathered by the 2-D offset of two patches of an ``H x W``
    grid (:func:`~attention_np.variants.position_bias.grid_relative_index`).

    Attributes
    ----------
    height, width : int
        The grid of patches, ``H x W`` (Data2VecVision: the image's; Swin: one window's).
    cls : bool
        A class token first (Data2VecVision; Swin: none).
    """

    height: int
    width: int
    cls: bool


def read_relative_bias(module, cfg, h: int, scale: float) -> T5Buckets | ALiBi | GridTable | None:
    """The relative position bias the layer adds to its scores (:func:`read_buckets`,
    :func:`read_alibi`, :func:`read_grid_table`), None without one; a layer with two is
    refused naming both (no layer read has two)."""
    found = [b for b in (read_buckets(module), read_alibi(module, cfg, h, scale),
                         read_grid_table(module)) if b is not None]
    if len(found) > 1:
        refuse(module, "two relative position biases (" +
               " and ".join(type(b).__name__ for b in found) + ")")
    return found[0] if found else None


def read_buckets(module) -> T5Buckets | None:
    """T5's bucketed bias, for a layer holding its table (``has_relative_attention_bias``: T5's
    first block; the others are passed the bias it computed)."""
    if not getattr(module, "has_relative_attention_bias", False):   # T5: nn.Embedding (buckets, h)
        return None
    return T5Buckets(int(module.relative_attention_num_buckets),
                     int(module.relative_attention_max_distance), not module.is_decoder)


def read_window(module, cfg) -> int | None:
    """The layer's sliding window ``W`` (None: none), per layer, as the model's mask has it:
    GPT-Neo's in its own causal buffer (:func:`causal_band`); none on a ``"full_attention"``
    layer (the model masks it causally, whatever the layer's ``sliding_window`` attribute
    holds: EXAONE 4 keeps the config's on every layer); else the layer's ``sliding_window``,
    the config's on a ``"sliding_attention"`` layer whose own is None (SmolLM3 with
    ``use_sliding_window`` off: its model still builds a sliding mask for that layer type);
    else, for a layer without one, the config's window unless ``use_sliding_window`` is off."""
    band = causal_band(module)
    if band is not None:
        return band or None
    kind = layer_type(module, cfg)
    if kind == "full_attention":
        return None
    if hasattr(module, "sliding_window"):
        own = module.sliding_window
        return getattr(cfg, "sliding_window", None) if own is None and \
            kind == "sliding_attention" else own
    if hasattr(getattr(module, "q_proj", None), "use_flexible_linear"):
        return None      # Moshi, Kyutai: the model masks with create_causal_mask, its
        #                  config's sliding_window unused by the mask (no window)
    if getattr(cfg, "use_sliding_window", True) is False:
        return None
    return getattr(cfg, "sliding_window", None)


def causal_band(module) -> int | None:
    """A layer that masks its scores with its own boolean ``bias`` buffer ``(1, 1, P, P)``
    (GPT-Neo): 0 when the buffer is the causal mask, ``W`` when it keeps the last ``W`` keys
    (``i - W < j <= i``: its local layers); None without such a buffer. Any other pattern
    is refused."""
    buf = getattr(module, "bias", None)
    if getattr(buf, "dtype", None) is None or getattr(buf, "ndim", 0) != 4:
        return None
    if str(buf.dtype) != "torch.bool":          # (GPT-1's float buffer: tril_weights)
        return None
    keep = to_numpy(buf)[0, 0]                                        # (P, P)
    P = keep.shape[-1]
    W = int(keep[-1].sum())
    if keep.shape != (P, P) or not np.array_equal(
            keep, sliding_window_mask(P, left=W - 1, right=0)):
        refuse(module, "a causal mask buffer (bias) that is neither causal nor a causal "
                        "sliding window")
    return 0 if W == P else W


def tril_weights(module) -> bool:
    """A layer that masks its scores with a float buffer ``bias`` of ones on and below the
    diagonal, ``w * b - 1e4 * (1 - b)`` (GPT-1: a masked score is -1e4, whose weight
    ``exp(-1e4)`` is 0 in float64, as -inf's): causal. A float buffer of another pattern is
    refused."""
    buf = getattr(module, "bias", None)
    if getattr(buf, "ndim", 0) != 4 or not getattr(buf, "is_floating_point", lambda: False)() \
            or "-1e4 * (1 - b)" not in inspect.getsource(type(module)):
        return False
    keep = to_numpy(buf)[0, 0]
    if not np.array_equal(keep, np.tril(np.ones_like(keep))):
        refuse(module, "a float mask buffer (bias) that is not the causal mask")
    return True


def read_softcap(module) -> float | None:
    cap = getattr(module, "attn_logit_softcapping", None)
    # Gemma 3 keeps attn_logit_softcapping but passes no softcap to its attention function
    return float(cap) if cap is not None and "softcap=" in forward_source(module) else None



def read_alibi(module, cfg, h: int, scale: float) -> ALiBi | None:
    """ALiBi's slopes, where a model puts it: an ``alibi`` argument (BLOOM; Falcon with
    ``config.alibi``), MPT's ``position_bias`` (its family's ``build_mpt_alibi_tensor``). Falcon adds the bias
    before the scale (its slopes times the scale here)."""
    params = forward_parameters(module)
    attn = getattr(cfg, "attn_config", None)
    if "alibi" in params and getattr(cfg, "alibi", True):
        slopes = alibi_slopes(h)
        if "*= self.inv_norm_factor" in forward_source(module):        # Falcon: (q.k + bias) * scale
            slopes = slopes * scale
    elif "position_bias" in params and getattr(attn, "alibi", True) and \
            family_function(module, "build_mpt_alibi_tensor") is not None:
        # MPT: its model always passes build_mpt_alibi_tensor(h, ..., alibi_bias_max=8)
        if h & (h - 1):
            refuse(module, f"MPT's ALiBi slopes for {h} heads (not a power of 2: MPT orders "
                            "them unlike BLOOM's rule, alibi_slopes)")
        slopes = 2.0 ** (-8.0 * np.arange(1, h + 1) / h)
    else:
        return None
    return ALiBi(tuple(float(m) for m in slopes))


def bias_table_owner(module):
    """The module holding the layer's ``relative_position_bias_table``: the layer itself (Swin's
    older copies: Donut, MaskFormer, CLAP, Swin2SR) or its ``relative_position_bias`` (Swin,
    Data2VecVision); None."""
    for owner in (module, getattr(module, "relative_position_bias", None)):
        if getattr(owner, "relative_position_bias_table", None) is not None and \
                hasattr(owner, "window_size"):
            return owner
    return None


def read_grid_table(module) -> GridTable | None:
    """A 2-D relative position bias table the layer holds and adds to its scores (Data2VecVision,
    Swin): its grid of patches, from the table's ``window_size`` and its rows
    (``(2H - 1)(2W - 1)``, ``+ 3`` with a class token). None when it has none."""
    table_module = bias_table_owner(module)
    if table_module is None or getattr(module, "has_relative_position_bias", True) is False:
        return None
    table = table_module.relative_position_bias_table
    H, W = (int(v) for v in table_module.window_size)
    rows = (2 * H - 1) * (2 * W - 1)
    if table.shape[0] not in (rows, rows + 3):
        refuse(module, f"a relative position bias table of {table.shape[0]} rows for a {H}x{W} "
                        f"grid (neither {rows} 2-D offsets nor {rows + 3} with a class token)")
    return GridTable(H, W, table.shape[0] == rows + 3)


def keep_mask(module) -> bool:
    """Whether the layer's ``mask`` argument is a keep mask, not an additive one (XLM,
    FlauBERT: ``(B, S)`` or ``(B, L, S)``, the keys where it is 0 masked: ``mask == 0``)."""
    return "mask" in forward_parameters(module) and \
        re.search(r"\(mask == 0\)\.view\(", forward_source(module)) is not None

