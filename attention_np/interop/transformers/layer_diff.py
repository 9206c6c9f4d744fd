"""Diff one attention layer of a Hugging Face ``transformers`` model against attention_np::

    from attention_np.interop.transformers import compare_transformers_attention
    print(compare_transformers_attention(model.model.layers[0].self_attn, hidden_states))

The layer is read as it is stored (``nn.Linear`` or GPT-2's packed ``Conv1D``, grouped-query
heads, a free ``head_dim``, with or without biases, RoPE parameters, a sliding window); a copy is
cast to float64, both sides run forward and backward with one random upstream gradient, and the
report (:class:`~attention_np.interop.compare.MHAReport`) lists the output, the input gradients
and every parameter gradient. The traps this meets are in ``docs/frameworks.md``.

Needs ``torch`` and ``transformers``; no network: build the model from a tiny config.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import numpy as np

from attention_np._checks import check_seed
from attention_np._optional import import_optional
from attention_np.interop.compare import MHAReport
from attention_np.interop.tolerance import judge
from attention_np.interop.torch import check_real_input, to_numpy
from attention_np.interop.transformers.layer_reading import (  # noqa: F401  (re-exported)
    SUPPORTED,
    ALiBi,
    GridTable,
    LayerSpec,
    T5Buckets,
    UnsupportedLayer,
    layer_spec,
    no_causal,
    params_from_transformers,
    qkv_inputs,
)
from attention_np.interop.transformers.layer_source import family_function, forward_parameters
from attention_np.interop.transformers.reading_scores import keep_mask
from attention_np.interop.transformers.recent import (
    EAGER_FLOAT64,
    float64_upcasts,
    own_eager_only,
    prepare_recent_layer,
    scores_in_own_method,
)
from attention_np.interop.transformers.replay import (
    dead_rows,
    float64_rope_function,
    leave_out_rows,
    replay,
)
from attention_np.interop.transformers.rotary import (  # noqa: F401  (rope_cos_sin re-exported)
    check_rope_frequencies,
    float64_rotary,
    float64_table,
    model_frequencies,
    model_rotary_checks,
    rope_cos_sin,
    spec_cos_sin,
)
from attention_np.interop.transformers.weights import stored_dtypes, stored_weights_line
from attention_np.variants.window import sliding_window_mask

# what the float64 copy can run, forward and backward, on the CPU (None: the module's own)
IMPLEMENTATIONS = ("sdpa", "eager", EAGER_FLOAT64, None)


def layer_implementation(module, spec: LayerSpec, requested: str) -> tuple[str, list]:
    """The attention implementation a layer's float64 copy runs for ``requested`` (the one
    asked for, or the one the model was built with), and a note when it is not ``requested``.

    Whatever was asked, the verdict is the one :func:`~attention_np.interop.transformers.
    model_diff.compare_transformers_model` gives the layer: torch's side in float64 throughout.
    ``"sdpa"`` is float64; ``"eager"`` runs with its float32 upcasts in float64
    (:func:`~attention_np.interop.transformers.recent.float64_upcasts`); the rest is switched
    as the whole-model diff switches it: gpt-oss's sinks to ``"eager"`` (sdpa drops them), a
    soft-cap from sdpa to :data:`EAGER_FLOAT64` (sdpa refuses it), GPT-2's
    ``reorder_and_upcast_attn`` from eager to sdpa (float32 scores, and an error on a float64
    mask), an implementation without a float64 backward on the CPU (``flex_attention``: no
    backward on the CPU; the flash kernels: CUDA) to what the whole-model diff runs."""
    name = type(module).__name__
    softcap = spec.attention.softcap
    default = "eager" if spec.sinks else EAGER_FLOAT64 if softcap is not None else "sdpa"
    same = "as compare_transformers_model does"
    if requested is None:                          # a config never given one
        return default, []
    if requested not in IMPLEMENTATIONS:
        return default, [f"attn_implementation {requested!r} has no float64 backward on the CPU "
                         f"(flex_attention: none on the CPU; the flash kernels: CUDA only): the "
                         f"copy ran {default!r}, {same}"]
    if spec.sinks and requested != "eager":
        return "eager", [f"{name}'s sinks: transformers' {requested!r} drops them without an "
                         f"error; the copy ran 'eager' (float64 throughout), {same}"]
    if softcap is not None and requested == "sdpa":
        return EAGER_FLOAT64, [f"{name}'s soft-cap ({softcap:g}): transformers' sdpa "
                               f"refuses it; the copy ran {EAGER_FLOAT64!r} (eager with a float64 "
                               f"softmax), {same}"]
    if requested == EAGER_FLOAT64 and "position_bias" in forward_parameters(module):
        return "eager", [f"{name} passes its position bias to the attention function, which "
                         f"{EAGER_FLOAT64!r} (Gemma 2's eager) leaves out; the copy ran 'eager' "
                         "(its float32 casts in float64)"]
    if requested == "eager" and getattr(module, "reorder_and_upcast_attn", False):
        return "sdpa", [f"{name} with reorder_and_upcast_attn=True computes its scores in "
                        "float32 under eager (and raises on a float64 mask); the copy ran 'sdpa' "
                        f"(float64, which ignores the option), {same}"]
    return requested, []


def _eager_upcasts(module) -> bool:
    """Whether the family's eager attention casts to float32 (``softmax(..., dtype=torch.
    float32)``, ``.float()``): read in its ``eager_attention_forward``'s source."""
    fn = family_function(module, "eager_attention_forward")
    try:
        source = inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return False
    return "float32" in source or ".float()" in source


def build_mask(spec: LayerSpec, batch: int, L: int, S: int,
               attention_mask=None) -> np.ndarray | None:
    """Our bool mask (B, 1, L, S), True = may attend: padding, causal, sliding window.

    ``attention_mask`` (B, S) is transformers' 0/1 padding mask (1 = a real token). The causal
    and window masks compare cache indices, as transformers' ``masking_utils`` does: query ``t``
    is index ``S - L + t`` (the last ``L`` of ``S``), key ``j`` is index ``j``; RoPE's
    ``position_ids`` do not enter. The window is the spec's ``(left, right)``: a bidirectional
    layer's symmetric (ModernBERT: ``|i - j| < W``).
    """
    mask = None
    if attention_mask is not None:
        mask = np.asarray(attention_mask).astype(bool)[:, None, None, :]      # (B, 1, 1, S)
    window = spec.attention.window
    if spec.is_causal or window is not None:
        # the L queries are the last L of the S positions
        left, right = window or (None, None)
        right = 0 if spec.is_causal else right
        keep = sliding_window_mask(L, S, left=left, right=right, align="bottom_right")  # (L, S)
        mask = keep if mask is None else mask & keep
    if mask is None:
        return None
    return np.broadcast_to(mask, (batch, 1, L, S))


def _torch_mask(mask, torch):
    """transformers' own 4-D additive mask: 0 where allowed, the dtype's minimum elsewhere."""
    if mask is None:
        return None
    fill = np.where(mask, 0.0, np.finfo(np.float64).min)
    return torch.from_numpy(np.ascontiguousarray(fill))


def _call_kwargs(module, spec: LayerSpec, mask, kv, positions, position_bias, torch) -> dict:
    """The keyword arguments of the layer's own ``forward``, by its parameter names: its mask
    and encoder output (:func:`_mask_kwargs`), its bookkeeping arguments, its positions
    (:func:`_position_kwargs`), a T5 position bias, and a relative table's image size."""
    names = forward_parameters(module)
    kwargs = _mask_kwargs(module, spec, names, mask, kv, torch)
    if "layer_idx" in names:                        # Zamba: its cache's index (no cache here)
        kwargs["layer_idx"] = getattr(module, "layer_idx", None)
    if "alibi" in names:                            # Falcon: positional, None without ALiBi
        kwargs["alibi"] = None
    kwargs.update(_position_kwargs(spec, names, positions, torch))
    if position_bias is not None:
        kwargs["position_bias"] = torch.from_numpy(position_bias)
    grid = spec.relative_bias
    if isinstance(grid, GridTable) and "resolution" in names:     # Data2VecVision: its table's
        patch = module.config.patch_size                            # grid, in pixels
        kwargs["resolution"] = (grid.height * patch, grid.width * patch)
    return kwargs


def _mask_kwargs(module, spec: LayerSpec, names: tuple, mask, kv, torch) -> dict:
    """The mask (B, 1, L, S) as the layer takes it (transformers' additive float mask, XLM's
    keep mask), under the name it takes it by, with the encoder output ``kv`` of a
    cross-attention layer; refused when the layer takes no mask and the call needs one."""
    key = next((n for n in ("attention_mask", "mask") if n in names), None)
    if key is None and mask is not None:            # VideoMAE: no mask argument at all
        raise ValueError(f"{type(module).__name__}.forward takes no attention mask; this call "
                         "needs one (causal, a window or padding)")
    kwargs = {} if key is None else {key: _torch_mask(mask, torch)}
    if key == "mask" and keep_mask(module):         # XLM: a (B, L, S) keep mask, not additive
        kwargs["mask"] = torch.from_numpy(np.ascontiguousarray(
            np.broadcast_to(mask, (mask.shape[0], 1) + mask.shape[2:])[:, 0]))
    if spec.cross:                  # GPT-2: the encoder output and its mask (T5Gemma: the mask
        mask_name = "encoder_attention_mask" if "encoder_attention_mask" in names \
            else "attention_mask"                               # as attention_mask)
        kv_name = "cross_attention_states" if "cross_attention_states" in names \
            else "encoder_hidden_states"                                # (Dia: its name)
        kwargs = {mask_name: kwargs.pop("attention_mask", None), kv_name: kv}
    elif kv is not None:
        kwargs["key_value_states"] = kv
    return kwargs


def _position_kwargs(spec: LayerSpec, names: tuple, positions, torch) -> dict:
    """The layer's RoPE inputs: ``position_ids`` for a layer turning q and k itself, our float64
    ``(cos, sin)`` as ``position_embeddings`` for one that takes them, a rotation by 0 for a
    NoPE layer that takes them anyway; ``{}`` for a layer without positions."""
    if spec.rope_inputs.in_layer or spec.rope_inputs.table:   # IDEFICS: its own rotary_emb
        #                                 turns q, k (GPT-J in 5.15-5.17: its own table)
        return {"position_ids": torch.from_numpy(np.ascontiguousarray(positions))}
    if spec.attention.rope is not None:
        cos, sin = spec_cos_sin(spec, positions)
        return {"position_embeddings": (torch.from_numpy(cos), torch.from_numpy(sin))}
    if "position_embeddings" in names:              # SmolLM3's NoPE layers take and ignore them
        ones = torch.ones(positions.shape + (spec.head_dim,), dtype=torch.float64)
        return {"position_embeddings": (ones, 0 * ones)}
    return {}


def _window_bias(module, spec: LayerSpec, window_mask, B: int, L: int, bias):
    """Swin's ``(num_windows, N, N)`` shifted-window mask as a bias ``(B, 1, N, N)`` of windows,
    window ``b`` getting ``window_mask[b % num_windows]`` (checked before any work)."""
    grid = spec.relative_bias
    if not isinstance(grid, GridTable) or grid.cls or bias is not None:
        raise ValueError(f"window_mask is Swin's shifted-window mask, for a window attention "
                         f"layer with a relative position bias table per window (and no "
                         f"position_bias); {type(module).__name__} is not one")
    m = np.asarray(to_numpy(window_mask), dtype=np.float64)
    if m.ndim != 3 or m.shape[1:] != (L, L) or B % m.shape[0]:
        raise ValueError(f"window_mask must be (num_windows, N, N) = (nW, {L}, {L}) with the "
                         f"batch of windows B = {B} a multiple of nW, got shape {m.shape}")
    return m[np.arange(B) % m.shape[0]][:, None]                    # (B, 1, N, N)


def compare_transformers_attention(module, hidden_states, *, key_value_states=None,
                                   attention_mask=None, position_ids=None, position_bias=None,
                                   window_mask=None, attn_implementation: str | None = "sdpa",
                                   seed: int = 0) -> MHAReport:
    """Run a transformers attention layer and attention_np in float64, forward and backward, and diff.

    Parameters
    ----------
    module : torch.nn.Module
        An attention layer.
        Any layer :func:`~attention_np.interop.transformers.layer_reading.layer_spec` reads, by what it
        computes (BERT, RoBERTa, DistilBERT, ALBERT, ViT, CLIP, GPT-2, BART, OPT, Whisper, T5,
        Llama, Mistral, Mixtral, Qwen2, Qwen3, Gemma 1-3, Cohere, OLMo, Granite, SmolLM3,
        GPT-NeoX, Falcon, Phi, Phi-3, StableLM, gpt-oss, BLIP-2's vision layers, CTRL, torch's
        ``nn.MultiheadAttention`` as SigLIP's pooling head has it, subclasses included); one that
        computes what attention_np cannot express raises
        :class:`~attention_np.interop.transformers.layer_reading.UnsupportedLayer` naming it. A copy is
        cast to float64 and run in eval mode (QK-norms and rotary functions that compute in
        float32 are run in float64, see :mod:`~attention_np.interop.transformers.recent`); the
        module itself is left untouched. Parameter gradients are diffed as "dW_q", ...,
        "dq_norm", "dbias_table" (T5), "dsinks" (gpt-oss).
    hidden_states : (B, L, d_model) array or tensor
    key_value_states : (B, S, d_model), optional
        Cross-attention (BART, T5, Whisper, GPT-2's ``is_cross_attention`` layer): the encoder
        output the keys and values come from; for torch's ``nn.MultiheadAttention`` (SigLIP's
        pooling head) the ``key`` and ``value`` it is called with, ``hidden_states`` being the
        ``query`` (the head's probe). Without it such a layer gets ``hidden_states`` as all
        three (self-attention), as CTRL's layer always does.
    attention_mask : (B, S) 0/1, optional
        transformers' 2-D padding mask (1 = a real token). The layer gets the model's 4-D float
        mask (0 or ``finfo(float64).min``), with the causal and sliding-window masks of the
        layer folded in; attention_np gets the same as a bool mask. Query rows left with no
        key (left padding in a causal layer) are left out of the verdict and listed in
        ``report.excluded_rows``.
    position_ids : (B, L) or (1, L) int, optional
        RoPE positions, default ``arange(L)``; cos and sin are computed in float64 here, over the
        layer's rotated width and in its pair layout, and passed as ``position_embeddings``.
    position_bias : (B | 1, h, L, S) float, optional
        T5 blocks after the first: the bias block 0 computed (mask folded in). Without it such
        a layer runs without any position bias, and the report says so.
    window_mask : float array or tensor (num_windows, N, N), optional
        Swin's shifted-window mask as its window attention layer gets it
        (``SwinLayer.get_attn_mask``: 0, or -100 between positions from different regions of
        the shifted image), with ``hidden_states`` the ``B * num_windows`` windows
        ``(B * num_windows, N, d_model)`` of ``N = window_size**2`` patches. Added to the scores
        of window ``b`` as ``window_mask[b % num_windows]`` (a bias: -100 is not -inf).
    attn_implementation : {"sdpa", "eager", "attention_np_eager_float64", None} or another of
        transformers' (``"flex_attention"``, ...)
        The copy's ``config._attn_implementation``; ``None`` keeps the module's (the one its
        model was built with). Whichever it is, torch's side runs in float64 throughout and the
        verdict is the one the whole-model diff gives (:func:`layer_implementation`): eager's
        float32 softmax runs in float64; sinks, a soft-cap, GPT-2's
        ``reorder_and_upcast_attn`` and an implementation without a float64 backward on the
        CPU switch the copy to what the whole-model diff runs, and a note says so.
    seed : int
        Seed of the random upstream gradient.

    Returns
    -------
    MHAReport
        ``checks`` for "out", "dhidden_states" (and "dkey_value"), and "dW_q", ... in
        attention_np's layout; for RoPE layers also "inv_freq rel" and "attn_factor" (the
        family's rotary embedding against ours, when it can be built from the config).
    """
    torch = import_optional("torch", "attention_np.interop.transformers")
    import_optional("transformers", "attention_np.interop.transformers")
    spec = _check_layer(module, hidden_states, attn_implementation, seed, torch)
    call = _read_call(module, spec, hidden_states, key_value_states, attention_mask,
                      position_ids, position_bias, window_mask)
    layer, impl, switched = _float64_copy(module, spec, attn_implementation)
    rope_checks = _float64_rope(layer, spec, torch)
    _prepare_backward(layer, spec, impl)
    rows = dead_rows(call.mask)         # rows that attend nothing: no upstream gradient there
    got, dout = _run_torch(layer, module, spec, call, impl, rows, seed, torch)
    ours = _run_ours(layer, spec, call, dout)
    report = _judge(module, spec, impl, got, ours, rows, rope_checks, call.positions, torch)
    report.notes += _input_notes(module, spec, call, position_ids, report.excluded_rows)
    report.notes += _implementation_notes(module, impl, switched)
    return report


@dataclass
class _LayerCall:
    """One call of the layer, its inputs read and checked (before any work) as NumPy arrays."""

    names: tuple                    # the layer's forward parameters
    roles: dict | None              # its query, key, value parameters (qkv_inputs), else None
    x: np.ndarray                   # (B, L, d_model) float64
    kv: np.ndarray | None           # (B, S, d_model) float64: the encoder output, or None
    positions: np.ndarray           # (B, L) int: RoPE's
    bias: np.ndarray | None         # (B | 1, h, L, S) T5's position bias, (B, 1, N, N) Swin's mask
    mask: np.ndarray | None         # (B, 1, L, S) bool, True = may attend
    window_mask: object = None      # Swin's (num_windows, N, N), as given


def _check_layer(module, hidden_states, attn_implementation, seed, torch) -> LayerSpec:
    """The layer read (:func:`layer_spec`) after its first checks: a torch module, a valid seed,
    real hidden states, an attention implementation transformers has; refused when its ALiBi
    bias or its residual comes from the model's forward."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be an attention layer (a torch.nn.Module), got "
                        f"{type(module).__name__} ({module!r:.40})")
    check_seed(seed)
    check_real_input(hidden_states, "hidden_states", "(B, L, d_model)")
    spec = layer_spec(module)
    if isinstance(spec.relative_bias, ALiBi) or (spec.residual is not None and
                                                 spec.residual.argument):
        raise UnsupportedLayer(
            f"{type(module).__name__}: its ALiBi bias (or residual) comes from the model's "
            "forward, not the layer: diff the whole model with compare_transformers_model")
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    known = IMPLEMENTATIONS + tuple(sorted(set(ALL_ATTENTION_FUNCTIONS) - set(IMPLEMENTATIONS)))
    if attn_implementation not in known:
        raise ValueError(f"attn_implementation must be one of {IMPLEMENTATIONS} (float64 forward "
                         f"and backward on CPU) or another of transformers' {known[4:]} (run as "
                         f"compare_transformers_model runs the layer), got {attn_implementation!r}")
    return spec


def _read_call(module, spec: LayerSpec, hidden_states, key_value_states, attention_mask,
               position_ids, position_bias, window_mask) -> _LayerCall:
    """The call's inputs, each checked against the layer in turn (the first wrong one named):
    the encoder output it may take, the hidden states and their width, the padding mask, the
    positions, the position bias, Swin's window mask; then our mask (:func:`build_mask`)."""
    names, roles = forward_parameters(module), qkv_inputs(module)
    _check_cross(module, spec, names, roles, key_value_states)
    x, weights = _read_hidden_states(module, hidden_states)
    kv = None if key_value_states is None else to_numpy(key_value_states, np.float64)
    _check_grid(module, spec, x)
    B, L = x.shape[:2]
    S = L if kv is None else kv.shape[1]
    pad = _read_padding(attention_mask, B, S)
    if kv is not None and (kv.ndim != 3 or kv.shape[0] != B
                           or kv.shape[-1] != weights["W_k"].shape[0]):
        raise ValueError(f"key_value_states must be (B, S, d_model) with B = {B}, d_model = "
                         f"{weights['W_k'].shape[0]} (the layer's), got shape {kv.shape}")
    positions = _read_positions(position_ids, B, L)
    bias = _read_position_bias(module, spec, names, position_bias, (B, L, S))
    if pad is not None and not {"attention_mask", "mask"} & set(names):
        raise ValueError(f"attention_mask: {type(module).__name__} takes no mask (its forward "
                         f"takes {names})")
    if window_mask is not None:
        bias = _window_bias(module, spec, window_mask, B, L, bias)
    mask = build_mask(spec if kv is None else no_causal(spec), B, L, S, pad)
    if mask is None and keep_mask(module):          # XLM: its mask argument is required
        mask = np.ones((B, 1, L, S), dtype=bool)
    return _LayerCall(names, roles, x, kv, positions, bias, mask, window_mask)


def _check_cross(module, spec: LayerSpec, names: tuple, roles, key_value_states) -> None:
    """An encoder output only for a layer that takes one, and one for a cross-attention layer."""
    takes_kv = spec.cross or "key_value_states" in names or (
        roles is not None and roles["q"] == names[0])
    if key_value_states is not None and not takes_kv:
        raise ValueError(f"key_value_states (cross-attention) needs a layer whose forward takes "
                         f"key_value_states (BART, T5, Whisper), GPT2Attention(is_cross_attention"
                         f"=True) or torch's MultiheadAttention (query, key, value); "
                         f"{type(module).__name__} takes {names}")
    if spec.cross and key_value_states is None:
        raise ValueError(f"{type(module).__name__}(is_cross_attention=True) needs "
                         "key_value_states, the encoder output (B, S, d_model) its keys and "
                         "values come from")


def _read_hidden_states(module, hidden_states) -> tuple:
    """``(x, weights)``: ``hidden_states`` as float64 (B, L, d_model) of the layer's width, the
    rows of its W_q (and the layer's weights, read for the width of the encoder output)."""
    x = to_numpy(hidden_states, np.float64)
    if x.ndim != 3:
        raise ValueError(f"hidden_states must be (B, L, d_model), got shape {x.shape}")
    weights, _ = params_from_transformers(module)          # d_model: the rows of W_q and W_k
    if x.shape[-1] != weights["W_q"].shape[0]:
        raise ValueError(f"hidden_states must be (B, L, d_model) with d_model = "
                         f"{weights['W_q'].shape[0]} (the layer's), got shape {x.shape}")
    return x, weights


def _check_grid(module, spec: LayerSpec, x) -> None:
    """For a layer with a 2-D relative position table (Data2VecVision, Swin): the hidden states
    hold the table's positions (its grid of patches, and a class token if it has one)."""
    grid = spec.relative_bias
    if not isinstance(grid, GridTable):
        return
    H, W, cls = grid.height, grid.width, grid.cls
    if x.shape[1] != H * W + cls:
        what = " and a class token" if cls else " (one window; B counts the windows)"
        raise ValueError(f"hidden_states must be (B, {H * W + cls}, d_model): "
                         f"{type(module).__name__} has a relative position bias table for "
                         f"a {H}x{W} grid of patches{what}, got shape {x.shape}")


def _read_padding(attention_mask, B: int, S: int):
    """transformers' (B, S) 0/1 padding mask as an array, or None."""
    if attention_mask is not None and np.shape(to_numpy(attention_mask)) != (B, S):
        raise ValueError(f"attention_mask must be (B, S) = {(B, S)}, got "
                         f"{np.shape(to_numpy(attention_mask))}")
    return None if attention_mask is None else to_numpy(attention_mask)


def _read_positions(position_ids, B: int, L: int) -> np.ndarray:
    """RoPE's positions (B, L): ``arange(L)`` by default, a (L,) or (1, L) shared by the batch."""
    positions = np.arange(L) if position_ids is None else np.asarray(to_numpy(position_ids))
    if positions.shape in ((L,), (1, L)):          # transformers' arange(L)[None]: every sequence
        positions = np.broadcast_to(positions.reshape(1, L), (B, L))
    if positions.shape != (B, L) or not np.issubdtype(positions.dtype, np.integer):
        raise ValueError(f"position_ids must be (B, L) = {(B, L)} integers (or (1, L), shared "
                         f"by the batch), got {positions.dtype} {positions.shape}")
    return positions


def _read_position_bias(module, spec: LayerSpec, names: tuple, position_bias, BLS: tuple):
    """T5's position bias as float64 (B | 1, h, L, S), for a T5 layer without its own table."""
    if position_bias is None:
        return None
    B, L, S = BLS
    own = isinstance(spec.relative_bias, T5Buckets)
    if "position_bias" not in names or own:
        raise ValueError(f"position_bias is for a T5 layer without its own bias table; "
                         f"{type(module).__name__} {'has one' if own else 'takes none'}")
    bias = np.asarray(to_numpy(position_bias), dtype=np.float64)
    if bias.ndim != 4 or bias.shape[1:] != (spec.num_heads, L, S) or bias.shape[0] not in (1, B):
        raise ValueError(f"position_bias must be (B or 1, h, L, S) = ({B}, {spec.num_heads}, "
                         f"{L}, {S}), got {bias.shape}")
    return bias


def _float64_copy(module, spec: LayerSpec, attn_implementation) -> tuple:
    """``(layer, impl, notes)``: a float64 copy of the layer in eval mode, set to run ``impl``
    (:func:`layer_implementation`: the one asked for, else the model's own; ``"own forward"``
    for a layer without a config), and the notes of a switch."""
    layer = copy.deepcopy(module).double().eval()
    config = getattr(layer, "config", None)        # None: FSMT, LED, SpeechT5, WavLM compute
    impl, switched = "own forward", []             # in their own forward
    if config is not None:                         # the one asked for, else the model's own
        impl, switched = layer_implementation(module, spec, attn_implementation or
                                              config._attn_implementation)
        config._attn_implementation = impl
    prepare_recent_layer(layer, spec, impl)
    return layer, impl, switched


def _float64_rope(layer, spec: LayerSpec, torch) -> list:
    """A layer's own rotary embedding or sin|cos table checked against ours, then run in float64
    (the checks, ``[]`` for a layer that turns q and k with the model's cos and sin)."""
    rope_checks = []
    if spec.rope_inputs.in_layer:   # its own rotary embedding: its inv_freq and attention
        float64_rotary(layer.rotary_emb, {None: spec}, None, torch, [], rope_checks)  # factor
        #                             checked against ours, its cos and sin then in float64
    if spec.rope_inputs.table:      # its own sin|cos table checked against ours, then ours
        rope_checks += float64_table(layer, spec, torch)
    return rope_checks


def _prepare_backward(layer, spec: LayerSpec, impl: str) -> None:
    """The copy's parameters to take gradients; its causality said, for sdpa."""
    if impl == "sdpa" and not hasattr(layer, "is_causal"):
        # transformers' sdpa takes an absent is_causal for True when no mask is passed: Mllama's
        # vision attention, bidirectional in its model (which always passes a mask), would run
        # causal here; the copy says what the layer was read as (compare_transformers_model too)
        layer.is_causal = spec.is_causal
    for p in layer.parameters():
        p.requires_grad_(True)
        p.grad = None


def _run_torch(layer, module, spec: LayerSpec, call: _LayerCall, impl: str, rows, seed: int,
               torch) -> tuple:
    """``(got, dout)``: the float64 copy forward, then backward from a random upstream gradient
    ``dout`` (0 on the ``rows`` that attend nothing); ``got`` its output and every gradient,
    the parameters' in attention_np's layout."""
    xt = torch.tensor(call.x, requires_grad=True)
    kvt = None if call.kv is None else torch.tensor(call.kv, requires_grad=True)
    kwargs = _torch_kwargs(module, spec, call, xt, kvt, torch)
    with float64_rope_function(layer), float64_upcasts(torch, scores_in_own_method(layer) or
                                                       impl == "eager"):
        out_t = layer(xt, **kwargs) if call.roles is None else layer(**kwargs)   # (GPT-Neo's
        #                                                     _attn: float64, not float32)
    out_t = out_t[0] if isinstance(out_t, (tuple, list)) else out_t   # (MobileViT: the tensor alone)
    dout = np.random.default_rng(seed).standard_normal(tuple(out_t.shape))
    if rows is not None:
        dout = np.where(rows[..., None], 0.0, dout)
    out_t.backward(torch.from_numpy(dout))
    got = {"out": to_numpy(out_t), "dhidden_states": to_numpy(xt.grad)}
    if kvt is not None:
        got["dkey_value"] = to_numpy(kvt.grad)
    grads, _ = params_from_transformers(layer, grads=True)
    got.update({f"d{n}": g for n, g in grads.items()})
    return got, dout


def _torch_kwargs(module, spec: LayerSpec, call: _LayerCall, xt, kvt, torch) -> dict:
    """The keyword arguments of the copy's call (:func:`_call_kwargs`), with the query, key and
    value of a layer taking them apart, and Swin's window mask as its ``attention_mask``."""
    swin = call.window_mask is not None
    kwargs = _call_kwargs(module, spec, call.mask, None if call.roles else kvt, call.positions,
                          None if swin else call.bias, torch)
    roles = call.roles
    if roles is not None:               # the query x; key and value the same tensor, kv or x
        kwargs.update({roles["q"]: xt, roles["k"]: xt if kvt is None else kvt,
                       roles["v"]: xt if kvt is None else kvt})
    if swin:                                        # Swin: the layer's own attention_mask
        kwargs["attention_mask"] = torch.from_numpy(np.asarray(call.window_mask,
                                                               dtype=np.float64))
    return kwargs


def _run_ours(layer, spec: LayerSpec, call: _LayerCall, dout) -> dict:
    """attention_np's forward and backward (:func:`replay`) with the copy's parameters."""
    params, _ = params_from_transformers(layer)
    bias = call.bias
    if bias is not None and call.window_mask is None:   # T5's bias has the mask folded in:
        bias = np.where(bias > np.finfo(np.float64).min / 2, bias, 0.0)   # keep it out of ours
    return replay(spec, params, call.x, call.kv, call.mask, dout, positions=call.positions,
                  bias=bias)


def _judge(module, spec: LayerSpec, impl: str, got: dict, ours: dict, rows, rope_checks: list,
           positions, torch) -> MHAReport:
    """The report: every array judged (the rows that attend nothing left out), the layer's own
    RoPE checks, and the model's rotary frequencies against ours (after a forward)."""
    excluded = leave_out_rows(got, ours, rows)
    report = MHAReport(f"transformers {type(module).__name__} ({impl})", "float64",
                       weights=stored_weights_line(stored_dtypes(module)))
    report.checks = judge(got, ours) + rope_checks
    report.excluded_rows = excluded
    given = spec.rope_inputs
    if spec.attention.rope is not None and not given.in_layer and not given.table:   # the
        #                                       model's own frequencies, after a forward
        checks = model_rotary_checks(spec, module, positions, torch)
        if checks is None:
            report.notes.append("RoPE frequencies not checked: no rotary embedding class of "
                                f"{type(module).__name__}'s family found")
        else:
            report.checks += checks
    return report


def _input_notes(module, spec: LayerSpec, call: _LayerCall, position_ids, excluded) -> list:
    """What the verdict leaves out, by the inputs: rows with every key masked, a position bias
    the model would have passed, positions the layer does not use."""
    name, notes = type(module).__name__, []
    if excluded:
        notes.append(f"{len(excluded)} query row(s) (batch, position) have every key "
                     f"masked and are left out of the verdict: {excluded} (transformers' "
                     "finfo.min mask gives them mean(V), attention_np 0; see "
                     "docs/frameworks.md)")
    if "position_bias" in call.names and not isinstance(spec.relative_bias, T5Buckets) and \
            call.bias is None and call.kv is None:
        notes.append(f"{name} has no bias table of its own: inside the "
                     "model it gets the position bias block 0 computed, which this diff "
                     "did not get (pass position_bias=, or diff the whole model with "
                     "compare_transformers_model)")
    if "relative_position_bias" in call.names and getattr(
            getattr(module, "config", None), "use_shared_relative_position_bias", False):
        notes.append(f"{name} gets the model's shared relative position "
                     "bias (use_shared_relative_position_bias) as an argument, which this "
                     "diff did not pass: diff the whole model with "
                     "compare_transformers_model")
    if position_ids is not None and spec.attention.rope is None:
        notes.append(f"position_ids not used: {name} has no rotary "
                     "embedding (its positions, if any, enter before the layer or, T5, "
                     "as the relative bias)")
    return notes


def _implementation_notes(module, impl: str, switched: list) -> list:
    """What the implementation that ran changes: a layer that runs its eager attention whatever
    was asked, a switch to what the whole-model diff runs (``switched``), eager's float32 casts
    run in float64."""
    notes = []
    if own_eager_only(module) and impl != "own forward":
        notes.append(f"{type(module).__name__} runs its family's eager attention whatever "
                     f"attn_implementation says ({impl!r} ignored: its forward looks the "
                     "implementation up with getattr on ALL_ATTENTION_FUNCTIONS); its "
                     "float32 softmax was run in float64")
    notes += switched
    if impl == "eager" and _eager_upcasts(module):
        notes.append("eager: the float32 casts of the family's eager attention "
                     "(softmax(..., dtype=torch.float32)) ran in float64, so the verdict is "
                     "the one of sdpa and of compare_transformers_model")
    return notes
