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

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from attention_np._checks import check_bool, check_dropout_p, check_int, check_scale
from attention_np.variants.qk_norm import QK_NORM_SCOPES, QK_NORMS
from attention_np.variants.rope import check_rope
from attention_np.variants.softcap import check_softcap
from attention_np.variants.window import check_window

# The kernels of attention_np.kernels.registry (tests/kernels/test_registry.py holds the two lists equal).
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
        :func:`attention_np.rope_frequencies`. Kept as a read-only copy (a ``FrozenMapping``, its
        lists as tuples): the spec is frozen all the way down.
    """

    theta: float = 10000.0
    layout: str = "half"
    rotary_dim: int | None = None
    scaling: Mapping | None = None

    def __post_init__(self):
        # every field checked now, not at the first call; scaling copied into a frozen mapping,
        # so that editing the caller's dict afterwards changes nothing here
        options = check_rope(self.options())
        for name in ("theta", "rotary_dim", "scaling"):
            object.__setattr__(self, name, options[name])

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
    is_causal : bool, optional
        None (the default) leaves it to the call's ``is_causal=`` keyword (False when neither
        says); a call whose keyword says otherwise is refused, naming both. Query ``i``
        attends keys ``j <= i`` (§3.2.3's decoder self-attention; top-left aligned).
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
    qk_norm_scope : {"head", "all"}
        Which features one norm's mean runs over: ``"head"`` (the default), each head's ``d_k``
        (Qwen3, Gemma 3; weights ``(d_k,)`` or ``(h, d_k)``); ``"all"``, the ``h·d_k`` features of
        a position's query and the ``h_kv·d_k`` of its key at once, before the split into heads
        (OLMo 2; weights ``(h·d_k,)`` and ``(h_kv·d_k,)``). A field rather than read from the
        weights' shape: it is the norm's formula (which mean), not a learned number, and a
        ``(d_k,)`` weight of one head would say nothing either way.
    dropout_p : float, optional
        None (the default): the call's ``dropout_p=`` where it has one, else 0. Attention dropout
        on the weights (§5.4 applies dropout to sub-layer outputs; BERT and
        torch's MHA also to the weights); needs ``rng`` in the call.
    kernel : str
        Which computation of Eq. (1) runs (:mod:`attention_np.kernels.registry`):
        "fused" (default), "reference" (the paper's lines with the variants' hooks) or "tiled".
        A kernel that cannot do an option of the spec refuses it by name.
    """

    num_heads: int | None = None
    is_causal: bool | None = None
    scale: float | None = None
    window: tuple | None = None
    rope: RoPE | None = None
    softcap: float | None = None
    qk_norm: str = "rms"
    qk_norm_eps: float = 1e-6
    qk_norm_scope: str = "head"
    dropout_p: float | None = None
    kernel: str = "fused"

    def __post_init__(self):
        # frozen: fields are set through object.__setattr__ once, here, after their checks
        if self.num_heads is not None:
            object.__setattr__(self, "num_heads", check_int(self.num_heads, "num_heads"))
        if self.is_causal is not None:
            object.__setattr__(self, "is_causal", check_bool(self.is_causal, "is_causal"))
        if self.scale is not None:
            object.__setattr__(self, "scale", check_scale(self.scale, 1))
        if self.window is not None:
            object.__setattr__(self, "window", check_window(self.window))
        if self.rope is not None and not isinstance(self.rope, RoPE):
            object.__setattr__(self, "rope", _as_rope(self.rope))
        object.__setattr__(self, "softcap", check_softcap(self.softcap))
        if not isinstance(self.qk_norm, str) or self.qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm must be one of {tuple(QK_NORMS)}, got {self.qk_norm!r}")
        if not isinstance(self.qk_norm_scope, str) or self.qk_norm_scope not in QK_NORM_SCOPES:
            raise ValueError(f"qk_norm_scope must be one of {QK_NORM_SCOPES} (each head's d_k "
                             f"features, or all heads' h*d_k at once), got {self.qk_norm_scope!r}")
        eps = self.qk_norm_eps
        if isinstance(eps, (bool, np.bool_)) or not isinstance(
                eps, (int, float, np.integer, np.floating)) or not (np.isfinite(eps) and eps > 0):
            raise ValueError(f"qk_norm_eps must be a positive finite number, got {eps!r}")
        if self.dropout_p is not None:
            object.__setattr__(self, "dropout_p", check_dropout_p(self.dropout_p))
        if not isinstance(self.kernel, str) or self.kernel not in KERNEL_NAMES:
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
