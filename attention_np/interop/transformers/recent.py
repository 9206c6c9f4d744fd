"""What the recent open models add to a transformers attention layer, for
:func:`~attention_np.interop.transformers.compare_transformers_attention`:

- Qwen3, Gemma 3, Cohere, ...: QK-norm, an RMSNorm or a LayerNorm per head on q and k
  (``AttentionSpec(qk_norm="rms" | "layer")``); Gemma's RMSNorm multiplies by ``(1 + w)``, Qwen3's by ``w``;
- Gemma 2: a soft-cap on the scores (``attn_logit_softcapping`` -> ``softcap``);
- gpt-oss: a learned sink logit per head (``module.sinks`` -> ``params["sinks"]``).

And how the float64 copy of such a layer is run so that the diff is float64 throughout:
transformers' ``Qwen3RMSNorm`` / ``Gemma3RMSNorm`` / ``CohereLayerNorm`` cast to float32, so the
copy's norms are
replaced by the same formula in the input's dtype; transformers' sdpa refuses Gemma 2's soft-cap
and its eager softmax is float32, so Gemma 2 runs :data:`EAGER_FLOAT64`; sdpa drops gpt-oss's
sinks without an error, so gpt-oss runs eager (float64 there); a float64 gpt-oss model's experts
run ``experts_implementation="eager"`` (:func:`float64_experts`). See docs/frameworks.md.
"""

from __future__ import annotations

import contextlib
import inspect
import re

# transformers' eager attention with its softmax in the input's dtype instead of float32: the
# float64 reference for Gemma 2, whose soft-cap transformers' sdpa refuses (docs/frameworks.md)
EAGER_FLOAT64 = "attention_np_eager_float64"


def prepare_recent_layer(layer, spec, impl: str) -> None:
    """Before the float64 copy ``layer`` runs with ``impl``: refuse sdpa with a soft-cap
    (transformers' sdpa raises) and gpt-oss without eager (sdpa drops the sinks), register
    :data:`EAGER_FLOAT64`, run the copy's QK-norms in float64 (theirs cast to float32).

    ``spec`` is the layer's :class:`~attention_np.interop.transformers.LayerSpec`.
    """
    if spec.attention.softcap is not None and impl == "sdpa":
        raise ValueError(f"{type(layer).__name__} has attn_logit_softcapping="
                         f"{spec.attention.softcap} and "
                         f"transformers' sdpa attention refuses a soft-cap: pass "
                         f"attn_implementation={EAGER_FLOAT64!r} (eager in float64) or 'eager' "
                         f"(its softmax in float32)")
    if spec.sinks and impl != "eager":
        raise ValueError(f"GptOssAttention: only attn_implementation='eager' applies its sinks "
                         f"(float64 throughout); transformers' sdpa drops them without an error, "
                         f"got {impl!r}")
    if impl == EAGER_FLOAT64:
        # with eager's masks (a full model builds its own): float, 0 or finfo.min, never None
        import transformers
        from transformers.masking_utils import eager_mask
        transformers.AttentionInterface.register(EAGER_FLOAT64, eager_float64_attention)
        transformers.AttentionMaskInterface.register(EAGER_FLOAT64, eager_mask)
    from attention_np.interop.transformers.weights import read_qk_norm
    read = read_qk_norm(layer, spec.num_heads, spec.num_kv_heads, spec.head_dim)   # None: none
    if read is not None:
        for norm in (read.q, read.k):
            if not isinstance(norm, list) and type(norm).__name__ != "LayerNorm":
                norm.forward = norm_in_input_dtype(norm, read.kind, read.offset, read.eps)


def norm_in_input_dtype(norm, kind: str, offset: float, eps: float):
    """A QK-norm's forward (``Qwen3RMSNorm``, ``Gemma3RMSNorm``, ``CohereLayerNorm``, ...)
    without its cast to float32: ``xhat * (offset + w)`` in the dtype of ``x`` (..., head_dim),
    ``xhat`` the RMS- or mean-centred normalised ``x``."""
    import torch

    def forward(x):
        if kind == "layer":
            x = x - x.mean(-1, keepdim=True)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + norm.weight)
    return forward


def eager_float64_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                            softcap=None, **kwargs):
    """Gemma 2's ``eager_attention_forward``, line for line, with the softmax in the input's
    dtype (theirs: ``softmax(..., dtype=torch.float32)``). query (B, h, L, d), key and value
    (B, h_kv, S, d) -> (B, L, h, d_v), weights (B, h, L, S)."""
    import torch
    if scaling is None:
        scaling = module.head_dim ** -0.5
    groups = int(getattr(module, "num_key_value_groups", query.shape[1] // key.shape[1]))
    key = key.repeat_interleave(groups, dim=1)                  # transformers' repeat_kv
    value = value.repeat_interleave(groups, dim=1)              # (B, h, S, d)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1)                     # in float64, not float32
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def float64_experts(model) -> None:
    """Make a float64 copy of a mixture-of-experts model (gpt-oss) run its experts in float64.

    transformers 5 dispatches ``GptOssExperts.forward`` on ``config._experts_implementation``
    (``@use_experts_implementation``): the default ``"grouped_mm"`` calls
    ``torch.nn.functional.grouped_mm``, which takes float32, bfloat16 or float16 only;
    ``"eager"`` is the class's own forward (a loop over the experts hit, ``x @ gate_up_proj[e]``,
    the clamped SwiGLU, ``@ down_proj[e]``, weighted by the router), any dtype. Its documented
    switch, ``model.set_experts_implementation("eager")``, is used: the same function, in the
    model's dtype (``test_gpt_oss_eager_experts_equal_grouped_mm_in_float32``).
    """
    if getattr(model.config, "_experts_implementation", None) not in (None, "eager"):
        model.set_experts_implementation("eager")


@contextlib.contextmanager
def float64_upcasts(torch, active: bool = True):
    """While inside (when ``active``): a float64 tensor's ``.float()`` and
    ``.to(torch.float32)`` stay float64, ``a @ b`` of a float64 and a float32 tensor is taken in
    float64 (gpt-oss's rotary embedding in transformers 5.15: ``inv_freq.float() @
    position_ids.float()``, the positions int), ``softmax(x, dtype=torch.float32)`` of a float64
    ``x`` is taken in float64, and a tensor made without a dtype is float64 (XGLM's
    ``torch.full((), finfo(float64).min)`` would overflow float32). For the layers that
    upcast to float32 in their own forward instead of through the attention interface
    (BLOOM's ``softmax(..., dtype=float32)``, MPT's ``scores.float()``, GPT-Neo's
    ``query.to(torch.float32)``): the same formula, in the copy's float64. Restored on exit."""
    if not active:
        yield
        return
    functional, tensor_float, tensor_to = torch.nn.functional, torch.Tensor.float, torch.Tensor.to
    tensor_matmul = torch.Tensor.__matmul__
    softmax = functional.softmax

    def as_float(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else tensor_float(self, *args, **kwargs)

    def to(self, *args, **kwargs):
        if self.dtype == torch.float64 and (kwargs.get("dtype") == torch.float32 or
                                            (args and args[0] is torch.float32)):
            return self
        return tensor_to(self, *args, **kwargs)

    def matmul(a, b, *args, **kwargs):          # a float64 kept by the above times a float32
        if isinstance(b, torch.Tensor) and {a.dtype, b.dtype} == {torch.float32, torch.float64}:
            a, b = tensor_to(a, torch.float64), tensor_to(b, torch.float64)
        return tensor_matmul(a, b, *args, **kwargs)

    def float64_softmax(x, dim=None, _stacklevel=3, dtype=None):
        if dtype == torch.float32 and x.dtype == torch.float64:
            dtype = torch.float64
        return softmax(x, dim=dim, dtype=dtype)
    default = torch.get_default_dtype()      # XGLM: torch.full((), finfo(float64).min)
    torch.Tensor.float, torch.Tensor.to, functional.softmax = as_float, to, float64_softmax
    torch.Tensor.__matmul__ = matmul
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.float, torch.Tensor.to, functional.softmax = tensor_float, tensor_to, softmax
        torch.Tensor.__matmul__ = tensor_matmul
        torch.set_default_dtype(default)


def scores_in_own_method(layer) -> bool:
    """Whether the layer computes its attention in its own ``_attn`` method (GPT-Neo, which
    casts q and k to float32 there) or always in its family's eager function (Kosmos-2.5's
    vision tower looks ``config._attn_implementation`` up as an *attribute* of
    ``ALL_ATTENTION_FUNCTIONS``, which has none, and so always falls back to its
    ``eager_attention_forward``, a float32 softmax) rather than through transformers' attention
    interface, or scores in its own ``forward`` with a float32 softmax (XLM, FlauBERT:
    ``softmax(scores.float(), -1)``): its float64 copy runs inside :func:`float64_upcasts`."""
    if callable(getattr(layer, "_attn", None)) or own_eager_only(layer):
        return True
    try:
        source = inspect.getsource(type(layer).forward)
    except (OSError, TypeError):
        return False
    return re.search(r"softmax\(\s*scores\.float\(\)", source) is not None


def own_eager_only(layer) -> bool:
    """Whether the layer's ``forward`` takes its attention function with
    ``getattr(ALL_ATTENTION_FUNCTIONS, name, eager_attention_forward)``: the interface is a
    mapping without such attributes, so the family's eager function runs whatever
    ``config._attn_implementation`` says (Kosmos-2.5's vision attention)."""
    try:
        source = inspect.getsource(type(layer).forward)
    except (OSError, TypeError):
        return False
    return re.search(r"getattr\(\s*ALL_ATTENTION_FUNCTIONS\s*,", source) is not None
