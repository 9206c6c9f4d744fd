"""The steps of multi-head attention with its variants, shared by the full forward, the decode
step and cross-attention decoding:

0. drop: the inputs no pair of the call's mask attends -> 0, once (:func:`drop_unattended`)
1. project: ``x @ W + b`` for every head at once, then split into heads
2. q/k transforms, before the kernel: QK-norm, then RoPE (as transformers' Llama and Qwen3 do)
3. attend: a kernel of :mod:`attention_np.kernels.registry` on the call's one :class:`Plan`
4. concat the heads, 5. project with ``W^O``

Each step has its backward here; :func:`transform_qk` returns its steps as a tuple walked in
reverse by :func:`transform_qk_backward`.
"""

from __future__ import annotations

from attention_np.compose.layer_spec import Layer, layer_plan
from attention_np.kernels.fast_linear import linear_backward, linear_forward
from attention_np.kernels.guard import drop_masked
from attention_np.kernels.plan import Plan
from attention_np.kernels.registry import run
from attention_np.paper.heads import merge_heads, split_heads
from attention_np.variants.qk_layernorm import qk_norm_backward, qk_norm_forward
from attention_np.variants.rope import rotate_heads, rotate_heads_backward


def drop_unattended(q, k, v, mask, *, heads: bool = False):
    """Step 0: :func:`~attention_np.kernels.guard.drop_masked` with the prepared plan's whole mask
    ``(..., h, L, S)``, once per call: a key (query) is zeroed when no head attends it, so that a
    NaN there never reaches an output or a gradient through ``0 * NaN``.

    ``q, k, v`` are the inputs ``(..., L | S, d)`` of a full forward (before the projections) or,
    with ``heads=True``, the heads ``(..., h | h_kv, T | S, d)`` of a decode step, whose keys and
    values come projected from its cache. The kernel then takes the plan as built
    (``Plan.prepared``) and drops nothing again.
    """
    if mask is None:
        return q, k, v
    if mask.ndim >= 3:
        mask = mask.any(axis=-3, keepdims=heads)    # alive for any head: (..., [1,] L, S)
    return drop_masked(q, k, v, mask)


def project_heads(x, params: dict, which: str, heads: int):
    """Step 1: ``split_heads(x @ W + b)`` with ``W = params["W_" + which]``:
    ``(..., n, d_in) -> (..., heads, n, d)``."""
    return split_heads(linear_forward(x, params[f"W_{which}"], params.get(f"b_{which}")), heads)


def project_heads_backward(dheads, x, params: dict, which: str):
    """Backward of :func:`project_heads`: ``(dx, dW, db)`` (``db`` None without a bias).

    forward: ``heads = split_heads(x @ W + b)``  ->  ``dproj = merge_heads(dheads)``,
    ``dx = dproj @ W.T``, ``dW = x.T @ dproj``, ``db = sum(dproj)``.
    """
    return linear_backward(merge_heads(dheads), x, params[f"W_{which}"], f"b_{which}" in params)


def transform_qk(q, k, params: dict, layer: Layer, q_positions, k_positions):
    """Step 2, beyond the paper: QK-norm (when ``params`` has its weights; per head, or over all
    heads with ``spec.qk_norm_scope="all"``), then RoPE (when the spec has it).
    ``q (..., h, L, d_k)``, ``k (..., h_kv, S, d_k)``; ``k`` may be None (cross-attention
    decoding transforms its queries alone).

    Returns ``q, k, steps``: ``steps`` is what :func:`transform_qk_backward` needs.
    """
    steps = []
    if layer.qk_norm:           # the spec's kind: RMSNorm or (mean-centred) LayerNorm
        kind, eps, scope = layer.spec.qk_norm, layer.spec.qk_norm_eps, layer.spec.qk_norm_scope
        q, q_norm = qk_norm_forward(kind, q, params, "q_norm", eps, scope)
        k, k_norm = (None, None) if k is None else qk_norm_forward(kind, k, params, "k_norm", eps,
                                                                   scope)
        steps.append(("qk_norm", (q_norm, k_norm)))
    if layer.spec.rope is not None:
        q, k, saved = rotate_heads(q, k, q_positions, k_positions, layer.spec.rope.options())
        steps.append(("rope", saved))
    return q, k, tuple(steps)


def transform_qk_backward(dq, dk, steps: tuple, grads: dict):
    """Backward of :func:`transform_qk`, walking its steps in reverse; the norms' weight
    gradients go into ``grads``."""
    for name, saved in reversed(steps):
        if name == "rope":
            # forward: q, k = RoPE(q), RoPE(k)  ->  rotate the gradients back
            dq, dk = rotate_heads_backward(dq, dk, saved)
        else:
            # forward: q, k = Norm(q), Norm(k)  (RMSNorm or LayerNorm; weights, optional bias)
            for name, i in (("q_norm", 0), ("k_norm", 1)):
                if saved[i] is None:                  # cross-attention decoding: q alone
                    continue
                d, g = qk_norm_backward(dq if i == 0 else dk, saved[i])
                dq, dk = (d, dk) if i == 0 else (dq, d)
                grads[name] = g["w"]
                if "b" in g:
                    grads[f"{name}_bias"] = g["b"]
    return dq, dk


def attend_heads(q, k, v, params: dict, layer: Layer, *, plan: Plan | None = None, **arrays):
    """Step 3: Eq. (1) on every head by the spec's kernel; ``(heads, cache)``.

    ``plan`` is the call's (:func:`~attention_np.compose.layer_spec.layer_plan`, its support
    checked); without one, the plan of ``arrays`` (``mask``, ``bias``, ``is_causal``, ``window``,
    ``rng``, as :func:`layer_plan` takes them) is built and checked here.
    """
    if plan is None:
        plan = layer_plan(layer, params, **arrays)
    return run(layer.spec.kernel, q, k, v, plan)                    # (..., h, L, d_v)


def output(heads, params: dict):
    """Steps 4 and 5: ``concat = merge_heads(heads)``, ``out = concat @ W_o + b_o``;
    returns ``(out, concat)``."""
    concat = merge_heads(heads)                                      # (..., L, h*d_v)
    return linear_forward(concat, params["W_o"], params.get("b_o")), concat
