"""Diff the attention kernel of any transformers model that dispatches through its attention
interface, without code per family: :func:`compare_attention_kernels`.

transformers' layers call ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation](module, query,
key, value, attention_mask, scaling=..., dropout=..., **extras)``. A function registered under
:data:`NAME` with ``AttentionInterface.register`` and chosen with ``attn_implementation`` sees
every layer's q ``(B, h, L, d)``, k, v ``(B, h_kv, S, d)``, mask, scaling and extras (``softcap``,
``s_aux`` sinks, T5's ``position_bias``). For each call it runs the reference implementation
(transformers' own ``"sdpa"`` by default) forward and backward on the same tensors, attention_np's
``sdpa_forward``/``sdpa_backward`` in float64, and diffs; the model goes on with the reference's
output. Beside the full layer diff (:mod:`~attention_np.interop.transformers.model_diff`): this one
checks the kernel only (what comes after the projections, RoPE and QK-norm).
"""

from __future__ import annotations

import copy

import numpy as np

from attention_np._checks import check_seed
from attention_np._optional import import_optional
from attention_np.interop.tolerance import judge
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.layer_source import family_function
from attention_np.interop.transformers.model_diff import LayerResult, ModelReport, check_model_inputs
from attention_np.interop.transformers.recent import (
    EAGER_FLOAT64,
    eager_float64_attention,
    float64_experts,
)
from attention_np.interop.transformers.replay import dead_rows
from attention_np.interop.transformers.weights import stored_dtypes, stored_weights_line
from attention_np.kernels import fused
from attention_np.kernels.sink_logits import sdpa_sinks_backward, sdpa_sinks_forward
from attention_np.variants.spec import AttentionSpec

NAME = "attention_np_kernel_diff"
MIN = np.finfo(np.float64).min / 2


def _np(t):
    return to_numpy(t, np.float64)


def _kernel(results, reference, rng, torch):
    """The attention function registered under :data:`NAME`: each call diffed
    (:func:`_diff_kernel_call`) into ``results``, the model going on with the reference's
    output."""
    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                  softcap=None, s_aux=None, position_bias=None, **kwargs):
        options = {"scaling": scaling, "softcap": softcap, "s_aux": s_aux,
                   "position_bias": position_bias}
        return _diff_kernel_call(results, (reference, rng, torch), module,
                                 (query, key, value, attention_mask), options, kwargs)
    return attention


def _diff_kernel_call(results, run: tuple, module, tensors: tuple, options: dict, kwargs: dict):
    """One attention call, ``tensors = (query, key, value, attention_mask)``: the reference
    (``run = (reference, rng, torch)``) forward and backward from a random upstream gradient on
    leaves of the same tensors, ours on their float64 copies, their diff a row of ``results``;
    ``(output, None)`` as an attention function returns, the reference's output."""
    reference, rng, torch = run
    query, key, value, attention_mask = tensors
    leaves = [t.detach().clone().requires_grad_(True) for t in (query, key, value)]
    s_aux = options["s_aux"]
    sinks = None if s_aux is None else s_aux.detach().clone().requires_grad_(True)
    own = getattr(module, "sinks", None)       # gpt-oss's eager reads module.sinks itself
    if own is not None:
        own.grad = None
    with torch.enable_grad():
        out = _reference_forward(module, reference, leaves, sinks, attention_mask, options,
                                 kwargs)
        q, k, v = (_np(t) for t in (query, key, value))
        keep, bias = _kernel_mask(module, attention_mask, options["position_bias"], q.shape,
                                  k.shape[-2], torch)
        rows = dead_rows(keep)
        dout = rng.standard_normal((q.shape[0], q.shape[2], q.shape[1], v.shape[-1]))
        if rows is not None:                    # transformers: (B, L, h, d)
            dout = np.where(rows[..., None, None], 0.0, dout)
        out.backward(torch.from_numpy(dout).to(out.dtype))
    ours = _kernel_ours((q, k, v, keep, bias), options, dout)
    got = _kernel_got(out, leaves, sinks, own, ours)
    excluded = []
    if rows is not None and rows.any():
        got["out"] = np.where(rows[:, :, None, None], ours["out"], got["out"])
        excluded = [tuple(int(i) for i in r) for r in np.argwhere(rows)]
    name = f"{type(module).__name__} (layer {getattr(module, 'layer_idx', '?')})"
    results.append(LayerResult(name, type(module).__name__, judge(got, ours), excluded))
    return out.detach(), None


def _reference_forward(module, reference: str, leaves: list, sinks, attention_mask,
                       options: dict, kwargs: dict):
    """The reference's output on the leaves (the family's own eager function for ``"eager"``),
    with the call's soft-cap, sinks and T5 position bias."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    ref = (family_function(module, "eager_attention_forward") if reference == "eager"
           else ALL_ATTENTION_FUNCTIONS[reference])           # eager: the family's own
    extra = {k: v for k, v in (("softcap", options["softcap"]), ("s_aux", sinks))
             if v is not None}
    if options["position_bias"] is not None:      # T5: passed on as given
        extra["position_bias"] = options["position_bias"]
    out, _ = ref(module, *leaves, attention_mask, scaling=options["scaling"], dropout=0.0,
                 **extra, **kwargs)
    return out


def _kernel_mask(module, attention_mask, position_bias, q_shape: tuple, S: int, torch) -> tuple:
    """``(keep, bias)``: the call's mask as our bool keep mask (broadcast to (B, 1|h, L, S)) and
    the additive rest of it; the causal mask of a causal module called without a mask
    (bottom-right); T5's position bias added, any mask folded in it kept."""
    B, h, L, _ = q_shape
    keep, bias = None, None
    if attention_mask is not None:
        m = to_numpy(attention_mask) if attention_mask.dtype == torch.bool \
            else _np(attention_mask)
        keep = m if m.dtype == bool else m > MIN
        bias = None if m.dtype == bool else np.where(keep, m, 0.0)
    elif getattr(module, "is_causal", False) and L > 1:
        keep = np.tril(np.ones((L, S), bool), S - L)                  # bottom-right
    if position_bias is not None:  # T5: added to the scores (any mask folded in kept)
        pb = _np(position_bias)
        keep = pb > MIN if keep is None else keep & (pb > MIN)
        bias = np.where(pb > MIN, pb, 0.0) + (0.0 if bias is None else bias)
    if keep is not None:
        keep = np.broadcast_to(keep, np.broadcast_shapes(keep.shape, (B, 1, L, S)))
    return keep, bias


def _kernel_ours(arrays: tuple, options: dict, dout) -> dict:
    """attention_np's fused kernel (with sinks: the sink-logit kernel) forward and backward on
    ``arrays = (q, k, v, keep, bias)``: ``{"out" (B, L, h, d), "dq", "dk", "dv", ("dsinks")}``."""
    q, k, v, keep, bias = arrays
    # the soft-cap and grouped-query attention are spec fields of the kernels
    kw = dict(bias=bias, scale=options["scaling"],
              spec=AttentionSpec(softcap=options["softcap"], enable_gqa=k.shape[1] != q.shape[1]))
    d_heads = dout.transpose(0, 2, 1, 3)                              # (B, h, L, d)
    if options["s_aux"] is None:
        heads, cache = fused.sdpa_forward(q, k, v, keep, **kw)
        dq, dk, dv = fused.sdpa_backward(d_heads, cache)[:3]
        return {"out": heads.transpose(0, 2, 1, 3), "dq": dq, "dk": dk, "dv": dv}
    heads, cache = sdpa_sinks_forward(q, k, v, _np(options["s_aux"]), keep, **kw)
    dq, dk, dv, dsinks = sdpa_sinks_backward(d_heads, cache)[:4]
    return {"out": heads.transpose(0, 2, 1, 3), "dq": dq, "dk": dk, "dv": dv, "dsinks": dsinks}


def _kernel_got(out, leaves: list, sinks, own, ours: dict) -> dict:
    """The reference's output and gradients; the sinks' gradient 0 from a reference that drops
    them (transformers' sdpa), the module's own from one that reads ``module.sinks``."""
    got = {"out": _np(out), **{f"d{n}": _np(t.grad) for n, t in zip("qkv", leaves, strict=False)}}
    if sinks is not None:
        # a reference that drops the sinks (transformers' sdpa) leaves them without gradient
        grad = sinks.grad if sinks.grad is not None else getattr(own, "grad", None)
        got["dsinks"] = np.zeros_like(ours["dsinks"]) if grad is None else _np(grad)
    return got


def compare_attention_kernels(model, *, reference: str = "sdpa", seed: int = 0,
                              **inputs) -> ModelReport:
    """Run ``model(**inputs)`` once in float64 with every attention call diffed against
    attention_np's kernel (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model whose layers use the attention interface (left untouched).
    reference : str
        The attention implementation diffed: a key of ``ALL_ATTENTION_FUNCTIONS`` ("sdpa",
        ...), "eager" (the family's own ``eager_attention_forward``) or
        "attention_np_eager_float64" (Gemma 2's soft-cap; transformers' sdpa refuses it); its
        output is what the model continues with. A model whose layers do not call the
        interface (Falcon) gives an empty report with a note.
    seed : int
        Seed of the random upstream gradients.
    **inputs : the model's inputs.

    Returns
    -------
    ModelReport
        one :class:`~attention_np.interop.transformers.model_diff.LayerResult` per call, checks
        "out", "dq", "dk", "dv" (and "dsinks").
    """
    torch = import_optional("torch", "attention_np.interop.transformers.kernel_diff")
    tf = import_optional("transformers", "attention_np.interop.transformers.kernel_diff")
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    check_model_inputs(model, inputs, torch)
    check_seed(seed)
    known = ("eager", EAGER_FLOAT64, *ALL_ATTENTION_FUNCTIONS)
    if reference not in known or reference == NAME:
        raise ValueError(f"reference must be one of {sorted(set(known) - {NAME})}, got "
                         f"{reference!r}")
    results = []
    if reference == EAGER_FLOAT64:        # Gemma 2's soft-cap: eager with a float64 softmax
        tf.AttentionInterface.register(EAGER_FLOAT64, eager_float64_attention)
    tf.AttentionInterface.register(NAME, _kernel(results, reference, np.random.default_rng(seed),
                                                 torch))
    tf.AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS[
        reference if reference in ALL_MASK_ATTENTION_FUNCTIONS else "eager"])
    work = copy.deepcopy(model).double().eval()
    float64_experts(work)
    for m in work.modules():
        if hasattr(m, "config"):
            m.config._attn_implementation = NAME
    feed = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    feed = {k: v.double() if v.is_floating_point() else v for k, v in feed.items()}
    with torch.no_grad():
        work(**feed)
    report = ModelReport(f"{type(model).__name__} attention kernel ({reference})",
                         weights=stored_weights_line(stored_dtypes(model)))
    report.layers = results
    if not results:
        report.notes.append("no layer called the attention interface")
    return report
