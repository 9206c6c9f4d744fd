"""One frozen description of an attention layer beyond the paper: :class:`AttentionSpec`.

The paper's multi-head attention (§3.2.2) needs only ``num_heads``, the causal flag and the scale.
Everything the field added since is configuration of the same five steps, and it all lives here,
in one place, taken by multi-head attention (:func:`attention_np.mha_forward`), the decode step,
cross-attention decoding and the transformers adapter::

    spec = AttentionSpec(num_heads=8, is_causal=True, rope=RoPE(theta=1e6), window=(4096, 0))
    out, cache = mha_forward(x, x, x, params, spec=spec, positions=positions)

What ``params`` already says is not asked again: grouped-query attention follows from the shape
of ``W_k`` (``num_kv_heads * d_k`` columns), QK-norm from the weights ``q_norm``/``k_norm``, and
attention sinks from ``sinks``. Data that changes from call to call (the mask, an additive bias,
positions, the dropout ``rng``) are arguments of the call, not fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from attention_np._checks import check_dropout_p, check_int
from attention_np.variants.qk_norm import QK_NORMS
from attention_np.variants.rope import check_rope
from attention_np.variants.softcap import check_softcap
from attention_np.variants.window import check_window

# The kernels of attention_np.kernels.registry (tests/test_kernels.py holds the two lists equal).
KERNEL_NAMES = ("fused", "reference", "tiled")


@dataclass(frozen=True)
class RoPE:
    """Rotary position embeddings on every query and key head (:mod:`attention_np.variants.rope`).

    Attributes
    ----------
    theta : float
        The base of the frequencies ``theta^(-2m/r)`` (10000 in RoFormer and Llama 2).
    layout : {"half", "interleaved"}
        Which features pair: ``m`` with ``m + r/2`` (transformers' ``rotate_half``) or ``2m``
        with ``2m + 1`` (RoFormer, GPT-J).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features of each head (GPT-NeoX, Phi).
    scaling : dict, optional
        transformers' ``rope_parameters`` (linear, dynamic, yarn, longrope, llama3, ...), see
        :func:`attention_np.rope_frequencies`.
    """

    theta: float = 10000.0
    layout: str = "half"
    rotary_dim: int | None = None
    scaling: dict | None = field(default=None, hash=False, compare=True)

    def __post_init__(self):
        check_rope(self.options())

    def options(self) -> dict:
        """The keyword arguments of :func:`attention_np.apply_rope`."""
        return {"theta": self.theta, "layout": self.layout, "rotary_dim": self.rotary_dim,
                "scaling": self.scaling}


@dataclass(frozen=True)
class AttentionSpec:
    """Everything beyond the paper that an attention layer does, checked once when made.

    Attributes
    ----------
    num_heads : int, optional
        ``h`` of §3.2.2 (query heads); required by multi-head attention, None for one head.
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (§3.2.3's decoder self-attention; top-left aligned).
        The decode step is causal whatever this says (bottom-right aligned: its new queries are
        the last of the cached positions); cross-attention decoding refuses it.
    scale : float, optional
        The factor on ``QKᵀ``; default ``1 / sqrt(d_k)`` (footnote 4).
    window : (left, right), optional
        Sliding-window attention (Longformer, Mistral): query ``i`` sees keys
        ``i - left .. i + right``; None on a side is unbounded.
    rope : RoPE, optional
        Rotary position embeddings applied to q and k before the kernel (a dict of
        :class:`RoPE`'s fields, or True for the defaults, is converted).
    softcap : float, optional
        Logit soft-capping ``c·tanh(scores / c)`` (Gemma 2).
    qk_norm : {"rms", "layer"}
        Which norm the QK-norm weights ``params["q_norm"]``, ``params["k_norm"]`` are, when
        ``params`` has them: RMSNorm (Qwen3, Gemma 3) or LayerNorm (Cohere, Flax ``normalize_qk``).
    qk_norm_eps : float
        The norm's epsilon.
    dropout_p : float
        Attention dropout on the weights (§5.4 applies dropout to sub-layer outputs; BERT and
        torch's MHA also to the weights); needs ``rng`` in the call.
    kernel : str
        Which computation of Eq. (1) runs (:mod:`attention_np.kernels.registry`):
        "fused" (default), "reference" (the paper's lines with the variants' hooks) or "tiled".
        A kernel that cannot do an option of the spec refuses it by name.
    """

    num_heads: int | None = None
    is_causal: bool = False
    scale: float | None = None
    window: tuple | None = None
    rope: RoPE | None = None
    softcap: float | None = None
    qk_norm: str = "rms"
    qk_norm_eps: float = 1e-6
    dropout_p: float = 0.0
    kernel: str = "fused"

    def __post_init__(self):
        # frozen: fields are set through object.__setattr__ once, here, after their checks
        if self.num_heads is not None:
            check_int(self.num_heads, "num_heads")
        if not isinstance(self.is_causal, (bool, np.bool_)):
            raise TypeError(f"is_causal must be a bool, got {self.is_causal!r}")
        if self.scale is not None:
            if isinstance(self.scale, (bool, np.bool_)) or not isinstance(
                    self.scale, (int, float, np.integer, np.floating)):
                raise TypeError(f"scale must be a real number or None, got {self.scale!r}")
            if not np.isfinite(self.scale):
                raise ValueError(f"scale must be finite, got {self.scale!r}")
        if self.window is not None:
            object.__setattr__(self, "window", check_window(self.window))
        if self.rope is not None and not isinstance(self.rope, RoPE):
            object.__setattr__(self, "rope", _as_rope(self.rope))
        check_softcap(self.softcap)
        if self.qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm must be one of {tuple(QK_NORMS)}, got {self.qk_norm!r}")
        if not isinstance(self.qk_norm_eps, (int, float, np.floating)) or not self.qk_norm_eps > 0:
            raise ValueError(f"qk_norm_eps must be a positive number, got {self.qk_norm_eps!r}")
        check_dropout_p(self.dropout_p)
        if self.kernel not in KERNEL_NAMES:
            raise ValueError(f"kernel must be one of {KERNEL_NAMES}, got {self.kernel!r}")

    def replace(self, **changes) -> AttentionSpec:
        """A copy with some fields changed (the spec is frozen)."""
        return replace(self, **changes)


def _as_rope(rope) -> RoPE:
    if rope is True:
        return RoPE()
    if isinstance(rope, dict):
        check_rope(rope)                     # names unknown keys before RoPE(**rope) would
        return RoPE(**rope)
    names = ", ".join(f.name for f in fields(RoPE))
    raise ValueError(f"rope must be a RoPE, a dict of its fields ({names}), True or None, got {rope!r}")


SPEC_FIELDS = tuple(f.name for f in fields(AttentionSpec))
