"""What a hooked run of a model recorded, read back for the whole-model diff
(:mod:`~attention_np.interop.transformers.model_diff`): the tensors as NumPy, a layer call's
mask as ours, its query, key and value inputs, its grid of patches, its RoPE positions, and the
hooks on the model's rotary embeddings and relative position tables with the rows they give
(their output against ours)."""

from __future__ import annotations

import numpy as np

from attention_np.interop.tolerance import judge
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.layer_diff import build_mask
from attention_np.interop.transformers.layer_reading import UnsupportedLayer
from attention_np.interop.transformers.model_report import LayerResult
from attention_np.interop.transformers.rotary import check_position_embeddings
from attention_np.variants.position_bias import grid_relative_index, relative_position_bias

MIN = np.finfo(np.float64).min / 2


def numpy_of(t):
    """A recorded tensor (or None) as a NumPy array: float64 if floating, else as it is."""
    return None if t is None else to_numpy(t.detach()).astype(np.float64) \
        if t.is_floating_point() else to_numpy(t.detach())


def recorded_mask(arg, spec, B, L, S, cross, own: bool = False):
    """The recorded mask (None, bool, or additive float) as ``(bool (B, 1|h, L, S), bias)``.

    ``own``: the causal and sliding-window part is ours, from ``spec`` (:func:`build_mask`),
    never the model's: only its padding is taken from the recorded mask (the keys no query may
    see), so that a model whose window is not the one read disagrees rather than lending us
    its mask."""
    if arg is None:
        return (None if cross else build_mask(spec, B, L, S)), None
    m = numpy_of(arg)
    if m.dtype == bool and spec.bool_mask_masks:         # MPT: True where masked
        m = ~m
    if m.dtype == bool:
        keep, extra = np.broadcast_to(m, (B,) + m.shape[1:-2] + (L, S)), None
    else:
        keep = m > MIN
        extra = np.where(keep, m, 0.0)
        extra = extra if extra.any() else None
    if own and not cross and (spec.is_causal or spec.attention.window is not None):
        padding = np.broadcast_to(keep, (B,) + keep.shape[1:-2] + (L, S)).any(axis=(1, 2))
        keep = build_mask(spec, B, L, S, padding)                         # (B, 1, L, S)
    return keep, extra


def rotary_hooks(model, log) -> list:
    """A forward hook on every ``*RotaryEmbedding`` of the model copy: logs its name, the
    ``position_ids`` it was called with and the ``(cos, sin)`` it returned. The module runs as
    the model has it (nothing replaced): what it computes is checked against ours."""
    handles = []
    for name, module in model.named_modules():
        if not type(module).__name__.endswith("RotaryEmbedding"):
            continue

        def hook(mod, args, kwargs, output, _name=name):
            ids = args[1] if len(args) > 1 else kwargs.get("position_ids")
            if ids is not None and isinstance(output, tuple) and len(output) == 2:
                log.append({"name": _name, "module": type(mod).__name__,
                            "positions": to_numpy(ids).copy(), "out": output})
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    return handles


def table_hooks(model, found, log) -> list:
    """A forward hook on every 2-D relative position bias table outside the attention layers
    read (BEiT's in each ``BeitLayer``, a table shared by the encoder: the layers get its bias
    through their mask or an argument): logs its name, the table (read now, before the run),
    the grid it was asked for and the bias it returned, for :func:`table_row`."""
    inside = [n for n, *_ in found]
    handles = []
    for name, module in model.named_modules():
        table = getattr(module, "relative_position_bias_table", None)
        if table is None or not hasattr(module, "window_size") or \
                next(module.children(), None) is not None or \
                any(name == n or name.startswith(n + ".") for n in inside):
            continue                          # (a layer holding its own table: in its replay)
        entry = {"name": name, "module": module, "table": numpy_of(table), "calls": []}
        log.append(entry)

        def hook(mod, args, kwargs, output, _entry=entry):
            names = ("window_size", "interpolate_pos_encoding", "dim_size")[:len(args)]
            bound = {**dict(zip(names, args, strict=True)), **kwargs}
            _entry["calls"].append((bound, output))
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    return handles


def table_row(entry, report) -> None:
    """A table's first call: the bias it returned against ours from the table read before the
    run (:func:`~attention_np.variants.position_bias.grid_relative_index`, the class token's 3
    rows when the table has them), a row of its own; an interpolated table is refused by name."""
    if not entry["calls"]:
        return
    bound, output = entry["calls"][0]
    module, table = entry["module"], entry["table"]
    H, W = (int(v) for v in module.window_size)
    cls = table.shape[0] == (2 * H - 1) * (2 * W - 1) + 3
    window = bound.get("window_size")
    if bound.get("interpolate_pos_encoding") or (window is not None and
                                                  tuple(int(v) for v in window) != (H, W)):
        report.refused.append((entry["name"], f"{type(module).__name__}: a relative position "
                               f"bias table interpolated (bilinear) from its {H}x{W} grid to "
                               f"{window} is not supported; at its own grid it is"))
        return
    ours = relative_position_bias(table, grid_relative_index(H, W, cls=cls))      # (h, N, N)
    theirs = numpy_of(output)
    if theirs.size != ours.size:
        report.refused.append((entry["name"], f"{type(module).__name__}: a bias of shape "
                               f"{tuple(theirs.shape)} from a table of a {H}x{W} grid (ours: "
                               f"{ours.shape}) is not supported"))
        return
    report.layers.append(LayerResult(f"{entry['name']} (bias table)", type(module).__name__,
                                     judge({"bias": theirs.reshape(ours.shape)}, {"bias": ours}),
                                     kind="bias table"))


def rope_source(log, position_embeddings):
    """The rotary log entry whose ``(cos, sin)`` a layer received (the same tensor), else the
    last one logged, else None."""
    if not log:
        return None
    cos = position_embeddings[0] if position_embeddings is not None else None
    return next((e for e in reversed(log) if e["out"][0] is cos), log[-1])


def text_positions(positions, spec, name: str):
    """``(B, L)`` positions from a rotary call's: multimodal RoPE's ``(3, B, L)`` (Qwen2-VL:
    temporal, height, width) is plain RoPE when the three agree (text-only input)."""
    positions = np.asarray(positions)
    if positions.ndim == 3:
        if not (positions == positions[:1]).all():
            raise UnsupportedLayer(
                f"{name}: multimodal RoPE (mrope) with different temporal, height and width "
                "positions (image or video tokens) is not supported; text-only positions are")
        positions = positions[0]
    return positions


def rotary_row(call, report, done: set) -> None:
    """Before a RoPE layer's row: the ``(cos, sin)`` the model passed it against ours for the
    positions its rotary embedding was called with (one row per distinct pair); sets
    ``call["positions"]`` (B, L) for the replay."""
    spec, bound = call["spec"], call["bound"]
    x = bound.get("hidden_states", call["args"][0] if call["args"] else None)
    B, L = x.shape[:2]
    entry = call["rope"]
    pe = bound.get("position_embeddings")
    if spec.rope_inputs.in_layer and entry is not None:   # IDEFICS: its own rotary_emb's
        pe = entry["out"]
    if entry is None and spec.rope_inputs.table and bound.get("position_ids") is not None:
        positions = numpy_of(bound["position_ids"])          # GPT-J (5.15-5.17): its table's rows
    elif entry is None:
        positions = np.arange(L)
        report.notes.append(f"{call['name']}: no rotary embedding call was seen; its RoPE "
                            "positions are taken as 0 .. L-1")
    else:
        positions = text_positions(entry["positions"], spec, type(call["module"]).__name__)
    positions = np.broadcast_to(positions.reshape((-1, L)), (B, L))
    call["positions"] = positions
    if pe is None or id(pe[0]) in done:
        return
    done.add(id(pe[0]))
    source = entry["name"] if entry is not None and entry["out"][0] is pe[0] else \
        f"{call['name']} position_embeddings"
    module = entry["module"] if entry is not None else "cos, sin"
    report.layers.append(LayerResult(f"{source} (cos, sin)", module,
                                     check_position_embeddings(spec, positions, *pe),
                                     kind="rotary"))


def grid_call(call, spec, arg, B: int, torch):
    """A call of a layer with a 2-D relative position table (Data2VecVision, Swin): refused by
    name when the table is interpolated to another grid; Swin's ``(num_windows, N, N)``
    shifted-window mask as the ``(B, 1, N, N)`` the layer adds (window ``b`` gets
    ``mask[b % num_windows]``)."""
    bound, name = call["bound"], type(call["module"]).__name__
    H, W, cls = spec.relative_bias.height, spec.relative_bias.width, spec.relative_bias.cls
    resolution = bound.get("resolution")
    if bound.get("interpolate_pos_encoding") or (resolution is not None and (
            resolution[0] // call["module"].config.patch_size,
            resolution[1] // call["module"].config.patch_size) != (H, W)):
        raise UnsupportedLayer(f"{name}: a relative position bias table interpolated "
                               f"(bilinear) from its {H}x{W} grid to an image of {resolution} "
                               "pixels is not supported; at the table's own resolution it is")
    if arg is None or cls or arg.ndim != 3:
        return arg
    if B % arg.shape[0]:
        raise UnsupportedLayer(f"{name}: a shifted-window mask of {arg.shape[0]} windows for "
                               f"a batch of {B} windows (not a multiple) is not supported")
    return arg[torch.arange(B, device=arg.device) % arg.shape[0]][:, None]   # (B, 1, N, N)


def qkv_call(layer, bound: dict, roles: dict) -> tuple:
    """``(x, kv)`` of a call of a layer taking query, key and value inputs (:func:`qkv_inputs`):
    ``kv`` None when all three are one tensor (self-attention), the key when the key and value
    are one tensor apart from the query (SigLIP's pooling head: a probe over the hidden states);
    refused by name otherwise, and when torch's masks are passed (not read)."""
    q, k, v = (bound.get(roles[n]) for n in "qkv")
    name = type(layer).__name__
    if k is not v:
        raise UnsupportedLayer(f"{name}: keys and values from two different inputs (key is not "
                               "value) is not supported; self-attention and cross-attention "
                               "over one sequence are")
    for arg in ("key_padding_mask", "attn_mask"):
        if bound.get(arg) is not None:
            raise UnsupportedLayer(f"{name}: torch MultiheadAttention's {arg} is not read; "
                                   "a call without it is")
    return q, (None if k is q else k)
