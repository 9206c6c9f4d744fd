"""One frozen description of an attention layer beyond the paper: :class:`AttentionSpec`.

Each option has one home (0.3):

- the paper's own options, ``mask``, ``is_causal``, ``scale`` and ``num_heads`` (§3.2.2's ``h``),
  are keywords of the call;
- configuration beyond the paper (window, RoPE, soft-cap, QK-norm, the dropout rate, grouped-query
  attention for heads already split, the kernel) is a field of :class:`AttentionSpec`, taken by
  the kernel functions (:func:`attention_np.sdpa_forward`, ...), multi-head attention
  (:func:`attention_np.mha_forward`), the decode steps and the transformers adapter;
- data that changes from call to call (a bias array, positions, the dropout ``rng`` or keep-mask)
  are keywords of the call: a frozen spec holds no arrays::

    spec = AttentionSpec(rope=RoPE(theta=1e6), window=(4096, 0))
    out, cache = mha_forward(x, x, x, params, num_heads=8, is_causal=True, spec=spec,
                             positions=positions)

An option given anywhere else is a ``TypeError`` that names its home (:data:`HOMES`).
What ``params`` already says is not asked again: in multi-head attention grouped-query attention
follows from the shape of ``W_k`` (``num_kv_heads * d_k`` columns), QK-norm from the weights
``q_norm``/``k_norm``, and attention sinks from ``sinks``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from attention_np._checks import check_bool, check_dropout_p, is_number
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

    The paper's options are not fields: ``num_heads``, ``is_causal`` and ``scale`` are keywords
    of the call (``AttentionSpec(num_heads=8)`` is a ``TypeError`` saying so).

    Attributes
    ----------
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
    dropout_p : float
        Attention dropout on the weights, 0 (the default) for none (§5.4 applies dropout to
        sub-layer outputs; BERT and torch's MHA also to the weights); the call's ``rng`` (or
        ``dropout_mask``) draws which weights drop. Decoding refuses it.
    enable_gqa : bool
        Grouped-query attention in the kernel functions (``sdpa_forward``, ...), on heads already
        split: ``k`` and ``v`` may have fewer heads than ``q`` (PyTorch SDPA's ``enable_gqa``).
        Multi-head attention reads it from ``params['W_k']``'s width instead and refuses this field.
    kernel : str
        Which computation of Eq. (1) runs (:mod:`attention_np.kernels.registry`):
        "fused" (default), "reference" (the paper's lines with the variants' hooks) or "tiled".
        A kernel that cannot do an option of the spec refuses it by name.
    """

    window: tuple | None = None
    rope: RoPE | None = None
    softcap: float | None = None
    qk_norm: str = "rms"
    qk_norm_eps: float = 1e-6
    qk_norm_scope: str = "head"
    dropout_p: float = 0.0
    enable_gqa: bool = False
    kernel: str = "fused"

    def __post_init__(self):
        # frozen: fields are set through object.__setattr__ once, here, after their checks
        if self.window is not None:
            object.__setattr__(self, "window", check_window(self.window))
        if self.rope is not None and not isinstance(self.rope, RoPE):
            object.__setattr__(self, "rope", _as_rope(self.rope))
        object.__setattr__(self, "softcap", check_softcap(self.softcap))
        _check_qk_norm_fields(self.qk_norm, self.qk_norm_scope, self.qk_norm_eps)
        object.__setattr__(self, "dropout_p", check_dropout_p(self.dropout_p))
        object.__setattr__(self, "enable_gqa", check_bool(self.enable_gqa, "enable_gqa"))
        if not isinstance(self.kernel, str) or self.kernel not in KERNEL_NAMES:
            raise ValueError(f"kernel must be one of {KERNEL_NAMES}, got {self.kernel!r}")

    def replace(self, **changes) -> AttentionSpec:
        """A copy with some fields changed (the spec is frozen)."""
        return replace(self, **changes)


def _check_qk_norm_fields(kind, scope, eps) -> None:
    """The QK-norm's kind, scope and epsilon of a spec."""
    if not isinstance(kind, str) or kind not in QK_NORMS:
        raise ValueError(f"qk_norm must be one of {tuple(QK_NORMS)}, got {kind!r}")
    if not isinstance(scope, str) or scope not in QK_NORM_SCOPES:
        raise ValueError(f"qk_norm_scope must be one of {QK_NORM_SCOPES} (each head's d_k "
                         f"features, or all heads' h*d_k at once), got {scope!r}")
    if not is_number(eps) or not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"qk_norm_eps must be a positive finite number, got {eps!r}")


def _named_if_misplaced(init):
    """The dataclass's ``__init__``, first naming the home of an option given where it does not
    live (``AttentionSpec(num_heads=8)``), which the dataclass would call unexpected."""
    @functools.wraps(init)                 # inspect.signature shows the dataclass's fields
    def checked(self, *args, **fields):
        misplaced = [name for name in fields if name in HOMES and HOMES[name][0] != "spec"]
        if misplaced:
            raise TypeError(" ".join(f"AttentionSpec got {name}=: {where_it_lives(name)}."
                                     for name in misplaced))
        init(self, *args, **fields)
    return checked


AttentionSpec.__init__ = _named_if_misplaced(AttentionSpec.__init__)


def _as_rope(rope) -> RoPE:
    if rope is True:
        return RoPE()
    if isinstance(rope, dict):
        check_rope(rope)                     # names unknown keys before RoPE(**rope) would
        return RoPE(**rope)
    names = ", ".join(f.name for f in fields(RoPE))
    raise ValueError(f"rope must be a RoPE, a dict of its fields ({names}), True or None, got {rope!r}")


SPEC_FIELDS = tuple(f.name for f in fields(AttentionSpec))

#: Where each option lives (0.3: one home each), as ``(home, how to give it)``: "call" (a keyword
#: of the call), "spec" (a field of :class:`AttentionSpec`) or "params" (multi-head attention reads
#: it from its weights). Held on every entry point by tests/api/test_one_home.py.
HOMES = {
    **{name: ("call", f"a keyword of the call ({name}=...)")
       for name in ("mask", "is_causal", "scale", "num_heads", "bias", "positions", "rng",
                    "dropout_mask")},
    **{name: ("spec", f"a field of the spec (spec=AttentionSpec({name}=...))") for name in SPEC_FIELDS},
    "num_kv_heads": ("params", "the width of params['W_k'] decides it (init_mha_params(..., "
                               "num_kv_heads=...) makes it)"),
}


def where_it_lives(name: str) -> str:
    """One sentence naming the home of the option ``name`` (a key of :data:`HOMES`)."""
    home, how = HOMES[name]
    return f"{name} is {how}" if home != "params" else f"in multi-head attention {how}"


def refuse_elsewhere(caller: str, given: dict) -> None:
    """The ``**elsewhere`` catch-all of an entry point: a ``TypeError`` for the first keyword, naming
    its home when it is an option that lives in the spec or in ``params``, else as Python names an
    unknown keyword (a keyword of the call that this call does not take, ``cross_kv_cache(scale=)``,
    is simply not one of its options)."""
    for name in given:
        if name in HOMES and HOMES[name][0] != "call":
            raise TypeError(f"{caller}() got {name}=, which is not taken here: {where_it_lives(name)}")
        raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
