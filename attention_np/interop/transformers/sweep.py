"""Every model class of the installed transformers, diffed: a tiny random model of each, and a
verdict an engineer can act on (docs/transformers_sweep.md is this module's table).

For each ``model_type`` of transformers' ``AutoModel`` mapping,
:func:`~attention_np.interop.transformers.tiny_models.tiny_config` shrinks
the family's default config (widths 32, 4 heads, 2 key/value heads, 2 layers, feed-forward 37,
vocabulary 99, every sub-config likewise; no download), :func:`sweep_one` builds the model with
random weights and diffs it:

- a text model (``main_input_name == "input_ids"``) whole, with
  :func:`~attention_np.interop.transformers.model_diff.compare_transformers_model` (its rotary
  embedding's cos and sin, every attention layer call, forward and backward);
- any other model layer by layer, the first layer of each attention class with
  :func:`~attention_np.interop.transformers.compare_transformers_attention`.

A model that agrees is diffed again with ``1e-6`` added to the output of its first attention
layer (a forward hook on the torch side): the verdict must become MISMATCH and name that layer.
The row's verdict is one of ``"AGREE"`` (and the change caught), ``"refused"`` (the feature
named), ``"skipped"`` (no model: the tiny config could not be built, the reason said),
``"no attention"`` (no attention layer in the model), ``"MISMATCH"``, ``"not caught"`` or
``"error"`` (the last three: a false verdict, each a bug to fix).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from attention_np._optional import import_optional
from attention_np.interop.transformers.tiny_models import VOCAB, build, one_line

B, L = 2, 6                             # the inputs: 2 sequences of 6 tokens
CHANGE = 1e-6                           # added to one layer's output: must be caught and named
CACHED_NEW = 2                          # the cached mode: the last 2 of the L tokens on the cache


@dataclass
class SweepRow:
    """One model class: its ``model_type``, class, verdict, largest error, reason or layers."""

    family: str
    model: str
    verdict: str
    max_error: float = float("nan")
    reason: str = ""

    @property
    def false_verdict(self) -> bool:
        return self.verdict in ("MISMATCH", "not caught", "error")


def text_inputs(model) -> dict | None:
    """``input_ids`` (and a mask of ones) for a text model whose forward takes them, else None."""
    import torch
    if getattr(model, "main_input_name", None) != "input_ids" or \
            getattr(model.config, "is_encoder_decoder", False):
        return None
    names = inspect.signature(model.forward).parameters
    if "input_ids" not in names:                  # a tower alone (BLIP-2's Q-Former, SmolVLM's)
        return None
    rng = np.random.default_rng(0)
    inputs = {"input_ids": torch.from_numpy(rng.integers(3, VOCAB, (B, L)))}
    if "attention_mask" in names:
        inputs["attention_mask"] = torch.ones((B, L), dtype=torch.long)
    return inputs


def why_not_run(model, inputs) -> str | None:
    """None if the model runs on ``inputs`` (before any diff; a copy, its experts run as the
    diff runs them), else the exception's type: CLIP also needs pixel_values, X-MOD a
    language, LayoutLMv3 boxes."""
    import copy

    import torch

    from attention_np.interop.transformers.recent import float64_experts
    try:
        work = copy.deepcopy(model)
        float64_experts(work)
        with torch.no_grad():
            work(**inputs)
    except Exception as e:                                         # noqa: BLE001
        return type(e).__name__
    return None


def _change(module):
    """A forward hook adding :data:`CHANGE` to a layer's output (its first element)."""
    def hook(mod, args, output):
        if isinstance(output, (tuple, list)):                 # (GPT-1's layer: a list)
            return type(output)([output[0] + CHANGE, *output[1:]])
        return output + CHANGE
    return module.register_forward_hook(hook)


def _only_the_change(checks) -> bool:
    """Whether the only disagreement among ``checks`` is the output, off by :data:`CHANGE`
    (within the output's tolerance): the layer agrees but for the change, which is caught."""
    bad = [c for c in checks if not c.ok]
    return [c.name for c in bad] == ["out"] and abs(bad[0].err - CHANGE) <= bad[0].tol


def _run_changed(model, inputs, layer, prompt=None):
    from attention_np.interop.transformers.model_diff import compare_transformers_model
    handle = _change(layer)
    try:
        return compare_transformers_model(model, prompt=prompt, **inputs)
    finally:
        handle.remove()


def decoder(model, found) -> str | None:
    """None if ``model`` may be a decoder whose forward continues from a cache (it takes a
    cache, and ``use_cache`` by name or through its ``**kwargs``: LLaVA, Qwen3-VL; no attention
    layer read is cross-attention), else why not. (One whose prompt leaves no cache, an
    encoder, is found by running it: :func:`continues_from_cache`.)"""
    params = inspect.signature(model.forward).parameters
    if getattr(model.config, "is_encoder_decoder", False):
        return "an encoder-decoder (its cache: EncoderDecoderCache)"
    kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if not any(n in params for n in ("cache", "past_key_values")) or \
            not ("use_cache" in params or kwargs):
        return f"{type(model).__name__}.forward takes no cache"
    if any(spec.cross for _, _, spec in found):
        return "a cross-attention layer"
    return None


def _not_text(model) -> str:
    """Why a model has no text inputs of its own (:func:`text_inputs` is None): its main input
    is another (pixel_values, input_features), or its forward takes no ``input_ids``."""
    main = getattr(model, "main_input_name", None)
    if main != "input_ids":
        return f"not a text model (its main input: {main})"
    return f"{type(model).__name__}.forward takes no input_ids (a tower alone)"


def continues_from_cache(model, inputs) -> str | None:
    """None if the model runs the prompt of ``inputs`` with ``use_cache=True`` and then the
    next :data:`CACHED_NEW` tokens on the cache it returned (a copy, before any diff), else why
    not: what it returned in place of a cache (:func:`_no_cache_returned`), or the exception."""
    import copy

    import torch

    from attention_np.interop.transformers.recent import float64_experts
    prompt, rest = split_prompt(inputs)
    try:
        work = copy.deepcopy(model)
        float64_experts(work)
        with torch.no_grad():
            out = work(**prompt, use_cache=True)
            cache = getattr(out, "past_key_values", None)
            if cache is None:
                return _no_cache_returned(model, out)
            takes = inspect.signature(work.forward).parameters
            work(**rest, use_cache=True,
                 **{"cache" if "cache" in takes else "past_key_values": cache})
    except Exception as e:                                         # noqa: BLE001
        return f"the model does not run continuing from its cache ({type(e).__name__})"
    return None


def _no_cache_returned(model, out) -> str:
    """Why a prompt run with ``use_cache=True`` returned no cache: its output has no cache
    field (``cache`` or ``past_key_values``: RecurrentGemma's and XLM's
    BaseModelOutput), or it is an encoder by its config
    (``is_decoder=False``, read by its modeling code: BERT, RoBERTa), or neither, said so."""
    import dataclasses
    name, kind = type(model).__name__, type(out).__name__
    fields = {f.name for f in dataclasses.fields(out)} if dataclasses.is_dataclass(out) else set()
    if not fields & {"cache", "past_key_values"}:
        return f"{name}'s output ({kind}) has no cache field: it returns no cache to continue from"
    source = inspect.getsource(inspect.getmodule(type(model)))
    if getattr(model.config, "is_decoder", None) is False and "config.is_decoder" in source:
        return f"an encoder ({type(model.config).__name__}.is_decoder=False): {name} returned no " \
               "cache for the prompt (use_cache=True)"
    return f"{name} returned no cache for the prompt (use_cache=True)"


def _cache_refusal(model) -> str | None:
    """The refusal of an encoder-decoder's cache (an ``EncoderDecoderCache``, which
    :func:`~attention_np.interop.transformers.cache_replay.check_cache` refuses by name:
    :func:`~attention_np.interop.transformers.model_diff.compare_transformers_model` would),
    or None for any other model or one whose forward takes no cache."""
    params = inspect.signature(model.forward).parameters
    if not getattr(model.config, "is_encoder_decoder", False) or \
            not any(n in params for n in ("cache", "past_key_values")):
        return None
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    from attention_np.interop.transformers.cache_replay import check_cache
    from attention_np.interop.transformers.layer_reading import UnsupportedLayer
    try:
        check_cache(EncoderDecoderCache(DynamicCache(), DynamicCache()))
    except UnsupportedLayer as e:
        return f"the cache of an encoder-decoder: {e}"
    return None


def split_prompt(inputs: dict) -> tuple:
    """``(prompt, inputs)``: the first ``L - CACHED_NEW`` tokens as the prompt, the last
    :data:`CACHED_NEW` continuing from its cache (the mask of all ``L``)."""
    prompt = {k: v[:, :-CACHED_NEW] for k, v in inputs.items()}
    rest = {k: (v if k == "attention_mask" else v[:, -CACHED_NEW:]) for k, v in inputs.items()}
    return prompt, rest


def diff_model(model, inputs, found, cached: bool = False) -> tuple:
    """One whole-model diff with :data:`CHANGE` added to the first attention layer's output
    that runs: every layer is replayed on its recorded inputs, so that layer alone may
    disagree, and only by the change (one run shows both the agreement and the change
    caught). The layers the input never runs (a vision or audio tower, given text) are diffed
    one by one (:func:`diff_layers`): an AGREE covers only what was compared. With
    ``cached``: the prompt, then :data:`CACHED_NEW` tokens continuing from its cache
    (``prompt=``): every call of the changed layer must differ by the change alone, and every
    cached keys and values row agree."""
    first = found[0]
    prompt = None
    if cached:
        prompt, inputs = split_prompt(inputs)
    report = _run_changed(model, inputs, first[1], prompt)
    if cached and _no_cached_mode(report):
        why = next((w for n, w in report.refused if n == "forward"),
                   "its layers' second calls continued from no cache")
        return "skipped", float("nan"), f"no cached mode: {why}"
    not_run = {n for n, _ in report.not_run}
    if first[0] in not_run:
        ran = [f for f in found if f[0] not in not_run]
        if not ran:                                    # nothing ran: each class alone
            return diff_layers(found)
        first = ran[0]
        report = _run_changed(model, inputs, first[1], prompt)
    verdict, err, why = _verdict_or_refusal(report, found, first[0], cached)
    if verdict != "AGREE" or not not_run:
        return verdict, err, why
    verdict, layer_err, layers_why = diff_layers([f for f in found if f[0] in not_run])
    return verdict, np.nanmax([err, layer_err]), f"{why}; not run by text input ids, " \
                                                 f"{layers_why}"


def _verdict_or_refusal(report, found, name: str, cached: bool) -> tuple:
    """:func:`_changed_verdict`, or ``"refused"`` with the refusals: when nothing disagrees
    (the change's layer among the refused), or when a call was refused in the run, which
    leaves it not compared (never an AGREE: LFM2-MoE's cached calls, its hybrid cache's
    LinearAttentionLayer)."""
    if report.refused and not [r for r in report.layers if not r.ok]:
        return "refused", float("nan"), "; ".join(f"{n}: {w}" for n, w in report.refused[:2])
    verdict, err, why = _changed_verdict(report, name, cached)
    called = {n for n, _, _ in found} | {"forward"}
    calls_refused = [(n, w) for n, w in report.refused if n.split("#")[0] in called]
    if calls_refused and verdict == "AGREE":
        return "refused", float("nan"), "; ".join(f"{n}: {w}" for n, w in calls_refused[:2])
    return verdict, err, why


def _no_cached_mode(report) -> bool:
    """Whether a cached run did not continue from a cache: its forward refused, or no layer's
    cached keys and values compared (and nothing refused)."""
    return any(n == "forward" for n, _ in report.refused) or (
        not report.refused and not any(r.kind == "cache" for r in report.layers))


def _failed(row) -> str:
    return f"{row.name}: " + ", ".join(f"{c.name} {c.err:.1e}" for c in row.checks if not c.ok)[:200]


def _changed_verdict(report, name: str, cached: bool) -> tuple:
    """``(verdict, error, why)`` of a whole-model run with :data:`CHANGE` on the layer ``name``:
    every other layer agrees, and each call of that one differs by the change alone."""
    rows = report.attention
    changed = [r for r in rows if r.name.split("#")[0] == name]
    others = [r for r in report.layers if r not in changed]
    err = max((r.forward_error for r in others if r.kind == "attention"), default=float("nan"))
    bad = next((r for r in others if not r.ok), None)
    if bad is not None:
        return "MISMATCH", err, _failed(bad)
    off = next((r for r in changed if not r.ok and not _only_the_change(r.checks)), None)
    if off is not None:                # off by more than the change: a MISMATCH of its own
        return "MISMATCH", err, _failed(off)
    if not changed or not all(_only_the_change(r.checks) for r in changed):
        return "not caught", err, f"+{CHANGE:g} on {name}: {report.verdict}"
    if not cached:
        return "AGREE", err, f"{len(rows)} layer calls (whole model); +{CHANGE:g} caught at {changed[0].name}"
    return "AGREE", err, f"{len(rows)} layer calls (prompt, then {CACHED_NEW} tokens on its cache), " \
                         f"{sum(r.kind == 'cache' for r in report.layers)} cache rows; +{CHANGE:g} caught " \
                         f"at {', '.join(r.name for r in changed)}"


def diff_layers(found) -> tuple:
    """Each attention class's first layer alone, with :data:`CHANGE` added to its output."""
    from attention_np.interop.transformers.layer_diff import compare_transformers_attention
    from attention_np.interop.transformers.layer_reading import (
        GridTable,
        T5Buckets,
        UnsupportedLayer,
        params_from_transformers,
    )
    from attention_np.interop.transformers.recent import EAGER_FLOAT64
    seen, names, errs = set(), [], []
    for name, module, spec in found:
        if type(module) in seen:
            continue
        seen.add(type(module))
        params = params_from_transformers(module)[0]
        d_model, d_kv = params["W_q"].shape[0], params["W_k"].shape[0]    # (Dia: encoder width)
        x = np.random.default_rng(1).standard_normal((B, L, d_model))
        kv = np.random.default_rng(2).standard_normal((B, L + 1, d_kv)) if spec.cross else None
        bias = spec.relative_bias
        if isinstance(bias, GridTable):          # its table's grid (and class token), or window
            x = np.random.default_rng(1).standard_normal((B, bias.height * bias.width + bias.cls,
                                                          d_model))
        handle = _change(module)
        try:
            # sdpa drops the sinks; eager's softmax is float32 (the soft-cap: ours in float64)
            own = getattr(getattr(module, "config", None), "_attn_implementation", None)
            interface = "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(type(module).forward)
            impl = "eager" if spec.sinks else EAGER_FLOAT64 if spec.attention.softcap is not None \
                or (own == "eager" and interface and not isinstance(bias, T5Buckets)) else None
            # (T5's bias goes to the interface as position_bias, which the float64 eager leaves out)
            r = compare_transformers_attention(module, x, key_value_states=kv,
                                               attn_implementation=impl)
        except UnsupportedLayer as e:
            return "refused", float("nan"), f"{name}: {e}"
        finally:
            handle.remove()
        if not _only_the_change(r.checks):
            bad = ", ".join(f"{c.name} {c.err:.1e}" for c in r.checks if not c.ok)
            return ("not caught" if r.ok else "MISMATCH"), float("nan"), f"{name}: {bad}"[:200]
        names.append(type(module).__name__)
        errs.append(max(c.err for c in r.checks if c.name != "out"))     # the gradients
    return "AGREE", max(errs), f"{len(names)} layer kind(s) one by one " \
                                  f"({', '.join(names)}); +{CHANGE:g} caught in each"


def sweep_one(model_type: str, seed: int = 0, cached: bool = False) -> SweepRow:
    """Build and diff one family; every failure becomes the row's verdict, none escapes.

    ``cached``: a decoder (:func:`decoder`) continuing from a filled cache (:func:`diff_model`);
    any other model is ``"skipped"``, the reason said."""
    from attention_np.interop.transformers.model_diff import attention_layers
    quiet = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(quiet):
        warnings.simplefilter("ignore")
        try:
            model = build(model_type, seed)
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, "-", "skipped", reason=f"tiny model not built: "
                                                               f"{one_line(e)}")
        cls = type(model).__name__
        try:
            found, refused = attention_layers(model)
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, cls, "error", reason=f"reading the layers: "
                                                             f"{one_line(e)}")
        if not found and not refused:
            return SweepRow(model_type, cls, "no attention")
        if refused and not found:
            n, why = refused[0]
            return SweepRow(model_type, cls, "refused", reason=f"{n}: {why}")
        try:
            verdict, err, why = _diff_built(model, found, cached)
            if verdict == "AGREE" and refused:
                verdict, why = "refused", f"{refused[0][0]}: {refused[0][1]}"
        except Exception as e:                                     # noqa: BLE001
            return SweepRow(model_type, cls, "error", reason=one_line(e))
    return SweepRow(model_type, cls, verdict, err, why)


def _diff_built(model, found, cached: bool) -> tuple:
    """``(verdict, error, why)`` of a built model: a text model run on input ids whole
    (:func:`diff_model`; ``cached``: a decoder continuing from its cache, else skipped), any
    other one layer by layer (:func:`diff_layers`)."""
    inputs = text_inputs(model)
    own = None if inputs is None else why_not_run(model, inputs)
    if cached:
        refusal = _cache_refusal(model)
        if refusal:
            return "refused", float("nan"), refusal
        why_not = _no_cache_run(model, inputs, own, found)
        if why_not:
            return "skipped", float("nan"), f"no cached mode: {why_not}"
        return diff_model(model, inputs, found, cached=True)
    if inputs is not None and own is None:
        return diff_model(model, inputs, found)
    verdict, err, why = diff_layers(found)
    if own is not None:
        why = f"the model does not run on input ids alone ({own}): {why}"
    return verdict, err, why


def _no_cache_run(model, inputs, own, found) -> str | None:
    """Why the model has no cached mode (not a text model, not a decoder, or it does not run
    continuing from its cache: each said as it is), or None."""
    if inputs is None:
        return _not_text(model)
    if own:
        return f"the model does not run on input ids alone ({own})"
    return decoder(model, found) or continues_from_cache(model, inputs)


def model_types() -> list:
    """Every ``model_type`` of transformers' ``AutoModel`` mapping, sorted."""
    import_optional("transformers", "attention_np.interop.transformers.sweep")
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    return sorted(MODEL_MAPPING_NAMES)


def worker_init() -> None:
    """A sweep worker: one torch thread (the workers share the cores), transformers quiet."""
    import torch
    import transformers
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


def sweep(types=None, seed: int = 0, workers: int | None = None, cached: bool = False) -> list:
    """:func:`sweep_one` for each of ``types`` (default: :func:`model_types`), in order
    (``cached``: each decoder continuing from a filled cache).

    ``workers`` processes (default: one per core, ``os.cpu_count()``) each diff one family at a
    time with one torch thread; ``workers=1`` runs them here, one after another. The rows do
    not depend on it: each family is built from its seed in whichever process runs it."""
    import os
    types = model_types() if types is None else list(types)
    workers = os.cpu_count() or 1 if workers is None else workers
    if workers <= 1 or len(types) <= 1:
        worker_init()
        return [sweep_one(t, seed, cached) for t in types]
    import concurrent.futures
    import functools
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=worker_init) as pool:
        return list(pool.map(functools.partial(sweep_one, seed=seed, cached=cached), types,
                             chunksize=1))


VERDICTS = ("AGREE", "refused", "skipped", "no attention", "MISMATCH", "not caught", "error")


def counts(rows) -> dict:
    """How many rows have each verdict (every key of :data:`VERDICTS`)."""
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def counts_line(rows, cached: bool = False) -> str:
    """The sentence the README carries (tests/interop/test_transformers_sweep.py keeps them
    equal); ``cached``: that of the cached mode's table (docs/transformers_sweep_cached.md)."""
    c = counts(rows)
    if cached:
        return (f"{len(rows)} model classes continuing from a filled cache: {c['AGREE']} agree "
                f"(a 1e-6 change caught at the prompt's call and the cached tokens' call), "
                f"{c['refused']} refused by name, {c['MISMATCH']} mismatch, {c['not caught']} "
                f"change not caught, {c['error']} errors, {c['skipped']} skipped (no tiny model, "
                f"or no cached mode: the reason said), {c['no attention']} without an attention "
                "layer")
    return (f"{len(rows)} model classes: {c['AGREE']} agree (a 1e-6 change caught in each), "
            f"{c['refused']} refused by name, {c['MISMATCH']} mismatch, {c['not caught']} "
            f"change not caught, {c['error']} errors, {c['skipped']} skipped (no tiny model), "
            f"{c['no attention']} without an attention layer")


def _header(version: str) -> list:
    """docs/transformers_sweep.md's title and what its table is."""
    return [
        "# Every transformers model class, diffed",
        "",
        f"Generated by `python -m attention_np.interop.transformers.sweep docs/transformers_sweep.md`"
        f" with transformers {version}; `tests/interop/test_transformers_sweep.py` runs the sweep again "
        "and holds this table (family, model, verdict, reason) and the README's counts to it.",
        "A tiny random model of each `model_type` of transformers' `AutoModel` mapping "
        "(widths 32, 4 heads, 2 layers or one of each kind of layer, vocabulary 99, under 5M "
        "parameters; no download) is diffed in float64 with "
        "1e-6 added to its first attention layer's output on the torch side: AGREE means every "
        "other row agrees and that layer differs by exactly the change (a text model whole, with "
        "`compare_transformers_model`, and the layers its input ids never run, a vision or audio "
        "tower, one layer of each attention class; any other model, or a text model that does "
        "not run on input ids alone, one layer of each attention class, with "
        "`compare_transformers_attention`: the row says which). An AGREE covers only layers "
        "that ran and were compared. MISMATCH, `not caught` and `error` are open bugs "
        "of attention_np's reader, listed as they are. max error: the largest output error of "
        "the unchanged layers (whole model) or the largest gradient error (layer by layer). "
        "The sweep runs one worker process per core (`sweep(workers=...)`). The same models "
        "continuing from a filled cache: [transformers_sweep_cached.md](transformers_sweep_cached.md). "
        "Each attention option of a family's config set to the values users give it: "
        "[the variant sweep](transformers_variants.md).",
    ]


def _cached_header(version: str) -> list:
    """docs/transformers_sweep_cached.md's title and what its table is."""
    return [
        "# Every transformers model class, continuing from a filled cache",
        "",
        "Generated by `python -m attention_np.interop.transformers.sweep --cached "
        f"docs/transformers_sweep_cached.md` with transformers {version}; "
        "`tests/interop/test_transformers_sweep.py` runs the cached sweep again "
        "(`sweep(cached=True)`) and holds this table (family, model, verdict, reason) and the "
        "README's counts to it.",
        "The tiny model of each `model_type` of [the default sweep](transformers_sweep.md), a "
        f"decoder run as `generate()` runs it: the first {L - CACHED_NEW} of {L} tokens as a "
        f"prompt with `use_cache=True`, then the last {CACHED_NEW} on the cache it filled "
        "(`compare_transformers_model(model, prompt=..., **rest)`), 1e-6 added to its first "
        "attention layer's output: AGREE means every cached keys and values row (the model's "
        "cache against ours recomputed from the prompt's call) and every other layer call agree, "
        "and both calls of the changed layer differ by exactly the change (the layers text input "
        "ids never run, one layer of each attention class, as in the default sweep). refused: the "
        "feature or the cache kind named (an encoder-decoder's EncoderDecoderCache, a layer "
        "refused in the default sweep too). skipped: no tiny model, or no cached mode, the reason "
        "said (not a text model, an encoder, a forward that takes no cache, an output with no "
        "cache). MISMATCH, `not caught` and `error` are open bugs, listed as they are. max "
        "error: the largest output error of the unchanged layers' calls (with a tower diffed "
        "layer by layer, its gradients' too).",
    ]


def markdown(rows, version: str, cached: bool = False) -> str:
    """docs/transformers_sweep.md (``cached``: docs/transformers_sweep_cached.md): the counts
    and one table row per model class."""
    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")
    lines = (_cached_header if cached else _header)(version) + [
        "",
        f"**{counts_line(rows, cached)}.**",
        "",
        "| family | model | verdict | max error | reason or layers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        err = "" if np.isnan(r.max_error) else f"{r.max_error:.0e}"
        lines.append(f"| {cell(r.family)} | {cell(r.model)} | {r.verdict} | {err} | "
                     f"{cell(r.reason)} |")
    return "\n".join(lines) + "\n"


def table_cells(text: str, headers: tuple = ("| family",)) -> list:
    """The cells of each row of the markdown tables in ``text`` (``|`` inside a cell unescaped),
    leaving out the header rows (those starting with one of ``headers``) and the rules."""
    return [[c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")]
            for line in text.splitlines()
            if line.startswith("| ") and not line.startswith((*headers, "| ---"))]


def read_table(text: str) -> list:
    """``[(family, model, verdict, reason)]`` from :func:`markdown`'s table."""
    return [(c[0], c[1], c[2], c[4] if len(c) > 4 else "") for c in table_cells(text)]


if __name__ == "__main__":          # python -m attention_np.interop.transformers.sweep [--cached] OUT.md
    import sys

    import transformers
    cached = "--cached" in sys.argv[1:]
    out = [a for a in sys.argv[1:] if a != "--cached"][0]
    result = sweep(cached=cached)
    with open(out, "w") as f:
        f.write(markdown(result, transformers.__version__, cached))
    print(counts_line(result, cached))
