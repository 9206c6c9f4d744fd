"""The frameworks' intentional differences from attention_np, demonstrated rather than hidden.

Each demonstration runs the framework, measures the documented behaviour and says whether it
still holds. One that no longer reproduces is reported as *unexplained*: the documentation
(``docs/frameworks.md``) would then be wrong, and ``python -m attention_np diff`` fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention_np.compose.mha import init_mha_params, mha_forward
from attention_np.interop import flax as iflax
from attention_np.interop import jax as ijax
from attention_np.interop import torch as itorch
from attention_np.interop.tolerance import check_float32, check_float64, max_abs_error
from attention_np.kernels.fused import sdpa_forward
from attention_np.paper.masks import causal_mask


@dataclass
class Demo:
    title: str
    lines: list = field(default_factory=list)
    explained: bool = True
    not_run: str | None = None      # the framework a demonstration needs but was not given

    def skip(self, framework: str) -> Demo:
        """Not demonstrated: ``framework`` was not given (not installed, or not selected)."""
        self.not_run = framework
        self.lines.append(f"  (not run: needs {framework})")
        return self

    def observe(self, label: str, text: str, holds: bool) -> None:
        """One framework's observed behaviour; ``holds`` is whether it is the documented one."""
        self.lines.append(f"  {label:<36} {text}{'' if holds else '   <-- NOT as documented'}")
        self.explained &= bool(holds)


def _fully_masked_inputs(seed: int):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((3, 1, 2, 4, 4))           # (B, H, L=S, d)
    mask = np.ones((4, 4), dtype=bool)
    mask[1] = False                                           # query 1 may attend to nothing
    return q, k, v, mask


def fully_masked_row(frameworks, seed: int = 0) -> Demo:
    """A query row with every key masked: 0 here, NaN in torch MHA, mean(V) in JAX and Flax."""
    demo = Demo("Fully masked query row (query 1 of 4 may attend to no key), float64")
    if not {"torch", "jax", "flax"} & set(frameworks):    # attention_np alone demonstrates no difference
        return demo.skip("torch")
    q, k, v, mask = _fully_masked_inputs(seed)
    out, cache = sdpa_forward(q, k, v, mask)
    demo.observe("attention_np sdpa_forward", "row = 0, weights 0 (never NaN)",
                 not out[..., 1, :].any() and not cache.weights[..., 1, :].any())
    mean_v = v.mean(axis=-2)                                  # (B, H, d): uniform weights
    if "torch" in frameworks:
        import torch
        kw = itorch.to_torch_sdpa(q, k, v, mask)
        row = itorch.to_numpy(torch.nn.functional.scaled_dot_product_attention(**kw))[..., 1, :]
        demo.observe("torch scaled_dot_product_attention", "row = 0", not row.any())
    if "jax" in frameworks:
        import jax
        with ijax.x64():
            row = ijax.from_jax_layout(np.asarray(jax.nn.dot_product_attention(
                **ijax.to_jax_dpa(q, k, v, mask))))[..., 1, :]
        err = max_abs_error(row, mean_v)
        demo.observe("jax.nn.dot_product_attention", f"row = mean(V)  (|row - mean(V)| = {err:.1e})",
                     err < 1e-5)

    # Multi-head: attention 0 makes our output row b_o (the projection of a zero concat).
    rng = np.random.default_rng(seed + 1)
    params = init_mha_params(8, 2, rng=rng)
    params = {n: (0.1 * rng.standard_normal(p.shape) if n.startswith("b") else p)
              for n, p in params.items()}
    x = rng.standard_normal((1, 4, 8))
    out, _ = mha_forward(x, x, x, params, num_heads=2, mask=mask)
    demo.observe("attention_np mha_forward", "row = b_o (attention 0, then W_o, b_o)",
                 max_abs_error(out[0, 1], params["b_o"]) < 1e-15)
    if "torch" in frameworks:
        import torch
        module = itorch.params_to_torch_mha(params, 2)
        xt = torch.from_numpy(x)
        masks = itorch.masks_to_torch_mha(mask, num_heads=2)
        row = itorch.to_numpy(module(xt, xt, xt, **masks)[0])[0, 1]
        demo.observe("torch MHA need_weights=True", f"row = {row[:2]}...: NaN", np.isnan(row).all())
        row = itorch.to_numpy(module(xt, xt, xt, need_weights=False, **masks)[0])[0, 1]
        demo.observe("torch MHA need_weights=False", "row = b_o (as attention_np)",
                     max_abs_error(row, params["b_o"]) < 1e-12)
    if "flax" in frameworks:
        import jax.numpy as jnp
        # uniform weights: the mean of the projected values, through W_o
        value_mean = (x[0] @ params["W_v"] + params["b_v"]).mean(axis=0)
        expected = value_mean @ params["W_o"] + params["b_o"]
        with ijax.x64():
            module, variables = iflax.flax_mha(params, 2)
            row = np.asarray(module.apply(variables, jnp.asarray(x), jnp.asarray(x), jnp.asarray(x),
                                          mask=jnp.asarray(mask)))[0, 1]
        err = max_abs_error(row, expected)
        demo.observe("flax MultiHeadDotProductAttention",
                     f"row = mean(V W_v + b_v) W_o + b_o  (error {err:.1e})", err < 1e-12)
    return demo


def jax_float32_softmax(frameworks, seed: int = 0) -> Demo:
    """jax.nn.dot_product_attention is float32-accurate even for float64 inputs."""
    demo = Demo("JAX's softmax runs in float32, even for float64 inputs (max |out - float64 oracle|)")
    if "jax" not in frameworks:
        return demo.skip("jax")
    import jax
    rng = np.random.default_rng(seed)
    # float32-rounded values in float64 arrays: our float32 run sees exactly the same inputs
    q, k, v = (2 * rng.standard_normal((3, 2, 2, 16, 16))).astype(np.float32).astype(np.float64)
    oracle, _ = sdpa_forward(q, k, v)
    ours32, _ = sdpa_forward(*(a.astype(np.float32) for a in (q, k, v)))
    err32 = max_abs_error(ours32, oracle)
    demo.lines.append(f"  {'attention_np float32':<36} {err32:.1e}   (float32 reference level)")
    if "torch" in frameworks:
        import torch
        out = torch.nn.functional.scaled_dot_product_attention(**itorch.to_torch_sdpa(q, k, v))
        check = check_float64("out", itorch.to_numpy(out), oracle)
        demo.observe("torch SDPA float64", f"{check.err:.1e}   (true float64)", check.ok)
    with ijax.x64():
        out = jax.nn.dot_product_attention(**ijax.to_jax_dpa(q, k, v))
    out = ijax.from_jax_layout(np.asarray(out))
    as_float64, as_float32 = check_float64("out", out, oracle), check_float32("out", out, oracle, ours32)
    demo.observe(f"jax float64 input, x64 on -> {out.dtype}",
                 f"{as_float64.err:.1e}   (float32-accurate, though float64)",
                 not as_float64.ok and as_float32.ok)    # fails the float64 rule, passes float32
    with ijax.x64(False):
        out = jax.nn.dot_product_attention(**ijax.to_jax_dpa(q, k, v))
    err = max_abs_error(ijax.from_jax_layout(np.asarray(out)), oracle)
    demo.observe("jax float64 input, x64 off", f"{err:.1e}   (computed and returned as {out.dtype})",
                 out.dtype == np.float32)
    return demo


def torch_mha_is_causal(frameworks, seed: int = 0) -> Demo:
    """torch MHA with is_causal=True, need_weights=False and no key_padding_mask uses a causal
    mask instead of the attn_mask it was given."""
    demo = Demo("torch MHA is_causal=True ignores attn_mask (need_weights=False, no padding mask)")
    if "torch" not in frameworks:
        return demo.skip("torch")
    import torch
    rng = np.random.default_rng(seed)
    params = init_mha_params(8, 2, rng=rng)
    x = rng.standard_normal((2, 5, 8))
    given = np.ones((5, 5), dtype=bool)
    given[:, 0] = False                                         # not causal: block key 0
    with_given, _ = mha_forward(x, x, x, params, num_heads=2, mask=given)
    with_causal, _ = mha_forward(x, x, x, params, num_heads=2, mask=causal_mask(5))
    module = itorch.params_to_torch_mha(params, 2)
    xt = torch.from_numpy(x)
    attn_mask = itorch.masks_to_torch_mha(given, num_heads=2)["attn_mask"]
    demo.lines.append("  attn_mask blocks key 0 for every query (not a causal mask)")
    for need_weights in (False, True):
        out = itorch.to_numpy(module(xt, xt, xt, attn_mask=attn_mask, is_causal=True,
                                     need_weights=need_weights)[0])
        e_given, e_causal = max_abs_error(out, with_given), max_abs_error(out, with_causal)
        uses = "causal mask" if e_causal < e_given else "attn_mask"
        expected = "causal mask" if not need_weights else "attn_mask"
        demo.observe(f"need_weights={need_weights}",
                     f"uses the {uses}  (vs ours with attn_mask {e_given:.1e}, "
                     f"with causal {e_causal:.1e})", uses == expected and min(e_given, e_causal) < 1e-12)
    return demo


DEMOS = (fully_masked_row, jax_float32_softmax, torch_mha_is_causal)
