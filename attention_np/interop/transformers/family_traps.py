"""transformers' traps, demonstrated rather than hidden (see docs/frameworks.md).

Each demonstration measures the documented behaviour on a tiny random model and says whether it
still holds (:class:`~attention_np.interop.known.Demo`); one that no longer reproduces makes
``python -m attention_np diff --framework transformers`` fail.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from attention_np.compose.mha import mha_forward
from attention_np.interop.known import Demo
from attention_np.interop.tolerance import max_abs_error
from attention_np.interop.torch import from_torch_sdpa, to_numpy
from attention_np.interop.transformers.family_cases import case, tiny_model
from attention_np.interop.transformers.layer_diff import (
    build_mask,
    compare_transformers_attention,
    layer_spec,
    params_from_transformers,
    rope_cos_sin,
)
from attention_np.interop.transformers.layer_reading import mha_options
from attention_np.interop.transformers.recent import EAGER_FLOAT64
from attention_np.interop.transformers.rotary import spec_cos_sin
from attention_np.paper.heads import split_heads
from attention_np.paper.linear import linear_forward
from attention_np.variants.position_bias import (
    relative_position_bias,
    relative_positions,
    t5_relative_buckets,
)
from attention_np.variants.qk_norm import rms_norm_forward


def eager_float32_softmax(seed: int = 0) -> Demo:
    """Eager attention of ViT, Llama, Qwen2 runs softmax in float32 in a float64 model: the
    float64 model's output under eager against sdpa (float32-accurate, BERT's float64); the
    layer diff asked for eager runs those casts in float64 and agrees."""
    import torch

    demo = Demo("eager attention's softmax is float32 in a float64 model (the model's output "
                "under eager against sdpa; then the layer diff asked for eager)")
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(3, 61, (2, 6)))
    for family in ("bert", "vit", "llama", "qwen2"):
        outs = {}
        inputs = ({"pixel_values": torch.from_numpy(rng.standard_normal((2, 3, 8, 8)))}
                  if family == "vit" else {"input_ids": ids})
        for impl in ("eager", "sdpa"):
            model = tiny_model(family, seed, attn_implementation=impl).double()
            with torch.no_grad():
                outs[impl] = to_numpy(model(**inputs).last_hidden_state)
        err = max_abs_error(outs["eager"], outs["sdpa"])
        float32 = family != "bert"
        demo.observe(f"{family} model, eager vs sdpa", f"{err:.1e}  "
                     f"({'float32 softmax' if float32 else 'float64 throughout'})",
                     1e-10 < err < 1e-5 if float32 else err < 1e-12)
        module, inputs = case(family, seed)
        r = compare_transformers_attention(module, **inputs, attn_implementation="eager",
                                           seed=seed)
        out = next(c.err for c in r.checks if c.name == "out")
        demo.observe(f"{family} layer diff, eager", f"out {out:.1e}  "
                     f"({'AGREE' if r.ok else 'MISMATCH'}: its float32 casts run in float64)",
                     r.ok and out < 1e-12)
    return demo


def rope_float32(seed: int = 0) -> Demo:
    """The rotary embedding of a float64 Llama computes cos and sin in float32."""
    import torch

    demo = Demo("RoPE cos/sin of a .double() Llama are computed in float32 (max error against "
                "float64 cos/sin)")
    model = tiny_model("llama", seed).double()
    positions = np.arange(64)[None, :]
    x = torch.zeros((1, 64, 1), dtype=torch.float64)
    cos, sin = (to_numpy(t) for t in model.rotary_emb(x, torch.from_numpy(positions)))
    spec = layer_spec(model.layers[0].self_attn)
    cos64, sin64 = rope_cos_sin(positions, spec.head_dim, spec.attention.rope.theta)
    err = max(max_abs_error(cos, cos64), max_abs_error(sin, sin64))
    demo.observe(f"cos, sin dtype {cos.dtype}, positions 0..63", f"{err:.1e}  (float32 level)",
                 cos.dtype == np.float64 and 1e-10 < err < 1e-5)
    return demo


def min_filled_mask(seed: int = 0) -> Demo:
    """A row with every key masked: finfo.min masks give mean(V) W_o + b_o, attention_np b_o."""
    import torch

    demo = Demo("a query row with every key masked by transformers' finfo.min mask, float64")
    layer = copy.deepcopy(case("gpt2", seed)[0]).double()
    params, spec = params_from_transformers(layer)
    x = np.random.default_rng(seed).standard_normal((1, 4, params["W_q"].shape[0]))
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    allowed[1] = False                                          # query 1 may attend to no key
    fill = np.where(allowed, 0.0, np.finfo(np.float64).min)[None, None]
    with torch.no_grad():
        row = to_numpy(layer(torch.from_numpy(x), attention_mask=torch.from_numpy(fill))[0])[0, 1]
    v = split_heads(linear_forward(x, params["W_v"], params["b_v"]), spec.num_heads)   # (1,h,4,d)
    mean_v = v.mean(axis=-2).reshape(-1)                        # uniform weights: mean(V), heads
    expected = mean_v @ params["W_o"] + params["b_o"]
    err = max_abs_error(row, expected)
    demo.observe("transformers GPT2Attention", f"row = mean(V) W_o + b_o  (error {err:.1e})",
                 err < 1e-12)
    kw = from_torch_sdpa(torch.from_numpy(fill))
    out, _ = mha_forward(x, x, x, params, kw["mask"], num_heads=spec.num_heads, scale=spec.scale)
    demo.observe("attention_np via from_torch_sdpa", "row = b_o (attention 0)",
                 not kw["bias"].any() and max_abs_error(out[0, 1], params["b_o"]) < 1e-15)
    return demo


def t5_decoder_bias_offset(seed: int = 0) -> Demo:
    """T5's decoder bias while decoding with a cache: the row at the query's absolute position."""
    import torch

    demo = Demo("T5's decoder bias at decoding step S - 1 (one query, S cached keys): the row of "
                "the query's absolute position, bottom-right aligned")
    layer = case("t5-decoder", seed)[0]
    params, spec = params_from_transformers(layer)
    t5 = spec.relative_bias
    S = 6
    with torch.no_grad():          # what T5Attention.forward computes at that step, (h, 1, S)
        theirs = to_numpy(layer.compute_bias(1, S, past_seen_tokens=S - 1))[0]
    ours = {align: relative_position_bias(params["bias_table"], t5_relative_buckets(
        relative_positions(1, S, align=align), bidirectional=t5.bidirectional,
        num_buckets=t5.num_buckets, max_distance=t5.max_distance)) for align in ("bottom_right",
                                                                                "top_left")}
    err = {align: max_abs_error(theirs, b) for align, b in ours.items()}
    demo.observe("transformers, past_seen_tokens=S-1", f"= ours, align='bottom_right' "
                 f"(error {err['bottom_right']:.1e})", err["bottom_right"] == 0.0)
    demo.observe("ours, align='top_left'", f"error {err['top_left']:.1e}  (the query taken as "
                 f"position 0: the wrong row)", err["top_left"] > 1e-3)
    return demo


def qk_norm_float32(seed: int = 0) -> Demo:
    """Qwen3RMSNorm and Gemma3RMSNorm (the QK-norm) normalise in float32 in a float64 model."""
    import torch

    demo = Demo("QK-norm of a .double() Qwen3 / Gemma 3 runs in float32 (max error of "
                "q_norm(q) against attention_np's float64 RMSNorm)")
    q = np.random.default_rng(seed).standard_normal((2, 4, 6, 12))     # (B, h, L, head_dim)
    for family in ("qwen3", "gemma3"):
        layer = copy.deepcopy(case(family, seed)[0]).double()
        params, spec = params_from_transformers(layer)     # Gemma: q_norm = 1 + w
        with torch.no_grad():
            theirs = to_numpy(layer.q_norm(torch.from_numpy(q)))
        ours, _ = rms_norm_forward(q, params["q_norm"], spec.attention.qk_norm_eps)
        err = max_abs_error(theirs, ours)
        demo.observe(f"{type(layer.q_norm).__name__}", f"dtype {theirs.dtype}, {err:.1e}  "
                     "(float32 level)", theirs.dtype == np.float64 and 1e-10 < err < 1e-5)
    module, inputs = case("qwen3", seed)
    r = compare_transformers_attention(module, **inputs, seed=seed)
    worst = max(c.err for c in r.checks if c.rule == "float64")    # not the float32 inv_freq
    demo.observe("compare_transformers_attention qwen3", f"{worst:.1e}  (the copy's norms "
                 "run in float64)", r.ok and worst < 1e-12)
    return demo


def softcap_backends(seed: int = 0) -> Demo:
    """Gemma 2's soft-cap: sdpa refuses it (transformers 5.17 to 5.20: runs without it, no error),
    flex_attention has no CPU backward, eager's softmax is float32; Gemma 3's layer ignores
    ``attn_logit_softcapping``."""
    import torch

    demo = Demo("Gemma 2's attn_logit_softcapping by attention implementation, float64 copy "
                "(out: max error against attention_np float64)")
    module, inputs = case("gemma2", seed)
    layer = copy.deepcopy(module).double()
    params, spec = params_from_transformers(layer)
    x = torch.from_numpy(inputs["hidden_states"])
    cos, sin = rope_cos_sin(inputs["position_ids"], spec.head_dim, spec.attention.rope.theta)
    kw = dict(position_embeddings=(torch.from_numpy(cos), torch.from_numpy(sin)),
              attention_mask=None)
    for impl, error, words in (("sdpa", ValueError, "does not support `softcap`"),
                               ("flex_attention", NotImplementedError, "backward on CPU")):
        demo.observe(impl, *_softcap_backend(layer, impl, error, words, spec, params, inputs, kw))
    # eager: transformers' own (its softmax in float32), then the layer diff asked for it (its
    # float32 casts run in float64: the verdict of the float64 eager)
    B, L = x.shape[:2]
    mask = build_mask(spec, B, L, L, inputs["attention_mask"])
    layer.config._attn_implementation = "eager"
    with torch.no_grad():
        own = to_numpy(layer(x, **{**kw, "attention_mask": torch.from_numpy(
            np.where(mask, 0.0, np.finfo(np.float64).min))})[0])
    options = mha_options(spec, inputs["position_ids"])
    ours = mha_forward(inputs["hidden_states"], inputs["hidden_states"], inputs["hidden_states"],
                       params, mask, **options)[0]
    float32 = max_abs_error(own, ours)
    for impl in ("eager", EAGER_FLOAT64):
        r = compare_transformers_attention(module, **{**inputs, "attn_implementation": impl},
                                           seed=seed)
        out = next(c.err for c in r.checks if c.name == "out")
        own_line = f"its own {float32:.1e} (float32 softmax); " if impl == "eager" else ""
        demo.observe(impl, f"{own_line}layer diff out {out:.1e}  (float64)",
                     r.ok and (impl != "eager" or 1e-10 < float32 < 1e-5))
    layer = copy.deepcopy(case("gemma3", seed)[0]).double()
    with torch.no_grad():
        before = layer(x, **kw)[0]
        layer.attn_logit_softcapping = layer.config.attn_logit_softcapping = 2.0
        after = layer(x, **kw)[0]
    err = max_abs_error(to_numpy(before), to_numpy(after))
    demo.observe("Gemma3Attention, softcapping 2.0", f"output changed by {err:.1e}  (ignored)",
                 err == 0.0)
    return demo


def _softcap_backend(layer, impl: str, error, words: str, spec, params, inputs, kw) -> tuple:
    """``(seen, as_documented)`` for Gemma 2's layer run with ``impl``: it raises ``error``
    (saying ``words``), or (sdpa, transformers 5.17 to 5.20) runs and drops the soft-cap."""
    import torch

    x = torch.from_numpy(inputs["hidden_states"])
    layer.config._attn_implementation = impl
    try:
        with warnings.catch_warnings():      # torch.compile's import warns of torch.jit
            warnings.simplefilter("ignore", DeprecationWarning)
            layer(x, **kw)                   # with grad: flex checks its backward
    except error as e:
        seen = f"{type(e).__name__}: ...{words}..." if words in str(e) else str(e)
        return seen, seen.startswith(error.__name__)
    if impl != "sdpa":
        return "runs", False
    # transformers 5.17 to 5.20: sdpa runs, and leaves the soft-cap out without an error
    B, L = x.shape[:2]
    mask = build_mask(spec, B, L, L, inputs["attention_mask"])     # causal, window, padding
    fill = torch.from_numpy(np.where(mask, 0.0, np.finfo(np.float64).min))
    with torch.no_grad():
        out = to_numpy(layer(x, **{**kw, "attention_mask": fill})[0])
    options = mha_options(spec, inputs["position_ids"])
    h = inputs["hidden_states"]
    ours = {c: mha_forward(h, h, h, params, mask,
                           **{**options, "spec": options["spec"].replace(softcap=c)})[0]
            for c in (spec.attention.softcap, None)}
    capped, uncapped = (max_abs_error(out, ours[c]) for c in (spec.attention.softcap, None))
    return (f"runs: softcap={spec.attention.softcap:g} {capped:.1e}, none {uncapped:.1e}  "
            "(soft-cap dropped, no error)", uncapped < 1e-12 and capped > 1e-3)


def sdpa_drops_sinks(seed: int = 0) -> Demo:
    """transformers' sdpa runs a gpt-oss layer without its sinks, and without an error."""
    import torch

    demo = Demo("gpt-oss's attention sinks by attention implementation, float64 copy (out: max "
                "error against attention_np with sinks=True / sinks=False)")
    module, inputs = case("gpt_oss", seed)
    layer = copy.deepcopy(module).double()
    params, spec = params_from_transformers(layer)
    x, positions = inputs["hidden_states"], inputs["position_ids"]
    B, L = x.shape[:2]
    mask = build_mask(spec, B, L, L, inputs["attention_mask"])         # (B, 1, L, L)
    cos, sin = spec_cos_sin(spec, positions)                            # gpt-oss: d/2 angles
    kw = dict(position_embeddings=(torch.from_numpy(cos), torch.from_numpy(sin)),
              attention_mask=torch.from_numpy(np.where(mask, 0.0, np.finfo(np.float64).min)))
    options = mha_options(spec, positions)
    without = {n: a for n, a in params.items() if n != "sinks"}        # params decide the sinks
    ours = {sinks: mha_forward(x, x, x, params if sinks else without, mask, **options)[0]
            for sinks in (True, False)}
    for impl in ("eager", "sdpa"):
        layer.config._attn_implementation = impl
        with torch.no_grad():
            out = to_numpy(layer(torch.from_numpy(x), **kw)[0])
        with_, without = (max_abs_error(out, ours[s]) for s in (True, False))
        applied = with_ < 1e-12 and without > 1e-3
        dropped = without < 1e-12 and with_ > 1e-3
        demo.observe(impl, f"sinks=True {with_:.1e}, sinks=False {without:.1e}  "
                     f"({'sinks applied' if applied else 'sinks dropped, no error'})",
                     applied if impl == "eager" else dropped)
    return demo


DEMOS = (eager_float32_softmax, rope_float32, min_filled_mask, t5_decoder_bias_offset,
         qk_norm_float32, softcap_backends, sdpa_drops_sinks)
