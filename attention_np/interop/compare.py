"""Diff your own multi-head attention module against attention_np in two lines::

    from attention_np.interop import compare_mha
    print(compare_mha(module, query, key, value, key_padding_mask=kpm))   # torch

    from attention_np.interop import compare_flax_mha
    print(compare_flax_mha(module, variables, inputs_q, inputs_kv, mask=mask))   # Flax

Both sides run forward and backward (one random upstream gradient); the report lists the
largest error of the output, the attention weights and every gradient, the tolerance of
:mod:`attention_np.interop.tolerance` and a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention_np._checks import as_bool_mask, check_bool, check_broadcasts_to, check_seed
from attention_np._optional import import_optional
from attention_np.compose.extra_kv import mha_extra_kv_backward, mha_extra_kv_forward
from attention_np.compose.mha import mha_backward, mha_forward
from attention_np.interop import flax as iflax
from attention_np.interop import jax as ijax
from attention_np.interop import torch as itorch
from attention_np.interop.tolerance import FACTOR32, FLOOR_ULPS, RTOL64, judge
from attention_np.paper.masks import causal_mask
from attention_np.variants.spec import AttentionSpec

# Flax's normalize_qk: nn.LayerNorm(use_bias=False) at its default epsilon
FLAX_QK_NORM_EPS = 1e-6


@dataclass
class MHAReport:
    """What :func:`compare_mha` or :func:`compare_flax_mha` found. ``ok`` is the verdict;
    ``print(report)`` shows the table.

    ``checks`` holds one :class:`~attention_np.interop.tolerance.Check` per array ("out",
    "weights", "dquery", ..., "dW_q", ...; parameter gradients in attention_np's layout, e.g.
    torch's weight gradients transposed); under float32 also "ours <name>", attention_np's own
    float32 error held to the framework's.
    """

    module: str
    dtype: str
    checks: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    excluded_rows: list = field(default_factory=list)   # (batch, position): left out, every key masked
    weights: str = ""           # the weights' stored dtype and the one both ran in (transformers)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        if self.dtype == "float64":
            rule = f"float64: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|)"
        else:
            rule = (f"float32: each side's max error against a float64 oracle <= {FACTOR32:g} x "
                    f"the other's (floor {FLOOR_ULPS:g} ulp)")
        lines = [f"{self.module} ({self.dtype}) vs attention_np -> "
                 f"{'AGREE' if self.ok else 'MISMATCH'}", f"tolerance {rule}",
                 *([self.weights] if self.weights else []),
                 f"{'array':<14} {'max abs err':>12} {'max rel err':>12} {'tolerance':>10}  ok"]
        tiny = 1e3 * np.finfo(self.dtype).eps
        for c in self.checks:
            rel = f"{c.rel:>12.2e}" if c.size > tiny else f"{'(ref ~ 0)':>12}"
            lines.append(f"{c.name:<14} {c.err:>12.2e} {rel} {c.tol:>10.1e}  "
                         f"{'yes' if c.ok else 'NO'}")
        if any(c.size <= tiny for c in self.checks):
            lines.append("(ref ~ 0): the reference is 0 up to rounding, e.g. db_k: adding the same "
                         "number to a row of scores leaves the softmax unchanged")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _judge(report: MHAReport, got: dict, ours) -> dict:
    """Fill ``report.checks`` under the tolerance policy; ``ours(dtype)`` runs attention_np."""
    oracle = ours(np.float64)
    report.checks = judge(got, oracle, None if report.dtype == "float64" else ours(np.float32))
    return oracle


def _fully_masked_rows(mask, oracle: dict, num_heads: int) -> int:
    """How many (batch, head, query) rows of the scores have every key masked."""
    if mask is None:
        return 0
    L, S = oracle["out"].shape[-2], oracle["dkey"].shape[-2]
    scores_shape = oracle["out"].shape[:-2] + (num_heads, L, S)            # (..., h, L, S)
    full = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, scores_shape))
    return int((~full.any(axis=-1)).sum())


def _restore(module, saved, training):
    for p, g in zip(module.parameters(), saved, strict=True):
        p.grad = g
    module.train(training)


def _as_input(name: str, a, np_dtype, notes: list) -> np.ndarray:
    """One input of a diff as an array of the module's dtype ``np_dtype``: floating (an integer
    or bool input is a ``TypeError``, not silently cast), cast with a note in ``notes``."""
    a = itorch.to_numpy(a)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{name} must be a floating-point array, got dtype {a.dtype} (the "
                        f"module is {np.dtype(np_dtype).name}: cast it yourself if you mean it)")
    if a.dtype != np_dtype:
        notes.append(f"{name} {a.dtype} cast to the module's {np.dtype(np_dtype).name} "
                     f"before both ran")
    return a.astype(np_dtype)


def _check_mha_inputs(module, inputs, np_dtype) -> tuple[list, list]:
    """``query, key, value`` as arrays of the module's dtype, checked against the module before
    it runs (torch's own errors are bare asserts): floating, 2-D or 3-D, widths ``embed_dim``,
    ``kdim``, ``vdim``, one batch and one key length. Returns the arrays and a note per cast."""
    arrays, notes = [], []
    widths = {"query": module.embed_dim, "key": module.kdim, "value": module.vdim}
    for (name, width), a in zip(widths.items(), inputs, strict=True):
        a = _as_input(name, a, np_dtype, notes)
        if a.ndim not in (2, 3) or a.shape[-1] != width:
            layout = "(N, L, E)" if module.batch_first else "(L, N, E)"
            raise ValueError(f"{name} must be (L, {width}) or {layout} with the last dim {width} "
                             f"(the module's {'embed_dim' if name == 'query' else name[0] + 'dim'}), "
                             f"got shape {a.shape}")
        arrays.append(a)
    q, k, v = arrays
    if len({x.ndim for x in arrays}) != 1:
        raise ValueError(f"query, key and value must all be batched or all unbatched, got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"key and value must agree in all but the last dim, got shapes "
                         f"{k.shape} and {v.shape}")
    if q.ndim == 3:
        b = 0 if module.batch_first else 1
        if q.shape[b] != k.shape[b]:
            raise ValueError(f"query has batch {q.shape[b]} but key has batch {k.shape[b]} "
                             f"(query {q.shape}, key {k.shape})")
    return arrays, notes


def _check_mha_extras(torch, module, arrays, np_dtype, masks: dict, statics: dict) -> tuple:
    """``key_padding_mask``, ``attn_mask`` (``masks``) and ``static_k``, ``static_v``
    (``statics``) checked against the module and the inputs ``arrays`` before torch runs (its
    own errors are bare asserts, or a ``TypeError`` about a NumPy array): the masks bool or
    floating, ``(N, S)`` (``(S,)`` unbatched) and ``(L, S)`` or ``(N*num_heads, L, S)``, as
    tensors (a float mask in the module's dtype); the static heads floating,
    ``(N*num_heads, S', head_dim)``. Returns the masks (tensors) and the static heads (arrays)."""
    q, k = arrays[0], arrays[1]
    batched = q.ndim == 3
    b, seq = (0, 1) if module.batch_first else (1, 0)
    N = q.shape[b] if batched else 1
    L, S = (q.shape[seq], k.shape[seq]) if batched else (q.shape[0], k.shape[0])
    heads = _check_static_heads(module, statics, np_dtype, N)
    if "static_k" in heads:                 # the keys are the given heads, not key's projection
        S = heads["static_k"].shape[1]
    shapes = {"key_padding_mask": [(N, S)] if batched else [(S,)],
              "attn_mask": [(L, S), (N * module.num_heads, L, S)]}
    sizes = f"N={N}, L={L}, S={S}, num_heads={module.num_heads}"
    out = {name: None if m is None else _check_mha_mask(torch, name, m, shapes[name], sizes, np_dtype)
           for name, m in masks.items()}
    return out, heads


def _check_static_heads(module, statics: dict, np_dtype, N: int) -> dict:
    """The given ``static_k``/``static_v`` as arrays, each floating ``(N*num_heads, S', head_dim)``."""
    heads = {}
    for name, a in statics.items():
        if a is None:
            continue
        a = _as_input(name, a, np_dtype, [])
        h = module.num_heads
        if a.ndim != 3 or a.shape[0] != N * h or a.shape[2] != module.head_dim:
            raise ValueError(f"{name} must be (N*num_heads, S, head_dim) = ({N * h}, S, "
                             f"{module.head_dim}), got shape {a.shape}")
        heads[name] = a
    return heads


def _check_mha_mask(torch, name: str, m, shapes: list, sizes: str, np_dtype):
    """The mask ``m`` as a tensor, bool or floating (in the module's dtype), of one of ``shapes``."""
    a = itorch.to_numpy(m)
    if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{name} must be bool (True = blocked, torch's convention) or floating "
                        f"(added to the scores), got dtype {a.dtype}")
    if a.shape not in shapes:
        raise ValueError(f"{name} must have shape {' or '.join(map(str, shapes))} "
                         f"for these inputs ({sizes}), got {a.shape}")
    return torch.from_numpy(np.ascontiguousarray(a if a.dtype == np.bool_ else a.astype(np_dtype)))


def _check_flax_inputs(params: dict, num_heads: int, inputs, mask) -> tuple[list, list, object]:
    """``inputs_q, inputs_k, inputs_v`` as arrays of the variables' dtype and ``mask`` as a bool
    array, checked before Flax runs (its own errors are bare asserts or a parameter-shape error):
    floating, ``(..., L or S, features)`` with the kernels' input widths, one batch shape, one
    key length; ``mask`` bool, broadcastable to ``(..., num_heads, L, S)``. Returns the arrays,
    a note per cast and the mask."""
    np_dtype = params["W_q"].dtype
    arrays, notes = [], []
    names = {"inputs_q": ("W_q", "L"), "inputs_k": ("W_k", "S"), "inputs_v": ("W_v", "S")}
    for (name, (W, length)), a in zip(names.items(), inputs, strict=True):
        a = _as_input(name, a, np_dtype, notes)
        width = params[W].shape[0]
        if a.ndim < 2 or a.shape[-1] != width:
            raise ValueError(f"{name} must be (..., {length}, {width}) (the last dim is the "
                             f"{W[-1]} kernel's input width {width}), got shape {a.shape}")
        arrays.append(a)
    q, k, v = arrays
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(f"inputs_q, inputs_k and inputs_v must have the same batch dims, got "
                         f"shapes {q.shape}, {k.shape}, {v.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"inputs_k has S={k.shape[-2]} positions but inputs_v has "
                         f"S={v.shape[-2]} (shapes {k.shape}, {v.shape})")
    if mask is not None:
        mask = as_bool_mask(itorch.to_numpy(mask), "mask")
        scores = q.shape[:-2] + (num_heads, q.shape[-2], k.shape[-2])
        check_broadcasts_to(mask, "mask", scores, "(..., num_heads, L, S)")
    return arrays, notes, mask


def compare_mha(module, query, key=None, value=None, *, key_padding_mask=None, attn_mask=None,
                is_causal: bool = False, need_weights: bool = True,
                average_attn_weights: bool = True, static_k=None, static_v=None,
                seed: int = 0) -> MHAReport:
    """Run ``module`` and :func:`mha_forward` on the same inputs, forward and backward, and diff.

    Parameters
    ----------
    module : torch.nn.MultiheadAttention
        float32 or float64; any ``batch_first``; packed or separate projections, with or
        without bias. Dropout is switched off for the call (``eval()``, then restored), and the
        module's ``.grad`` values are left as they were.
    query, key, value : arrays or tensors in the module's layout
        ``key`` defaults to ``query`` and ``value`` to ``key`` (self-attention). Each gets its
        own gradient.
    key_padding_mask, attn_mask, is_causal, need_weights, average_attn_weights
        Passed to the module as they are; converted with
        :func:`~attention_np.interop.torch.masks_from_torch_mha` for attention_np
        (``is_causal`` is torch's hint that ``attn_mask`` is causal, so ours uses ``attn_mask``).
    static_k, static_v : float array or tensor (N*num_heads, S, head_dim), optional
        torch's given key (value) heads instead of the projection of ``key`` (``value``);
        their gradients are diffed as "dstatic_k", "dstatic_v". A module built with
        ``add_bias_kv`` (learned ``bias_k``, ``bias_v``: "dbias_k", "dbias_v") or
        ``add_zero_attn`` is diffed with :mod:`attention_np.compose.extra_kv`.
    seed : int
        Seed of the random upstream gradient.

    Returns
    -------
    MHAReport
    """
    torch = import_optional("torch", "attention_np.interop.compare_mha")
    np_dtype = _check_mha_module(torch, module, {"query": query, "key": key, "value": value,
                                                 "static_k": static_k, "static_v": static_v})
    _check_mha_flags(is_causal, attn_mask, need_weights, average_attn_weights, seed)
    key = query if key is None else key
    value = key if value is None else value
    arrays, cast = _check_mha_inputs(module, (query, key, value), np_dtype)
    masks, given = _check_mha_extras(torch, module, arrays, np_dtype,
                                     {"key_padding_mask": key_padding_mask, "attn_mask": attn_mask},
                                     {"static_k": static_k, "static_v": static_v})
    report = MHAReport("torch.nn.MultiheadAttention", np.dtype(np_dtype).name)
    report.notes += cast
    if module.training and module.dropout > 0:
        report.notes.append(f"dropout={module.dropout} switched off (eval mode) for the diff")
    call = _MHACall(module=module, arrays=arrays, masks=masks, is_causal=is_causal,
                    need_weights=need_weights, average_attn_weights=average_attn_weights,
                    swap=not module.batch_first and arrays[0].ndim == 3,  # (L, N, E) -> ours (N, L, E)
                    dout=np.random.default_rng(seed).standard_normal(
                        arrays[0].shape[:-1] + (module.embed_dim,)).astype(np_dtype))
    got = _torch_mha(torch, call, given)
    oracle = _judge(report, got, call.ours)
    report.notes += _mha_notes(call, oracle)
    return report


@dataclass
class _MHACall:
    """One :func:`compare_mha` call: the checked inputs in the module's layout, torch's masks
    (tensors), and, once torch has run, the parameters and static heads attention_np reads."""

    module: object
    arrays: list
    masks: dict
    is_causal: bool
    need_weights: bool
    average_attn_weights: bool
    swap: bool                      # the module is (L, N, E): ours is (N, L, E)
    dout: np.ndarray                # the upstream gradient, in the module's layout
    params: dict = field(default_factory=dict)
    num_heads: int = 0
    statics: dict = field(default_factory=dict)     # "static_k"/"static_v": ours (N, h, S, d)

    def ours_layout(self, a):
        return np.swapaxes(a, 0, 1) if self.swap else a

    @property
    def extra(self) -> bool:
        """Appended key positions: add_bias_kv, add_zero_attn or static_k/v."""
        return self.module.bias_k is not None or self.module.add_zero_attn or bool(self.statics)

    def ours(self, dt) -> dict:
        """attention_np's outputs and gradients in dtype ``dt``, named as :func:`_torch_mha`'s."""
        mask, bias = self.mask_and_bias()
        x = [self.ours_layout(a).astype(dt) for a in self.arrays]
        p = {n: a.astype(dt) for n, a in self.params.items()}
        b = None if bias is None else bias.astype(dt)
        dout = self.ours_layout(self.dout).astype(dt)
        if self.extra:
            st = {n: a.astype(dt) for n, a in self.statics.items()}
            o, cache = mha_extra_kv_forward(*x, p, mask, num_heads=self.num_heads, bias=b,
                                            zero_attn=self.module.add_zero_attn, **st)
            dq, dk, dv, g = mha_extra_kv_backward(dout, cache)
        else:
            o, cache = mha_forward(*x, p, num_heads=self.num_heads, mask=mask, bias=b)
            dq, dk, dv, g = mha_backward(dout, cache)
        result = {"out": o}
        if self.need_weights:     # torch averages over heads unless average_attn_weights=False
            w = cache.attention.weights
            result["weights"] = w.mean(axis=-3) if self.average_attn_weights else w
        result.update(dquery=dq, dkey=dk, dvalue=dv, **{f"d{n}": a for n, a in g.items()})
        return result

    def mask_and_bias(self):
        return itorch.masks_from_torch_mha(self.masks["key_padding_mask"], self.masks["attn_mask"],
                                           num_heads=self.num_heads)


def _check_mha_module(torch, module, inputs: dict):
    """The module's NumPy dtype (float32 or float64), after refusing a module that is not
    ``nn.MultiheadAttention``, complex weights, and an input that is not real (by its name)."""
    if not isinstance(module, torch.nn.MultiheadAttention):
        raise TypeError(f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}")
    dtype = next(module.parameters()).dtype
    if dtype.is_complex:
        raise TypeError(f"module weights must be real: attention_np is real-valued (a softmax over "
                        f"complex scores is not defined); got module dtype {dtype}")
    for name, a in inputs.items():
        if a is not None:                  # a complex, int or bool input, or a str, by its name
            itorch.check_real_input(a, name)
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"module dtype must be float32 or float64, got {dtype}")
    return np.float64 if dtype == torch.float64 else np.float32


def _check_mha_flags(is_causal, attn_mask, need_weights, average_attn_weights, seed) -> None:
    check_bool(is_causal, "is_causal")
    if is_causal and attn_mask is None:
        raise ValueError("is_causal=True needs attn_mask: torch's is_causal is a hint that "
                         "attn_mask is causal, not a mask of its own (pass the causal attn_mask too)")
    check_bool(need_weights, "need_weights")
    check_bool(average_attn_weights, "average_attn_weights")
    check_seed(seed)


def _torch_mha(torch, call: _MHACall, given: dict) -> dict:
    """Run the module forward and backward in eval mode (its ``.grad`` and training mode restored
    after); fill ``call``'s parameters and static heads; torch's results in attention_np's layout."""
    module = call.module
    statics = {n: torch.tensor(a, requires_grad=True) for n, a in given.items()}
    saved, training = [p.grad for p in module.parameters()], module.training
    try:
        module.train(False)
        out, weights, dinputs, grads = itorch.mha_forward_backward(
            module, *call.arrays, call.dout, key_padding_mask=call.masks["key_padding_mask"],
            attn_mask=call.masks["attn_mask"], need_weights=call.need_weights,
            average_attn_weights=call.average_attn_weights, is_causal=call.is_causal, **statics)
        call.params, call.num_heads = itorch.params_from_torch_mha(module)
    finally:
        _restore(module, saved, training)
    got = {"out": call.ours_layout(out)}
    if weights is not None:
        got["weights"] = weights
    got.update({n: call.ours_layout(d) for n, d in zip(("dquery", "dkey", "dvalue"), dinputs, strict=True)})
    got.update({f"d{n}": g for n, g in grads.items()})
    N = call.arrays[0].shape[0 if module.batch_first or call.arrays[0].ndim == 2 else 1]
    head = (N, call.num_heads, -1, module.head_dim)                  # torch (N*h, S, d) -> ours
    got.update({f"d{n}": itorch.to_numpy(t.grad).reshape(head) for n, t in statics.items()})
    call.statics = {n: itorch.to_numpy(t).reshape(head) for n, t in statics.items()}
    return got


def _mha_notes(call: _MHACall, oracle: dict) -> list:
    """The known differences this call meets: fully masked rows (torch NaN, ours 0), and torch's
    ``is_causal`` fast path that ignores a non-causal ``attn_mask``."""
    notes = []
    mask, _ = call.mask_and_bias()
    n_rows = _fully_masked_rows(mask, oracle, call.num_heads)
    if n_rows:
        notes.append(f"{n_rows} (batch, head, query) row(s) have every key masked: "
                     "torch MHA gives NaN there (need_weights=True), attention_np "
                     "attention 0; a known difference, see docs/frameworks.md")
    attn_mask = call.masks["attn_mask"]
    if call.is_causal and not call.need_weights and call.masks["key_padding_mask"] is None:
        given, given_bias = itorch.masks_from_torch_mha(attn_mask=attn_mask, num_heads=call.num_heads)
        # torch's own float causal mask (0 / -inf) splits into a causal mask and a zero bias
        has_bias = given_bias is not None and given_bias.any()
        if given is None or has_bias or not (given == causal_mask(*given.shape[-2:])).all():
            notes.append("is_causal=True with need_weights=False and no key_padding_mask: "
                         "torch applies a causal mask and ignores this attn_mask, which is "
                         "not causal (a known difference)")
    return notes


def compare_flax_mha(module, variables, inputs_q, inputs_k=None, inputs_v=None, *, mask=None,
                     seed: int = 0) -> MHAReport:
    """Run a Flax ``MultiHeadDotProductAttention`` and :func:`mha_forward`, forward and
    backward (``jax.vjp`` w.r.t. the inputs and every parameter), and diff.

    Parameters
    ----------
    module : flax.linen.MultiHeadDotProductAttention
        With or without ``normalize_qk`` (a LayerNorm without bias, eps 1e-6, on every query and
        key head: ``AttentionSpec(qk_norm="layer", qk_norm_eps=1e-6)``, "dq_norm", "dk_norm" its scales'
        gradients); dropout is off (``deterministic=True``).
    variables : dict
        Its variables, ``{"params": ...}``, float32 or float64; float64 runs with JAX's x64
        switched on for the call only.
    inputs_q, inputs_k, inputs_v : (..., L, E), (..., S, kdim), (..., S, vdim)
        ``inputs_k`` defaults to ``inputs_q``, ``inputs_v`` to ``inputs_k`` (Flax's defaults).
    mask : bool, broadcastable to (..., h, L, S), optional
        True = may attend: Flax's convention and ours.
    seed : int
        Seed of the random upstream gradient.
    """
    import_optional("flax", "attention_np.interop.compare_flax_mha")
    jax = import_optional("jax", "attention_np.interop.compare_flax_mha")
    import flax.linen as nn

    if not isinstance(module, nn.MultiHeadDotProductAttention):
        raise TypeError(f"module must be a flax.linen.MultiHeadDotProductAttention, "
                        f"got {type(module).__name__}")
    params, num_heads = iflax.params_from_flax(jax.tree_util.tree_map(np.asarray, variables))
    np_dtype = params["W_q"].dtype
    if np_dtype not in (np.float32, np.float64):
        raise TypeError(f"variables must be float32 or float64, got {np_dtype}")
    inputs_k = inputs_q if inputs_k is None else inputs_k
    inputs_v = inputs_k if inputs_v is None else inputs_v
    check_seed(seed)
    arrays, cast, mask = _check_flax_inputs(params, num_heads, (inputs_q, inputs_k, inputs_v), mask)
    report = MHAReport("flax MultiHeadDotProductAttention", np.dtype(np_dtype).name)
    report.notes += cast

    shape = arrays[0].shape[:-1] + (params["W_o"].shape[1],)                # (..., L, out)
    dout = np.random.default_rng(seed).standard_normal(shape).astype(np_dtype)
    with ijax.x64(np_dtype == np.float64):
        out, dinputs, grads = iflax.forward_backward(module, variables, *arrays, dout, mask)
    got = {"out": out, **dict(zip(("dquery", "dkey", "dvalue"), dinputs, strict=True)),
           **{f"d{n}": g for n, g in grads.items()}}

    def ours(dt):
        p = {n: a.astype(dt) for n, a in params.items()}
        norm = dict(spec=AttentionSpec(qk_norm="layer", qk_norm_eps=FLAX_QK_NORM_EPS)) \
            if module.normalize_qk else {}
        o, cache = mha_forward(*(a.astype(dt) for a in arrays), p, mask=mask, num_heads=num_heads,
                               **norm)
        dq, dk, dv, g = mha_backward(dout.astype(dt), cache)
        return {"out": o, "dquery": dq, "dkey": dk, "dvalue": dv,
                **{f"d{n}": a for n, a in g.items()}}

    oracle = _judge(report, got, ours)
    n_rows = _fully_masked_rows(mask, oracle, num_heads)
    if n_rows:
        report.notes.append(f"{n_rows} (batch, head, query) row(s) have every key masked: Flax "
                            "gives them uniform weights (mean of the values), attention_np "
                            "attention 0; a known difference, see docs/frameworks.md")
    return report
