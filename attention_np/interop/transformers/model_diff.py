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
import functools
import inspect
import typing

import numpy as np

from attention_np._checks import check_seed
from attention_np._optional import import_optional
from attention_np.compose.decode import KVCache
from attention_np.interop.tolerance import check_float64, judge
from attention_np.interop.transformers.algorithm_refusals import recurrent_layer
from attention_np.interop.transformers.cache_replay import (
    cached_keys_values,
    check_cache,
    kv_heads,
    new_keys_values,
    refuse_cached,
    replay_cached,
)
from attention_np.interop.transformers.layer_reading import (
    ALiBi,
    GridTable,
    UnsupportedLayer,
    layer_spec,
    no_causal,
    params_from_transformers,
    qkv_inputs,
    with_causality,
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
from attention_np.interop.transformers.recorded import (
    grid_call,
    numpy_of,
    qkv_call,
    recorded_mask,
    rope_source,
    rotary_hooks,
    rotary_row,
    table_hooks,
    table_row,
)
from attention_np.interop.transformers.refusal import refuse
from attention_np.interop.transformers.replay import (
    dead_rows,
    float64_rope_function,
    leave_out_rows,
    replay,
)
from attention_np.interop.transformers.rotary import float64_rotary, float64_table, spec_cos_sin
from attention_np.interop.transformers.weights import (
    rounded_buffers,
    stored_dtypes,
    stored_weights_line,
)
from attention_np.variants.position_bias import alibi_bias

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
    for name in ("input_ids", "decoder_input_ids"):
        if inputs.get(name) is not None:
            _check_token_ids(model, name, inputs[name])


def _check_token_ids(model, name: str, ids) -> None:
    """``ids`` (a tensor or an array) integer token ids inside the model's vocabulary (its input
    embedding's rows), named ``name``: else torch's embedding raises deep inside the model."""
    values = np.asarray(ids.detach().cpu() if hasattr(ids, "detach") else ids)
    if not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integer token ids, got {values.dtype} "
                        f"(shape {values.shape})")
    try:
        rows = getattr(model.get_input_embeddings(), "num_embeddings", None)
    except (AttributeError, NotImplementedError):      # no embedding of ids to check against
        rows = None
    if values.size and rows is not None and (values.min() < 0 or values.max() >= rows):
        raise ValueError(f"{name} holds ids in [{values.min()}, {values.max()}] but "
                         f"{type(model).__name__}'s vocabulary has {rows} (ids 0 .. {rows - 1})")


def _implementation(model, specs) -> str:
    if any(s.sinks for _, _, s in specs) or not getattr(model, "_supports_sdpa", True):
        # (BLOOM, MPT, GPT-Neo: no sdpa, their masks are eager's (MPT's bool, True where
        # masked), their float32 upcasts undone by float64_upcasts)
        return "eager"                   # transformers' sdpa drops the sinks
    if any(s.attention.softcap is not None for _, _, s in specs):
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
    prompt = _check_prompt(model, prompt, given, torch)
    if given is not None:
        try:
            check_cache(inputs[given])
        except UnsupportedLayer as e:
            return ModelReport(type(model).__name__, refused=[(passed, str(e))])
    run = functools.partial(_forward, inputs=inputs, prompt=prompt, given=given)
    report, _ = diff_run(model, run, seed)
    report.notes += _given_cache_notes(report, inputs, given, passed, torch)
    return report


def _check_prompt(model, prompt, given, torch):
    """``prompt`` (None, or a dict of inputs the model takes, its cache named as it takes it),
    refused beside a filled cache ``given``."""
    if prompt is None:
        return None
    if not isinstance(prompt, dict) or not prompt:
        raise TypeError(f"prompt must be a dict of the prompt's inputs (input_ids=..., "
                        f"attention_mask=...), got {type(prompt).__name__}")
    prompt = cache_name(model, prompt)
    check_model_inputs(model, prompt, torch)
    if given is not None:
        raise ValueError(f"got prompt= and a filled cache ({given}=): pass one, the prompt "
                         "(the float64 copy fills its own cache from it) or its cache")
    return prompt


def _forward(work, to_torch, *, inputs: dict, prompt, given) -> None:
    """The float64 copy's forward on ``inputs``: after the ``prompt`` (run first, with
    ``use_cache=True``) continuing from the cache it filled, or from the float64 copy of the
    cache ``inputs[given]``; else without a cache (each layer sees the whole sequence)."""
    feed = to_torch(inputs)
    if prompt is not None:
        name, filled = _fill_cache(work, to_torch(prompt))
        feed[name] = filled
    elif given is not None:
        feed[given] = float64_cache(inputs[given])
    if prompt is not None or given is not None:
        feed["use_cache"] = True
    elif "use_cache" in inspect.signature(work.forward).parameters:
        feed.setdefault("use_cache", False)     # each layer sees the whole sequence
    work(**feed)


def _fill_cache(work, prompt: dict) -> tuple:
    """``(name, cache)``: the cache the copy filled running ``prompt``, and the name its forward
    takes it by; refused by name when it takes or returns none."""
    takes = inspect.signature(work.forward).parameters
    if not any(n in takes for n in CACHES):
        raise UnsupportedLayer(f"{type(work).__name__}.forward takes no cache: a "
                               "prompt has nothing to fill")
    out = work(**{**prompt, "use_cache": True})
    filled = getattr(out, "past_key_values", None)
    if filled is None:
        raise UnsupportedLayer(f"{type(work).__name__} returned no cache for the prompt "
                               "(use_cache=True): nothing to continue from")
    return next(n for n in CACHES if n in takes), filled


def _given_cache_notes(report, inputs: dict, given, passed, torch) -> list:
    """The notes of a run continuing from a cache the user passed (``inputs[given]``, named
    ``passed``): NaN or inf keys or values in it, and its keys and values read as given."""
    if given is None:
        return []
    notes = []
    if any(not torch.isfinite(t).all() for layer in inputs[given].layers
           if getattr(layer, "keys", None) is not None for t in (layer.keys, layer.values)):
        notes.append(f"the model's cache ({passed}=) holds NaN or inf keys or values "
                     "(a prompt row the model computed as NaN, e.g. every key masked): "
                     "the model's new tokens attend them with weight 0, 0 * NaN = NaN")
    if report.layers:
        notes.append(f"the cached keys and values were read from {passed}= as given "
                     f"({type(inputs[given]).__name__}), not recomputed: pass the "
                     "prompt as prompt= to compare them too")
    return notes


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
    report.layers += _own_table_rows(specs, torch)
    impl = _set_implementation(work, specs)
    log, calls, tables = [], [], []
    params, handles = _hook_layers(specs, impl, log, calls)
    handles += rotary_hooks(work, log)
    handles += table_hooks(work, specs, tables)
    upcasts = not getattr(work, "_supports_sdpa", True) or \
        any(scores_in_own_method(m) for _, m, _ in specs)    # BLOOM, MPT, GPT-Neo
    try:
        result = _run_hooked(work, run, specs, upcasts, torch)
    except UnsupportedLayer as e:
        report.refused.append(("forward", str(e)))
        return report, None
    finally:
        for h in handles:
            h.remove()
    for entry in tables:
        table_row(entry, report)
    _diff_calls(report, calls, params, upcasts, np.random.default_rng(seed), torch)
    called = {c["name"] for c in calls}
    report.not_run += [(name, type(m).__name__) for name, m, _ in specs if name not in called]
    return report, result


def _own_table_rows(specs, torch) -> list:
    """A row per layer with its own RoPE sin|cos table (GPT-J in transformers 5.15-5.17): the
    table checked against ours, then replaced by ours."""
    return [LayerResult(f"{name}.{spec.rope_inputs.table} (sin|cos table)", type(module).__name__,
                        float64_table(module, spec, torch), kind="rotary")
            for name, module, spec in specs if spec.rope_inputs.table]


def _set_implementation(work, specs) -> str:
    """The attention implementation every config of the copy is set to (:func:`_implementation`)."""
    impl = _implementation(work, specs)
    for cfg in {id(m.config): m.config for m in work.modules()      # (IDEFICS: a float config)
                if hasattr(getattr(m, "config", None), "_attn_implementation")}.values():
        cfg._attn_implementation = impl
    return impl


def _hook_layers(specs, impl: str, log: list, calls: list) -> tuple:
    """``(params, handles)``: each layer of the copy prepared for ``impl``, its parameters read
    before the run, and the hooks recording each of its calls in ``calls``."""
    params, handles = {}, []
    for name, module, spec in specs:
        if impl == "sdpa" and not hasattr(module, "is_causal"):
            # a model without sdpa (Splinter): its eager layers are causal by their mask only,
            # sdpa takes an absent is_causal for True; the copy's layer says what eager does
            module.is_causal = spec.is_causal
        prepare_recent_layer(module, spec, impl)
        params[name] = params_from_transformers(module)[0]        # before the run
        pre = _record_inputs(name, spec, inspect.signature(module.forward), log, calls)
        handles += [module.register_forward_pre_hook(pre, with_kwargs=True),
                    module.register_forward_hook(_record_output(name, spec, log, calls),
                                                 with_kwargs=True)]
    return params, handles


def _record_inputs(name: str, spec, sig, log: list, calls: list):
    """The pre-hook of layer ``name``: a new entry of ``calls`` with its arguments (by name,
    ``bound``), the rotary call whose cos and sin it got, and what its cache held."""
    def pre(mod, args, kwargs):
        bound = sig.bind_partial(*args, **kwargs).arguments
        extra = bound.pop("kwargs", {}) or {}
        bound = {**extra, **bound}
        calls.append({"name": name, "module": mod, "spec": spec, "args": args,
                      "kwargs": dict(kwargs), "bound": bound,
                      "rope": rope_source(log, bound.get("position_embeddings")),
                      **_cache_before(mod, bound)})
    return pre


def _record_output(name: str, spec, log: list, calls: list):
    """The hook of layer ``name``: its last call gets the output, what its cache holds after
    it, and (IDEFICS) the call of its own rotary embedding."""
    def post(mod, args, kwargs, output):
        out = output[0] if isinstance(output, (tuple, list)) else output   # GPT-1: a list
        call = next(c for c in reversed(calls) if c["name"] == name)
        call["out"] = numpy_of(out)
        if "cache" in call:
            call["after"] = cached_keys_values(call["cache"], call["index"])
        if spec.rope_inputs.in_layer:       # IDEFICS: the call of its own rotary_emb
            call["rope"] = next((e for e in reversed(log)
                                 if e["name"] == f"{name}.rotary_emb"), None)
    return post


def _float64_tensors(d: dict, torch) -> dict:
    """A dict of inputs with its arrays as tensors and its floating tensors float64."""
    feed = {k: torch.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v
            for k, v in d.items()}
    return {k: v.double() if hasattr(v, "is_floating_point") and v.is_floating_point()
            else v for k, v in feed.items()}


def _run_hooked(work, run, specs, upcasts: bool, torch):
    """``run(work, to_torch)`` without gradients, with the float32 upcasts run in float64
    (``upcasts``) and each layer class's rotary function in float64."""
    with contextlib.ExitStack() as stack, torch.no_grad():
        stack.enter_context(float64_upcasts(torch, upcasts))
        for kind in {type(m): m for _, m, _ in specs}.values():
            stack.enter_context(float64_rope_function(kind))
        return run(work, functools.partial(_float64_tensors, torch=torch))


def _diff_calls(report, calls: list, params: dict, upcasts: bool, rng, torch) -> None:
    """Every recorded call diffed in turn (``#k`` for a layer's k-th call), after its rotary
    row: its rows added to ``report``, or its refusal."""
    seen, rotary_rows, ours_cache = {}, set(), {}
    for call in calls:
        seen[call["name"]] = seen.get(call["name"], -1) + 1
        label = call["name"] + (f"#{seen[call['name']]}" if seen[call["name"]] else "")
        try:
            if call.get("refuse"):
                raise UnsupportedLayer(call["refuse"])
            if call["spec"].attention.rope is not None:
                rotary_row(call, report, rotary_rows)
            with contextlib.ExitStack() as stack:
                stack.enter_context(float64_upcasts(torch, upcasts))
                stack.enter_context(float64_rope_function(call["module"]))
                report.layers += _diff_cached_call(label, call, params[call["name"]], rng,
                                                   torch, ours_cache)
        except UnsupportedLayer as e:
            report.refused.append((label, str(e)))


def _diff_call(label, call, params, rng, torch) -> LayerResult:
    """One recorded layer call diffed: its output as the model computed it (a RoPE layer's,
    computed again with our float64 cos and sin) and its gradients, the layer run again on the
    recorded inputs from one random upstream gradient, against attention_np's replay of it."""
    spec, layer = _call_spec(call), call["module"]
    x_t, kv_t, roles = _recorded_inputs(call)
    x, kv = numpy_of(x_t), numpy_of(kv_t)
    B, L = x.shape[:2]
    S = L + call.get("n_cached", 0) if kv is None else kv.shape[1]
    mask, bias, p = _mask_and_bias(call, spec, params, (B, L, S, kv is not None), torch)
    positions = call.get("positions") if spec.attention.rope is not None else None
    rows = dead_rows(mask)
    dout = rng.standard_normal(call["out"].shape)
    if rows is not None:
        dout = np.where(rows[..., None], 0.0, dout)
    got = _run_again(call, spec, (x_t, kv_t, roles), p, positions, dout, torch)
    ours = _replay_call(call, spec, p, (x, kv, mask, bias), positions, dout)
    excluded = leave_out_rows(got, ours, rows)
    return LayerResult(label, type(layer).__name__, judge(got, ours), excluded)


def _call_spec(call):
    """The layer's reading, with the causality the call passed (CLIP's text model passes
    ``is_causal=True`` to a layer that is not causal by itself)."""
    spec, bound = call["spec"], call["bound"]
    if isinstance(bound.get("is_causal"), bool):       # CLIP's text model: is_causal=True
        spec = with_causality(spec, bound["is_causal"])     # passed to a non-causal layer
    return spec


def _recorded_inputs(call) -> tuple:
    """``(x_t, kv_t, roles)``: the tensors of the call's hidden states and encoder output (None:
    self-attention), and the query, key and value parameters of a layer taking them apart."""
    bound = call["bound"]
    x_t = bound.get("hidden_states", call["args"][0] if call["args"] else None)
    kv_t = bound.get("key_value_states", bound.get("encoder_hidden_states",
                                                   bound.get("cross_attention_states")))  # Dia
    roles = qkv_inputs(call["module"])      # torch's MultiheadAttention, CTRL: three inputs
    if roles is not None:
        x_t, kv_t = qkv_call(call["module"], bound, roles)
    return x_t, kv_t, roles


def _mask_argument(call, spec):
    """The mask the call got (a cross-attention's: the encoder's), XLM's keep mask as a bool
    ``(B, 1, 1|L, S)``."""
    bound, layer = call["bound"], call["module"]
    arg = bound.get("encoder_attention_mask") if spec.cross else bound.get(
        "attention_mask", bound.get("mask"))
    if arg is not None and "attention_mask" not in bound and keep_mask(layer):
        arg = arg != 0                          # XLM: (B, S) or (B, L, S), 0 where masked
        arg = arg[:, None, None] if arg.ndim == 2 else arg[:, None]      # (B, 1, 1|L, S)
    return arg


def _mask_and_bias(call, spec, params, dims: tuple, torch) -> tuple:
    """``(mask, bias, p)`` of a call of ``dims = (B, L, S, cross)``: our bool mask (the causal and
    window part ours, the padding the model's), the additive bias the layer got (the mask's
    own, Data2VecVision's shared table, T5's position bias from block 0; ALiBi: ours), and the
    parameters replayed (T5's bias table left out when the bias is given)."""
    B, L, S, cross = dims
    bound = call["bound"]
    arg = _mask_argument(call, spec)
    alibi = spec.relative_bias if isinstance(spec.relative_bias, ALiBi) else None
    pb = None if alibi is not None else bound.get("position_bias")   # MPT: its ALiBi
    p = dict(params)
    if isinstance(spec.relative_bias, GridTable):
        arg = grid_call(call, spec, arg, B, torch)
    mask, bias = recorded_mask(arg, spec if not cross else no_causal(spec), B, L, S, cross,
                               own=True)
    shared = bound.get("relative_position_bias")   # Data2VecVision: the model's shared table
    if shared is not None and hasattr(shared, "shape"):
        bias = numpy_of(shared) if bias is None else bias + numpy_of(shared)
    if pb is not None:        # T5: the bias block 0 computed (older transformers: mask folded in)
        keep, pb = recorded_mask(pb, spec, B, L, S, cross)
        mask = keep if mask is None else mask & keep
        bias = pb if bias is None else bias + (0.0 if pb is None else pb)
        p.pop("bias_table", None)
    if alibi is not None:   # ours, whatever the model added (Falcon: folded in its mask)
        bias = alibi_bias(np.asarray(alibi.slopes), L, S, align="bottom_right")[None]
    return mask, bias, p


def _run_again(call, spec, inputs: tuple, p: dict, positions, dout, torch) -> dict:
    """The layer again on the recorded ``inputs = (x_t, kv_t, roles)``, forward and backward
    from ``dout``: ``{"out", "dhidden_states", ("dkey_value"), "d<param>"...}`` (the output the
    model's, but for a RoPE layer, run on our float64 cos and sin)."""
    x_t, kv_t, roles = inputs
    layer = call["module"]
    for t in layer.parameters():
        t.requires_grad_(True)
        t.grad = None
    xt = x_t.detach().clone().requires_grad_(True)
    kvt = None if kv_t is None else kv_t.detach().clone().requires_grad_(True)
    args, kwargs = _recorded_arguments(call, xt)
    args, kwargs = _swap_inputs(call, args, kwargs, (x_t, xt, kv_t, kvt), roles)
    args, kwargs = _float64_rope_arguments(call, spec, args, kwargs, positions, torch)
    out_t = _forward_backward(layer, spec, args, kwargs, dout, torch)
    got = {"out": numpy_of(out_t) if spec.attention.rope is not None else call["out"],
           "dhidden_states": numpy_of(xt.grad)}
    if kvt is not None:
        got["dkey_value"] = numpy_of(kvt.grad)
    grads = params_from_transformers(layer, grads=True)[0]
    got.update({f"d{n}": grads[n] for n in p})
    return got


def _recorded_arguments(call, xt) -> tuple:
    """``(args, kwargs)`` of the call as recorded, the hidden states ``xt`` (positional, as GIT
    passes them, or by name) and the cache as it was before the call (``call["shell"]``)."""
    bound = call["bound"]
    kwargs = {k: (call.get("shell") if k in CACHES else v) for k, v in call["kwargs"].items()}
    live = next((bound[n] for n in CACHES if bound.get(n) is not None), None)
    args = (xt,) + tuple(call.get("shell") if a is live and live is not None else a
                         for a in call["args"][1:]) if call["args"] else ()   # GIT: positional
    if not call["args"]:
        kwargs["hidden_states"] = xt
    return args, kwargs


def _swap_inputs(call, args: tuple, kwargs: dict, tensors: tuple, roles) -> tuple:
    """``(args, kwargs)`` with the recorded inputs replaced by the leaves taking gradients,
    ``tensors = (x_t, xt, kv_t, kvt)``: a layer taking query, key and value apart gets each as
    the tensor it was; an encoder output goes where it was passed (Dia: positionally)."""
    x_t, xt, kv_t, kvt = tensors
    if roles is not None:               # each input the layer got, as the tensor it was
        def swap(a):
            return xt if a is x_t else kvt if kv_t is not None and a is kv_t else a
        return (tuple(swap(a) for a in call["args"]),
                {k: swap(v) for k, v in kwargs.items() if k != "hidden_states"})
    if kv_t is not None:
        at = next((i for i, a in enumerate(args) if a is kv_t), None)   # Dia: positional
        if at is not None:
            return args[:at] + (kvt,) + args[at + 1:], kwargs
        kwargs[next((n for n in ("key_value_states", "cross_attention_states")
                     if n in kwargs), "encoder_hidden_states")] = kvt
    return args, kwargs


def _float64_rope_arguments(call, spec, args: tuple, kwargs: dict, positions, torch) -> tuple:
    """``(args, kwargs)`` with our float64 cos and sin where the layer took the model's; a layer
    with its own rotary embedding (IDEFICS) gets it run in float64 instead (until
    :func:`_forward_backward` is done)."""
    layer, bound = call["module"], call["bound"]
    if spec.rope_inputs.in_layer:   # IDEFICS: its own rotary_emb made to give our float64
        float64_rotary(layer.rotary_emb, {None: spec}, None, torch, [], [])   # cos, sin (its
    elif spec.attention.rope is not None:   # float32 ones checked in rotary_row); else the
        #                                     layer again with our float64 cos, sin
        cos, sin = spec_cos_sin(spec, positions)
        ours = (torch.from_numpy(cos), torch.from_numpy(sin))
        at = next((i for i, a in enumerate(args) if a is bound.get("position_embeddings")), None)
        if at is not None:                          # Dia: passed positionally
            return args[:at] + (ours,) + args[at + 1:], kwargs
        kwargs["position_embeddings"] = ours
    return args, kwargs


def _forward_backward(layer, spec, args: tuple, kwargs: dict, dout, torch):
    """The layer's output tensor, its backward from ``dout`` done; a rotary embedding run in
    float64 for the call gets its own forward back."""
    try:
        with torch.enable_grad():
            out_t = layer(*args, **kwargs)
            out_t = out_t[0] if isinstance(out_t, (tuple, list)) else out_t
            out_t.backward(torch.from_numpy(dout))
    finally:
        if spec.rope_inputs.in_layer:
            del layer.rotary_emb.forward                 # its own forward again
    return out_t


def _replay_call(call, spec, p: dict, arrays: tuple, positions, dout) -> dict:
    """attention_np's forward and backward of the call, ``arrays = (x, kv, mask, bias)``: on the
    model's cached keys and values when it continued from a cache; BLOOM's residual added."""
    x, kv, mask, bias = arrays
    if call.get("cached") is not None:          # the new positions after the cached ones
        ours = replay_cached(spec, p, x, *call["cached"], mask, dout, positions=positions,
                             bias=bias)
    else:
        ours = replay(spec, p, x, kv, mask, dout, positions=positions, bias=bias)
    if spec.residual is not None and spec.residual.argument:   # BLOOM: out + residual (no
        #                                         gradient: the block's own input)
        ours["out"] = ours["out"] + numpy_of(call["bound"]["residual"])
    return ours


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
    rows, bound = [], call["bound"]
    call["cached"] = call["shell"] = None
    arg = bound.get("attention_mask", bound.get("mask"))
    _refuse_unread_cache(call, arg)
    if "cache" not in call:
        return [_diff_call(label, call, params, rng, torch)]
    x = numpy_of(bound.get("hidden_states", call["args"][0] if call["args"] else None))
    T = x.shape[1]
    _check_appended(call, T)
    if call["before"] is not None:
        rows += _cached_rows(label, call, arg, T, ours_cache)
    rows.append(_diff_call(label, call, params, rng, torch))
    _append_ours(call, params, x, ours_cache)
    return rows


def _refuse_unread_cache(call, arg) -> None:
    """Refused by name: a cache kind not read, that the call attends (its mask wider than its
    own positions: a static cache's slots; without a mask, a cache holding anything)."""
    if "unread" in call and (call["filled"] if not hasattr(arg, "shape") else
                             arg.shape[-1] != len_of(call)):
        raise UnsupportedLayer(call["unread"])


def _cached_rows(label, call, arg, T: int, ours_cache: dict) -> list:
    """A call continuing from cached keys and values: the ones its mask attends kept for the
    replay (``call["cached"]``, ``call["n_cached"]``), the cache as it was before the call for
    the layer run again (``call["shell"]``); a row of them against ours when ours hold them."""
    name = type(call["module"]).__name__
    refuse_cached(call["spec"], name)
    k, v = kv_heads(call["spec"], *(numpy_of(t) for t in call["before"]), name)  # (Falcon: copies)
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
    if mine is None or mine.length < used:
        return []
    return [LayerResult(f"{label} (cache)", name, [
        check_float64("k cached", k, mine.k[..., mine.length - used:, :]),
        check_float64("v cached", v, mine.v[..., mine.length - used:, :])], kind="cache")]


def _append_ours(call, params: dict, x, ours_cache: dict) -> None:
    """Our cache of the layer gets the call's keys and values, computed from its hidden states
    ``x`` and the cos and sin it got (else what its rotary embedding returned)."""
    pe = call["bound"].get("position_embeddings")      # else what its rotary embedding returned
    pe = pe if pe is not None else call["rope"]["out"] if call.get("rope") else (None, None)
    ours_cache.setdefault(call["name"], KVCache(1 << 40)).append(
        *new_keys_values(call["spec"], params, x,
                         tuple(None if t is None else numpy_of(t) for t in pe)))
