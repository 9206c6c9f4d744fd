"""Diff a whole transformers model layer by layer: :func:`compare_transformers_model`.

The model's float64 copy runs once; a hook on every attention layer records what the layer
received and returned (hidden states, the encoder output of a cross-attention, the model's own
mask, T5's position bias from block 0, the RoPE positions its rotary embedding was called with).
Every recorded call is then replayed in NumPy float64 (:func:`~attention_np.interop.
transformers.replay.replay`) with the parameters read before the run: the output against the one
recorded in the model, the gradients against the layer re-run on the recorded inputs with one
random upstream gradient. Layers are found by what they compute (:func:`~attention_np.interop.
transformers.layer_reading.layer_spec`); one it cannot express is listed as refused, with the feature.

A call continuing from a filled KV cache (the model's own, or the one a ``prompt=`` forward
filled, or ``generate()``'s: :func:`diff_run` runs any of them) is replayed on attention_np's
``KVCache`` holding what the layer's cache held before the call
(:mod:`~attention_np.interop.transformers.cache_replay`), and those cached keys and values are a
row of their own against ours recomputed from the layer's earlier calls.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import typing
from dataclasses import replace

import numpy as np

from attention_np._checks import check_seed
from attention_np._optional import import_optional
from attention_np.compose.decode import KVCache
from attention_np.interop.tolerance import check_float64, judge
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.algorithm_refusals import recurrent_layer
from attention_np.interop.transformers.cache_replay import (
    cached_keys_values,
    check_cache,
    kv_heads,
    new_keys_values,
    refuse_cached,
    replay_cached,
)
from attention_np.interop.transformers.layer_diff import build_mask
from attention_np.interop.transformers.layer_reading import (
    UnsupportedLayer,
    layer_spec,
    no_causal,
    params_from_transformers,
    qkv_inputs,
)
from attention_np.interop.transformers.model_report import LayerResult, ModelReport  # noqa: F401
from attention_np.interop.transformers.reading_scores import keep_mask
from attention_np.interop.transformers.recent import (
    EAGER_FLOAT64,
    float64_experts,
    float64_upcasts,
    prepare_recent_layer,
    scores_in_own_method,
)
from attention_np.interop.transformers.refusal import refuse
from attention_np.interop.transformers.replay import (
    dead_rows,
    float64_rope_function,
    leave_out_rows,
    replay,
)
from attention_np.interop.transformers.rotary import (
    check_position_embeddings,
    float64_rotary,
    float64_table,
    spec_cos_sin,
)
from attention_np.interop.transformers.weights import (
    rounded_buffers,
    stored_dtypes,
    stored_weights_line,
)
from attention_np.variants.position_bias import (
    alibi_bias,
    grid_relative_index,
    relative_position_bias,
)

MIN = np.finfo(np.float64).min / 2
CACHES = ("cache", "past_key_values", "past_key_value", "layer_past")


def attention_layers(model) -> tuple[list, list]:
    """``([(name, module, spec)], [(name, reason)])``: the modules read as attention layers, and
    the attention layers refused. A module whose class is named ``...Attention`` that is not
    read (no q, k, v projections found) is refused with the reason, unless a module inside it
    or around it is read or refused (BERT's ``BertAttention`` holds ``BertSelfAttention``):
    no attention module is dropped without a word. A recurrent sequence-mixing layer of a hybrid
    model (Mamba's state-space scan, a delta-rule net) is refused by that name."""
    found, refused, unread = [], [], []
    for name, module in model.named_modules():
        try:
            recurrent = recurrent_layer(module)   # Mamba, delta nets: no attention to compare
            if recurrent is not None:
                refuse(module, recurrent)
            found.append((name, module, layer_spec(module)))
        except UnsupportedLayer as e:
            if "is not an attention layer" not in str(e):
                refused.append((name, str(e)))
            elif type(module).__name__.endswith("Attention"):
                unread.append((name, str(e)))
    known = [n for n, *_ in found] + [n for n, _ in refused]

    def related(a, b):
        return a == b or not a or not b or a.startswith(b + ".") or b.startswith(a + ".")
    for name, why in unread:
        if not any(related(name, k) for k in known):
            refused.append((name, why))
            known.append(name)
    return found, refused


def _np(t):
    return None if t is None else to_numpy(t.detach()).astype(np.float64) \
        if t.is_floating_point() else to_numpy(t.detach())


def _mask(arg, spec, B, L, S, cross, own: bool = False):
    """The recorded mask (None, bool, or additive float) as ``(bool (B, 1|h, L, S), bias)``.

    ``own``: the causal and sliding-window part is ours, from ``spec`` (:func:`build_mask`),
    never the model's: only its padding is taken from the recorded mask (the keys no query may
    see), so that a model whose window is not the one read disagrees rather than lending us
    its mask."""
    if arg is None:
        return (None if cross else build_mask(spec, B, L, S)), None
    m = _np(arg)
    if m.dtype == bool and spec.bool_mask_masks:         # MPT: True where masked
        m = ~m
    if m.dtype == bool:
        keep, extra = np.broadcast_to(m, (B,) + m.shape[1:-2] + (L, S)), None
    else:
        keep = m > MIN
        extra = np.where(keep, m, 0.0)
        extra = extra if extra.any() else None
    if own and not cross and (spec.is_causal or spec.window is not None):
        padding = np.broadcast_to(keep, (B,) + keep.shape[1:-2] + (L, S)).any(axis=(1, 2))
        keep = build_mask(spec, B, L, S, padding)                         # (B, 1, L, S)
    return keep, extra


def _rotary_hooks(model, log) -> list:
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


def _table_hooks(model, found, log) -> list:
    """A forward hook on every 2-D relative position bias table outside the attention layers
    read (BEiT's in each ``BeitLayer``, a table shared by the encoder: the layers get its bias
    through their mask or an argument): logs its name, the table (read now, before the run),
    the grid it was asked for and the bias it returned, for :func:`_table_row`."""
    inside = [n for n, *_ in found]
    handles = []
    for name, module in model.named_modules():
        table = getattr(module, "relative_position_bias_table", None)
        if table is None or not hasattr(module, "window_size") or \
                next(module.children(), None) is not None or \
                any(name == n or name.startswith(n + ".") for n in inside):
            continue                          # (a layer holding its own table: in its replay)
        entry = {"name": name, "module": module, "table": _np(table), "calls": []}
        log.append(entry)

        def hook(mod, args, kwargs, output, _entry=entry):
            names = ("window_size", "interpolate_pos_encoding", "dim_size")[:len(args)]
            bound = {**dict(zip(names, args, strict=True)), **kwargs}
            _entry["calls"].append((bound, output))
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    return handles


def _table_row(entry, report) -> None:
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
    theirs = _np(output)
    if theirs.size != ours.size:
        report.refused.append((entry["name"], f"{type(module).__name__}: a bias of shape "
                               f"{tuple(theirs.shape)} from a table of a {H}x{W} grid (ours: "
                               f"{ours.shape}) is not supported"))
        return
    report.layers.append(LayerResult(f"{entry['name']} (bias table)", type(module).__name__,
                                     judge({"bias": theirs.reshape(ours.shape)}, {"bias": ours}),
                                     kind="bias table"))


def _rope_source(log, position_embeddings):
    """The rotary log entry whose ``(cos, sin)`` a layer received (the same tensor), else the
    last one logged, else None."""
    if not log:
        return None
    cos = position_embeddings[0] if position_embeddings is not None else None
    return next((e for e in reversed(log) if e["out"][0] is cos), log[-1])


def _text_positions(positions, spec, name: str):
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


def check_model_inputs(model, inputs: dict, torch) -> None:
    """A torch module, and keyword inputs its ``forward`` takes (before any work)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a transformers model (a torch.nn.Module), got "
                        f"{type(model).__name__}")
    if not inputs:
        raise ValueError(f"no inputs: pass what {type(model).__name__} takes as keywords, e.g. "
                         "input_ids=..., attention_mask=...")
    params = inspect.signature(model.forward).parameters
    allowed = {n for n, p in params.items() if p.kind != p.VAR_KEYWORD}
    for p in params.values():            # transformers' **kwargs: Unpack[TransformersKwargs]
        if p.kind == p.VAR_KEYWORD:
            typed = typing.get_args(p.annotation)
            keys = getattr(typed[0], "__annotations__", None) if typed else None
            allowed = None if keys is None else allowed | set(keys)
    if allowed is not None:
        unknown = sorted(set(inputs) - allowed)
        if unknown:
            raise TypeError(f"{type(model).__name__}.forward takes no {unknown}; it takes "
                            f"{sorted(n for n in params if n != 'kwargs')} (and transformers' "
                            "keyword options)")


def _implementation(model, specs) -> str:
    if any(s.sinks for _, _, s in specs) or not getattr(model, "_supports_sdpa", True):
        # (BLOOM, MPT, GPT-Neo: no sdpa, their masks are eager's (MPT's bool, True where
        # masked), their float32 upcasts undone by float64_upcasts)
        return "eager"                   # transformers' sdpa drops the sinks
    if any(s.softcap is not None for _, _, s in specs):
        return EAGER_FLOAT64             # sdpa refuses the soft-cap, eager's softmax is float32
    return "sdpa"


def compare_transformers_model(model, *, seed: int = 0, prompt: dict | None = None,
                               **inputs) -> ModelReport:
    """Run ``model(**inputs)`` once in float64 and diff every attention layer it runs.

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model; left untouched (a float64 copy runs).
    seed : int
        Seed of the random upstream gradients (one per layer call).
    prompt : dict, optional
        A decoder's prompt, as keyword inputs (``input_ids``, ``attention_mask``,
        ``position_ids``): the copy runs it first with ``use_cache=True``, then ``inputs``
        (the next tokens, the mask of prompt and next tokens) continue from the cache it
        filled, as ``generate()`` does. Both forwards are diffed, and each layer's cached
        keys and values against ours recomputed from its prompt call (rows ``"... (cache)"``).
    **inputs : what ``model`` takes (``input_ids``, ``attention_mask``, ``decoder_input_ids``,
        ``pixel_values``, ``input_features``, ...), tensors or arrays. A filled cache
        (``past_key_values=`` or ``cache=``, a ``DynamicCache``) is continued from: copied to
        float64, each layer's keys and values taken from it as given (a note says so; pass
        ``prompt=`` instead to have them recomputed). A cache kind that cannot be replayed
        (static, quantized, offloaded, hybrid, encoder-decoder) is refused by name.

    Returns
    -------
    ModelReport
        ``.ok``, ``.layers`` (one :class:`LayerResult` per attention layer call, in order, with
        ``forward_error`` and ``gradient_error``; ``#k`` for a layer's k-th call), ``.first_
        disagreement``, ``.refused``; ``print(report)`` gives the table, a notebook shows it as
        HTML. Query rows that attend no key (left padding in a causal model) are left out and
        listed per layer.
    """
    torch = import_optional("torch", "attention_np.interop.transformers.model_diff")
    import_optional("transformers", "attention_np.interop.transformers.model_diff")
    passed = next((n for n in CACHES if inputs.get(n) is not None), None)   # as the user named it
    inputs = cache_name(model, inputs)
    check_model_inputs(model, inputs, torch)
    check_seed(seed)
    given = next((n for n in CACHES if inputs.get(n) is not None), None)
    if prompt is not None:
        if not isinstance(prompt, dict) or not prompt:
            raise TypeError(f"prompt must be a dict of the prompt's inputs (input_ids=..., "
                            f"attention_mask=...), got {type(prompt).__name__}")
        prompt = cache_name(model, prompt)
        check_model_inputs(model, prompt, torch)
        if given is not None:
            raise ValueError(f"got prompt= and a filled cache ({given}=): pass one, the prompt "
                             "(the float64 copy fills its own cache from it) or its cache")
    if given is not None:
        try:
            check_cache(inputs[given])
        except UnsupportedLayer as e:
            return ModelReport(type(model).__name__, refused=[(passed, str(e))])

    def run(work, to_torch):
        feed = to_torch(inputs)
        if prompt is not None:
            takes = inspect.signature(work.forward).parameters
            if not any(n in takes for n in CACHES):
                raise UnsupportedLayer(f"{type(work).__name__}.forward takes no cache: a "
                                       "prompt has nothing to fill")
            out = work(**{**to_torch(prompt), "use_cache": True})
            filled = getattr(out, "past_key_values", None)
            if filled is None:
                raise UnsupportedLayer(f"{type(work).__name__} returned no cache for the prompt "
                                       "(use_cache=True): nothing to continue from")
            feed[next(n for n in CACHES if n in takes)] = filled
        elif given is not None:
            feed[given] = float64_cache(inputs[given])
        if prompt is not None or given is not None:
            feed["use_cache"] = True
        elif "use_cache" in inspect.signature(work.forward).parameters:
            feed.setdefault("use_cache", False)     # each layer sees the whole sequence
        work(**feed)
    report, _ = diff_run(model, run, seed)
    if given is not None and any(not torch.isfinite(t).all() for layer in inputs[given].layers
                                 if getattr(layer, "keys", None) is not None
                                 for t in (layer.keys, layer.values)):
        report.notes.append(f"the model's cache ({passed}=) holds NaN or inf keys or values "
                            "(a prompt row the model computed as NaN, e.g. every key masked): "
                            "the model's new tokens attend them with weight 0, 0 * NaN = NaN")
    if given is not None and report.layers:
        report.notes.append(f"the cached keys and values were read from {passed}= as given "
                            f"({type(inputs[given]).__name__}), not recomputed: pass the "
                            "prompt as prompt= to compare them too")
    return report


def cache_name(model, inputs: dict) -> dict:
    """``inputs`` with a cache passed as ``past_key_values`` named as ``model.forward`` takes
    it (transformers 5 renames it ``cache``); anything else as it is (a model that is none:
    :func:`check_model_inputs` says so)."""
    if not callable(getattr(model, "forward", None)):
        return inputs
    params = inspect.signature(model.forward).parameters
    if "past_key_values" in inputs and "past_key_values" not in params and "cache" in params:
        inputs = {("cache" if k == "past_key_values" else k): v for k, v in inputs.items()}
    return inputs


def float64_cache(cache):
    """A float64 copy of a ``DynamicCache`` (the model's own left as it was)."""
    cache = copy.deepcopy(cache)
    for layer in cache.layers:
        if getattr(layer, "is_initialized", False) and layer.keys is not None:
            layer.keys, layer.values = layer.keys.double(), layer.values.double()
    return cache


def diff_run(model, run, seed: int = 0) -> tuple:
    """``(report, result)``: ``result = run(work, to_torch)`` on a float64 copy ``work`` of
    ``model`` with every attention layer hooked (``to_torch`` makes a dict of inputs float64
    tensors), then every recorded layer call diffed (:func:`compare_transformers_model`'s
    report). ``run`` may call the copy several times (a prompt and its continuation,
    ``generate()``): each call of a layer is a row (``#k``), and each call continuing from a
    filled cache is diffed on it, its cached keys and values against ours recomputed from
    the layer's earlier calls."""
    torch = import_optional("torch", "attention_np.interop.transformers.model_diff")
    work = copy.deepcopy(model).double().eval()
    float64_experts(work)
    specs, refused = attention_layers(work)
    report = ModelReport(type(model).__name__, refused=refused, notes=rounded_buffers(model),
                         weights=stored_weights_line(stored_dtypes(model)))
    if not specs:
        if not refused:
            report.notes.append("no attention layer found")
        return report, None
    for name, module, spec in specs:      # GPT-J (5.15-5.17): its own table, checked, then ours
        if spec.rope_table:
            report.layers.append(LayerResult(f"{name}.{spec.rope_table} (sin|cos table)",
                                             type(module).__name__,
                                             float64_table(module, spec, torch), kind="rotary"))
    impl = _implementation(work, specs)
    for cfg in {id(m.config): m.config for m in work.modules()      # (IDEFICS: a float config)
                if hasattr(getattr(m, "config", None), "_attn_implementation")}.values():
        cfg._attn_implementation = impl
    log, calls, handles = [], [], []
    params = {}
    for name, module, spec in specs:
        if impl == "sdpa" and not hasattr(module, "is_causal"):
            # a model without sdpa (Splinter): its eager layers are causal by their mask only,
            # sdpa takes an absent is_causal for True; the copy's layer says what eager does
            module.is_causal = spec.is_causal
        prepare_recent_layer(module, spec, impl)
        params[name] = params_from_transformers(module)[0]        # before the run
        sig = inspect.signature(module.forward)

        def pre(mod, args, kwargs, _name=name, _sig=sig, _spec=spec):
            bound = _sig.bind_partial(*args, **kwargs).arguments
            extra = bound.pop("kwargs", {}) or {}
            bound = {**extra, **bound}
            calls.append({"name": _name, "module": mod, "spec": _spec, "args": args,
                          "kwargs": dict(kwargs), "bound": bound,
                          "rope": _rope_source(log, bound.get("position_embeddings")),
                          **_cache_before(mod, bound)})

        def post(mod, args, kwargs, output, _name=name, _spec=spec):
            out = output[0] if isinstance(output, (tuple, list)) else output   # GPT-1: a list
            call = next(c for c in reversed(calls) if c["name"] == _name)
            call["out"] = _np(out)
            if "cache" in call:
                call["after"] = cached_keys_values(call["cache"], call["index"])
            if _spec.rope_in_layer:              # IDEFICS: the call of its own rotary_emb
                call["rope"] = next((e for e in reversed(log)
                                     if e["name"] == f"{_name}.rotary_emb"), None)
        handles += [module.register_forward_pre_hook(pre, with_kwargs=True),
                    module.register_forward_hook(post, with_kwargs=True)]
    handles += _rotary_hooks(work, log)
    tables = []
    handles += _table_hooks(work, specs, tables)

    def to_torch(d):
        feed = {k: torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v
                for k, v in d.items()}
        return {k: v.double() if hasattr(v, "is_floating_point") and v.is_floating_point()
                else v for k, v in feed.items()}
    try:
        upcasts = not getattr(work, "_supports_sdpa", True) or \
            any(scores_in_own_method(m) for _, m, _ in specs)    # BLOOM, MPT, GPT-Neo
        with contextlib.ExitStack() as stack, torch.no_grad():
            stack.enter_context(float64_upcasts(torch, upcasts))
            for kind in {type(m): m for _, m, _ in specs}.values():
                stack.enter_context(float64_rope_function(kind))
            try:
                result = run(work, to_torch)
            except UnsupportedLayer as e:
                report.refused.append(("forward", str(e)))
                return report, None
        for h in handles:
            h.remove()
        rng = np.random.default_rng(seed)
        for entry in tables:
            _table_row(entry, report)
        seen, rotary_rows, ours_cache = {}, set(), {}
        for call in calls:
            seen[call["name"]] = seen.get(call["name"], -1) + 1
            label = call["name"] + (f"#{seen[call['name']]}" if seen[call["name"]] else "")
            try:
                if call.get("refuse"):
                    raise UnsupportedLayer(call["refuse"])
                if call["spec"].has_rope:
                    _rotary_row(call, report, rotary_rows)
                with contextlib.ExitStack() as stack:
                    stack.enter_context(float64_upcasts(torch, upcasts))
                    stack.enter_context(float64_rope_function(call["module"]))
                    report.layers += _diff_cached_call(label, call, params[call["name"]], rng,
                                                       torch, ours_cache)
            except UnsupportedLayer as e:
                report.refused.append((label, str(e)))
        called = {c["name"] for c in calls}
        report.not_run += [(name, type(m).__name__) for name, m, _ in specs if name not in called]
    finally:
        for h in handles:
            h.remove()
    return report, result


def _rotary_row(call, report, done: set) -> None:
    """Before a RoPE layer's row: the ``(cos, sin)`` the model passed it against ours for the
    positions its rotary embedding was called with (one row per distinct pair); sets
    ``call["positions"]`` (B, L) for the replay."""
    spec, bound = call["spec"], call["bound"]
    x = bound.get("hidden_states", call["args"][0] if call["args"] else None)
    B, L = x.shape[:2]
    entry = call["rope"]
    pe = bound.get("position_embeddings")
    if spec.rope_in_layer and entry is not None:   # IDEFICS: what its own rotary_emb returned
        pe = entry["out"]
    if entry is None and spec.rope_table and bound.get("position_ids") is not None:
        positions = _np(bound["position_ids"])          # GPT-J (5.15-5.17): its table's rows
    elif entry is None:
        positions = np.arange(L)
        report.notes.append(f"{call['name']}: no rotary embedding call was seen; its RoPE "
                            "positions are taken as 0 .. L-1")
    else:
        positions = _text_positions(entry["positions"], spec, type(call["module"]).__name__)
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


def _grid_call(call, spec, arg, B: int, torch):
    """A call of a layer with a 2-D relative position table (Data2VecVision, Swin): refused by
    name when the table is interpolated to another grid; Swin's ``(num_windows, N, N)``
    shifted-window mask as the ``(B, 1, N, N)`` the layer adds (window ``b`` gets
    ``mask[b % num_windows]``)."""
    bound, name = call["bound"], type(call["module"]).__name__
    H, W, cls = spec.grid_table
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


def _qkv_call(layer, bound: dict, roles: dict) -> tuple:
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


def _diff_call(label, call, params, rng, torch) -> LayerResult:
    spec, bound, layer = call["spec"], call["bound"], call["module"]
    if isinstance(bound.get("is_causal"), bool):       # CLIP's text model: is_causal=True
        spec = replace(spec, is_causal=bound["is_causal"])  # passed to a non-causal layer
    x_t = bound.get("hidden_states", call["args"][0] if call["args"] else None)
    kv_t = bound.get("key_value_states", bound.get("encoder_hidden_states",
                                                   bound.get("cross_attention_states")))  # Dia
    roles = qkv_inputs(layer)           # torch's MultiheadAttention, CTRL: three inputs
    if roles is not None:
        x_t, kv_t = _qkv_call(layer, bound, roles)
    x, kv = _np(x_t), _np(kv_t)
    B, L = x.shape[:2]
    S = L + call.get("n_cached", 0) if kv is None else kv.shape[1]
    cross = kv is not None
    arg = bound.get("encoder_attention_mask") if spec.cross else bound.get(
        "attention_mask", bound.get("mask"))
    if arg is not None and "attention_mask" not in bound and keep_mask(layer):
        arg = arg != 0                          # XLM: (B, S) or (B, L, S), 0 where masked
        arg = arg[:, None, None] if arg.ndim == 2 else arg[:, None]      # (B, 1, 1|L, S)
    pb = None if spec.alibi is not None else bound.get("position_bias")   # MPT: its ALiBi
    p = dict(params)
    if spec.grid_table is not None:
        arg = _grid_call(call, spec, arg, B, torch)
    mask, bias = _mask(arg, spec if not cross else no_causal(spec), B, L, S, cross, own=True)
    shared = bound.get("relative_position_bias")   # Data2VecVision: the model's shared table
    if shared is not None and hasattr(shared, "shape"):
        bias = _np(shared) if bias is None else bias + _np(shared)
    if pb is not None:        # T5: the bias block 0 computed (older transformers: mask folded in)
        keep, pb = _mask(pb, spec, B, L, S, cross)
        mask = keep if mask is None else mask & keep
        bias = pb if bias is None else bias + (0.0 if pb is None else pb)
        p.pop("bias_table", None)
    if spec.alibi is not None:   # ours, whatever the model added (Falcon: folded in its mask)
        bias = alibi_bias(np.asarray(spec.alibi), L, S, align="bottom_right")[None]
    positions = None
    if spec.has_rope:
        positions = call.get("positions")
    rows = dead_rows(mask)
    dout = rng.standard_normal(call["out"].shape)
    if rows is not None:
        dout = np.where(rows[..., None], 0.0, dout)
    # the layer again on the recorded inputs, for the gradients
    for t in layer.parameters():
        t.requires_grad_(True)
        t.grad = None
    xt = x_t.detach().clone().requires_grad_(True)
    kwargs = {k: (call.get("shell") if k in CACHES else v) for k, v in call["kwargs"].items()}
    live = next((bound[n] for n in CACHES if bound.get(n) is not None), None)
    args = (xt,) + tuple(call.get("shell") if a is live and live is not None else a
                         for a in call["args"][1:]) if call["args"] else ()   # GIT: positional
    if not call["args"]:
        kwargs["hidden_states"] = xt
    kvt = None
    if kv_t is not None:
        kvt = kv_t.detach().clone().requires_grad_(True)
    if roles is not None:               # each input the layer got, as the tensor it was
        def swap(a):
            return xt if a is x_t else kvt if kv_t is not None and a is kv_t else a
        args = tuple(swap(a) for a in call["args"])
        kwargs = {k: swap(v) for k, v in kwargs.items() if k != "hidden_states"}
    elif kv_t is not None:
        at = next((i for i, a in enumerate(args) if a is kv_t), None)   # Dia: positional
        if at is not None:
            args = args[:at] + (kvt,) + args[at + 1:]
        else:
            kwargs[next((n for n in ("key_value_states", "cross_attention_states")
                         if n in kwargs), "encoder_hidden_states")] = kvt
    if spec.rope_in_layer:      # IDEFICS: its own rotary_emb gives our float64 cos, sin (its
        float64_rotary(layer.rotary_emb, {None: spec}, None, torch, [], [])   # float32 ones:
    elif spec.has_rope:         # the layer again with our float64 cos, sin   (_rotary_row)
        cos, sin = spec_cos_sin(spec, positions)
        ours = (torch.from_numpy(cos), torch.from_numpy(sin))
        at = next((i for i, a in enumerate(args) if a is bound.get("position_embeddings")), None)
        if at is not None:                          # Dia: passed positionally
            args = args[:at] + (ours,) + args[at + 1:]
        else:
            kwargs["position_embeddings"] = ours
    try:
        with torch.enable_grad():
            out_t = layer(*args, **kwargs)
            out_t = out_t[0] if isinstance(out_t, (tuple, list)) else out_t
            out_t.backward(torch.from_numpy(dout))
    finally:
        if spec.rope_in_layer:
            del layer.rotary_emb.forward                 # its own forward again
    got = {"out": _np(out_t) if spec.has_rope else call["out"], "dhidden_states": _np(xt.grad)}
    if kvt is not None:
        got["dkey_value"] = _np(kvt.grad)
    grads = params_from_transformers(layer, grads=True)[0]
    got.update({f"d{n}": grads[n] for n in p})
    if call.get("cached") is not None:          # the new positions after the cached ones
        ours = replay_cached(spec, p, x, *call["cached"], mask, dout, positions=positions,
                             bias=bias)
    else:
        ours = replay(spec, p, x, kv, mask, dout, positions=positions, bias=bias)
    if spec.adds_residual:      # BLOOM: out + residual (no gradient: the block's own input)
        ours["out"] = ours["out"] + _np(bound["residual"])
    excluded = leave_out_rows(got, ours, rows)
    return LayerResult(label, type(layer).__name__, judge(got, ours), excluded)


def _cache_before(layer, bound: dict) -> dict:
    """What a layer call's cache held before the call (in the pre-hook): the cache, the layer's
    index in it, its keys and values (None: empty) and a copy of its cache layer (for the
    call again, with the gradients); for a cache of a kind that cannot be replayed, why, and
    whether it holds anything (refused when the call attends it: :func:`_diff_cached_call`);
    ``{}`` without a cache."""
    cache = next((bound[n] for n in CACHES if bound.get(n) is not None), None)
    if cache is None:
        return {}
    try:
        check_cache(cache)
    except UnsupportedLayer as e:
        filled = getattr(cache, "get_seq_length", None)
        return {"unread": str(e), "filled": filled is None or bool(filled())}
    index = getattr(layer, "layer_idx", getattr(layer, "layer_id", None))      # GPT-Neo: _id
    if not isinstance(index, int):
        return {"refuse": f"{type(layer).__name__} has no layer_idx: the cache layer it reads "
                          "is not known; a layer with one is supported"}
    before = cached_keys_values(cache, index)
    return {"cache": cache, "index": index, "before": before,
            "snapshot": None if before is None else copy.deepcopy(cache.layers[index])}


def _check_appended(call, T: int) -> None:
    """The call stored its ``T`` new keys and values in its own cache layer (the last
    ``sliding_window - 1`` positions of a sliding one); refused by name otherwise (a layer
    reading another layer's keys and values: shared KV)."""
    before, after, index = call["before"], call.get("after"), call["index"]
    n = 0 if before is None else before[0].shape[-2]
    have = 0 if after is None else after[0].shape[-2]
    layer = call["cache"].layers[index] if index < len(call["cache"].layers) else None
    want = n + T
    if type(layer).__name__ == "DynamicSlidingWindowLayer" and not layer.record_past:
        want = min(want, layer.sliding_window - 1)
    if have != want:
        raise UnsupportedLayer(
            f"{type(call['module']).__name__}: a call of {T} new position(s) left cache layer "
            f"{index} with {have} position(s), not {want}: the layer does not store its own keys "
            "and values there (keys and values shared with another layer); not supported")


def len_of(call) -> int:
    """The positions of a layer call's hidden states."""
    return call["bound"].get("hidden_states", call["args"][0] if call["args"] else None).shape[1]


def _diff_cached_call(label, call, params, rng, torch, ours_cache: dict) -> list:
    """The rows of one layer call: with a filled cache, first its cached keys and values
    against ours (``"<label> (cache)"``, when ours were recomputed from the layer's earlier
    calls), then the call itself replayed on the model's cached keys and values
    (:func:`~attention_np.interop.transformers.cache_replay.replay_cached`); ours then get this
    call's keys and values, for the layer's next call."""
    rows, spec, bound = [], call["spec"], call["bound"]
    call["cached"] = call["shell"] = None
    arg = bound.get("attention_mask", bound.get("mask"))
    if "unread" in call and (call["filled"] if not hasattr(arg, "shape") else
                             arg.shape[-1] != len_of(call)):
        # a cache kind not read, that the call attends (its mask wider than its own positions:
        # a static cache's slots; without a mask, a cache holding anything): refused by name
        raise UnsupportedLayer(call["unread"])
    if "cache" not in call:
        return [_diff_call(label, call, params, rng, torch)]
    x = _np(bound.get("hidden_states", call["args"][0] if call["args"] else None))
    T = x.shape[1]
    _check_appended(call, T)
    if call["before"] is not None:
        name = type(call["module"]).__name__
        refuse_cached(spec, name)
        k, v = kv_heads(spec, *(_np(t) for t in call["before"]), name)    # (Falcon: copies)
        used = k.shape[-2] if arg is None else arg.shape[-1] - T
        sliding = type(call["snapshot"]).__name__ == "DynamicSlidingWindowLayer"
        if not 0 <= used <= k.shape[-2] or (used != k.shape[-2] and not sliding):
            raise UnsupportedLayer(f"{name}: a mask over {arg.shape[-1]} keys for {T} new and "
                                   f"{k.shape[-2]} cached positions (the mask is not the "
                                   "cache's) is not supported")
        k, v = k[..., k.shape[-2] - used:, :], v[..., v.shape[-2] - used:, :]
        call["cached"], call["n_cached"] = (k, v), used
        shell = copy.copy(call["cache"])
        shell.layers = list(shell.layers)
        shell.layers[call["index"]] = copy.deepcopy(call["snapshot"])
        call["shell"] = shell
        mine = ours_cache.get(call["name"])
        if mine is not None and mine.length >= used:
            rows.append(LayerResult(f"{label} (cache)", name, [
                check_float64("k cached", k, mine.k[..., mine.length - used:, :]),
                check_float64("v cached", v, mine.v[..., mine.length - used:, :])], kind="cache"))
    rows.append(_diff_call(label, call, params, rng, torch))
    pe = bound.get("position_embeddings")      # else what its rotary embedding returned
    pe = pe if pe is not None else call["rope"]["out"] if call.get("rope") else (None, None)
    ours_cache.setdefault(call["name"], KVCache(1 << 40)).append(
        *new_keys_values(spec, params, x, tuple(None if t is None else _np(t) for t in pe)))
    return rows
