"""The transformers sweep again on configs as users have them: each attention option a family's
config class declares, set to the values its users set (docs/transformers_variants.md is this
module's table).

The default sweep (:mod:`~attention_np.interop.transformers.sweep`) builds one tiny config per
family, transformers' defaults shrunk. Here the options are read off each config class (its
``__init__`` signature and the attributes of its tiny config) and each is mapped by its *kind*
(:data:`KINDS`) to the values of that kind (:func:`variants`): RoPE types with their parameters
(every ``rope_type`` transformers' ``ROPE_INIT_FUNCTIONS`` has, with the parameters
``RopeParameters``' own docstring says it uses), partial rotary, windows and layer types,
key/value heads (MHA, GQA, MQA), a head width apart from ``hidden / heads``, biases, soft-caps,
QK-norm flags, score scales and multipliers. No list of cases: a family that declares an option
gets its variants, one that does not, none.

Each variant is built as the default sweep builds a family (its tiny config with the option
set, weights redrawn from N(0, 0.3^2)) and diffed three ways, each with ``1e-6`` added to the
first attention layer's output on the torch side (the change must be caught and named): the
first layer of each attention class alone (``compare_transformers_attention``), the model whole
(``compare_transformers_model``) and, for a decoder, the model continuing from a filled cache
(the prompt, then 2 tokens on its cache). A variant the library cannot do must be refused by
the feature's name.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from attention_np._optional import import_optional
from attention_np.interop.transformers import sweep as sw
from attention_np.interop.transformers import tiny_models as tm

WINDOW = 3            # a sliding window shorter than the sweep's 6 tokens (and its 4-token prompt)
ORIGINAL = 4          # a RoPE scaling's original context: the 6 tokens go past it
# the families CI sweeps (one of each kind of position, projection and attention the readers
# take; each declares options of several kinds): :func:`variants` generates the rest
FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma", "gemma2",
    "gemma3_text", "phi", "phi3", "gpt_neox", "gptj", "gpt2", "gpt_bigcode", "falcon", "cohere",
    "cohere2", "olmo", "olmo2", "granite", "stablelm", "starcoder2", "smollm3", "persimmon",
    "gpt_oss", "helium", "glm", "nemotron", "mpt", "bloom", "gpt_neo", "modernbert", "exaone4",
    "ministral", "seed_oss", "arcee",
)

# option kinds: a name pattern of the config's attributes (full match), the kind's label
KINDS = {
    "rope type": r"rope_parameters|rope_scaling",
    "partial rotary": r"partial_rotary_factor|rotary_dim|rotary_pct|rotary_emb_fraction",
    "window": r"sliding_window|use_sliding_window|max_window_layers|layer_types|"
              r"sliding_window_pattern|window_size|attention_window|local_attention",
    "key/value heads": r"num_key_value_heads|num_kv_heads|n_head_kv|multi_query|"
                       r"num_key_value_attention_heads|new_decoder_architecture",
    "head width": r"head_dim|attention_head_dim|kv_channels",
    "bias": r"(use_|add_)?(attention_|attn_|qkv_|query_|key_|value_|proj_|o_)?bias|"
            r"use_qkv_bias|bias_attn",
    "soft-cap": r"(attn_logit|final_logit|attention_logit|logit)_softcapping",
    "QK-norm": r"use_qk_norm|qk_layernorm|qk_norm|use_qk_layernorm|normalize_qk|qk_ln",
    "scale": r"query_pre_attn_scalar|attention_multiplier|scale_attn_weights|"
             r"scale_attn_by_inverse_layer_idx|reorder_and_upcast_attn|attn_scale|"
             r"attention_scale|qk_scale_factor|softmax_scale|scale_qk|clip_qkv|alibi",
}
FALSE = ("MISMATCH", "not caught", "error")


def declared(cfg) -> dict:
    """``{option: value}``: the attention options of ``cfg`` (a tiny config), each a name of
    its class's ``__init__`` signature or an attribute of the config, or a key of a dict the
    config holds (``rope_parameters.partial_rotary_factor``, MPT's ``attn_config.qk_ln``),
    whose last name matches a pattern of :data:`KINDS` (:func:`kind_of`)."""
    names = set(inspect.signature(type(cfg).__init__).parameters) | set(cfg.to_dict())
    out = {}
    for n in sorted(names):
        value = getattr(cfg, n, None)
        value = value.to_dict() if hasattr(value, "to_dict") else value    # a sub-config
        if kind_of(n) is not None:
            out[n] = value
        if isinstance(value, dict) and kind_of(n) != "rope type" or n == "rope_parameters" and \
                isinstance(value, dict) and "partial_rotary_factor" in value:
            out.update({f"{n}.{k}": v for k, v in value.items()
                        if isinstance(k, str) and kind_of(k) not in (None, "rope type")})
    return out


def kind_of(name: str) -> str | None:
    """The option kind of a config attribute's name (its last part: :data:`KINDS`), else None."""
    return next((k for k, pat in KINDS.items() if re.fullmatch(pat, name.split(".")[-1])), None)


@dataclass
class Variant:
    """One option set to one value: the family, the option kind, a label, the config changes
    (``{name: value}``, ``name`` a config attribute or ``attribute.key`` of a dict it holds)
    and the attributes to drop so that ``__init__`` derives them again (``layer_types`` from a
    window option)."""

    family: str
    kind: str
    label: str
    changes: dict
    drop: tuple = ()


def _rope_uses() -> dict:
    """``{rope_type: [parameter, ...]}``: which parameter each RoPE type uses, read from the
    docstring of transformers' ``RopeParameters`` ("Used with 'yarn' and 'longrope'", "Only
    used with 'yarn'", "Used with all rope types except 'default'"), for every type of
    ``ROPE_INIT_FUNCTIONS``."""
    from transformers import modeling_rope_utils as ru
    types = list(ru.ROPE_INIT_FUNCTIONS)
    doc = inspect.getdoc(ru.RopeParameters) or ""
    uses = {t: [] for t in types}
    for name in ru.RopeParameters.__annotations__:
        m = re.search(rf"^\s*{name} \(`[^`]*`[^)]*\):\s*\n(.*?)(?=^\s*\w+ \(`|\Z)", doc, re.M | re.S)
        text = " ".join(m[1].split()) if m else ""
        said = re.match(r"(Only used|Used) with ([^.]*)\.", text)
        if not said:
            continue
        named = re.findall(r"'(\w+)'", said[2])
        for t in types:
            if ("all rope types except" in said[2] and t not in named) or (
                    "all rope types except" not in said[2] and t in named):
                uses[t].append(name)
    return uses


def _rope_value(name: str, r: int):
    """A value of a RoPE parameter that bites on the sweep's 6 tokens (``r``: the rotated
    width): the context scaled 4 times from :data:`ORIGINAL` positions, factors per frequency
    drawn in [1, 4)."""
    per_freq = [round(float(v), 3) for v in 1 + 3 * np.random.default_rng(7).random(r // 2)]
    return {"factor": 4.0, "original_max_position_embeddings": ORIGINAL, "attention_factor": 0.8,
            "beta_fast": 8.0, "beta_slow": 2.0, "short_factor": per_freq[::-1],
            "long_factor": per_freq, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
            "mscale": 0.7, "mscale_all_dim": 0.5, "truncate": False}.get(name)


def _rope_variants(family: str, cfg, name: str) -> list:
    """Each RoPE type of ``ROPE_INIT_FUNCTIONS`` (:func:`_rope_type_variants`), on the config's
    plain RoPE (``rope_type`` default; multimodal RoPE and a family's own type have their own
    sweep); on a per-layer-type dict (Gemma 3's), set on each layer type's."""
    base = getattr(cfg, name, None)
    if not isinstance(base, dict):
        return []
    nested = all(isinstance(v, dict) for v in base.values())
    one = next(iter(base.values())) if nested else base
    if "mrope_section" in one or one.get("rope_type", "default") not in ("default", None):
        return []
    r = int(_head_dim(cfg) * one.get("partial_rotary_factor", 1.0))
    out = []
    for rope_type, params in _rope_uses().items():
        for p in _rope_type_variants(cfg, rope_type, params, one, r):
            change = {k: {**v, **p} for k, v in base.items()} if nested else {**base, **p}
            label = ", ".join(f"{k}={v}" if not isinstance(v, list) else f"{k}=[{len(v)} values]"
                              for k, v in p.items())
            out.append(Variant(family, "rope type", f"{name}: {label}", {name: change}))
    return out


def _rope_type_variants(cfg, rope_type: str, params: list, one: dict, r: int) -> list:
    """The parameter dicts of one RoPE type: the parameters it requires (the ones whose absence
    transformers' validator refuses), then with each optional one added (``mscale`` with
    ``mscale_all_dim``: YaRN reads them together); ``"proportional"`` with a partial rotary
    factor of 0.5 as one of them, where the config has none."""
    if rope_type == "proportional" and "partial_rotary_factor" not in one:
        params = params + ["partial_rotary_factor"]
    full = {p: _rope_value(p, r) if p != "partial_rotary_factor" else 0.5 for p in params}
    full = {p: v for p, v in full.items() if v is not None}
    need = [p for p in full if _required(cfg, rope_type, {**one, **full}, p)]
    extra = [p for p in full if p not in need and p != "mscale_all_dim"]
    out = []
    for add in [None, *extra]:
        keys = need + ([add] if add else []) + (["mscale_all_dim"] if add == "mscale" else [])
        out.append({"rope_type": rope_type, **{p: full[p] for p in keys}})
    return out


def _required(cfg, rope_type: str, params: dict, name: str) -> bool:
    """Whether transformers' validator of ``rope_type`` refuses ``params`` without ``name``."""
    check = getattr(cfg, f"_validate_{rope_type}_rope_parameters", None)
    if check is None:
        return True
    try:
        check({k: v for k, v in {**params, "rope_type": rope_type}.items() if k != name})
    except KeyError:
        return True
    except Exception:                                              # noqa: BLE001
        return False
    return False


def _head_dim(cfg) -> int:
    h = getattr(cfg, "head_dim", None)
    return h if tm.is_config_int(h) else tm.SMALL["hidden_size"] // tm.SMALL["num_attention_heads"]


def _partial_variants(family: str, cfg, name: str, value, opts: dict) -> list:
    """A quarter, half and all of each head rotated (the values other than the config's):
    ``rotary_dim`` in features, a fraction otherwise; a top-level ``partial_rotary_factor``
    left to the ``rope_parameters`` one where the config holds that (its home)."""
    d = _head_dim(cfg)
    if name == "partial_rotary_factor" and "rope_parameters.partial_rotary_factor" in opts:
        return []
    fractions = (0.25, 0.5, 1.0)
    values = [int(d * f) for f in fractions] if name.endswith("rotary_dim") else list(fractions)
    return [Variant(family, "partial rotary", f"{name}={v}", {name: v}) for v in values
            if v != value]


def _window_variants(family: str, cfg, name: str, value, opts: dict) -> list:
    """A window of :data:`WINDOW` on the layers it applies to: ``sliding_window`` itself (with
    ``use_sliding_window`` on, where declared); the switches (``use_sliding_window``,
    ``max_window_layers``: the window set with them, ``layer_types`` derived again);
    ``layer_types``: :func:`_layer_types_variants`, with the switch as it is (where the config
    keeps the window then: :func:`_keeps`) and on."""
    window = {"sliding_window": WINDOW} if "sliding_window" in opts and name != "sliding_window" \
        else {}
    switch = {"use_sliding_window": True} if "use_sliding_window" in opts else {}
    derive = ("layer_types",) if "layer_types" in opts else ()
    if name in ("sliding_window", "window_size", "attention_window", "local_attention") and \
            (tm.is_config_int(value) or value is None):
        return [_variant(family, "window", {name: WINDOW, **switch})]   # (Qwen2: off unless on)
    if name == "use_sliding_window":
        first = {"max_window_layers": 0} if "max_window_layers" in opts else {}
        return [_variant(family, "window", {name: not value, **window, **first}, derive)]
    if name == "max_window_layers":
        return [_variant(family, "window", {name: 1, **window, **switch}, derive)]
    if name == "layer_types" and isinstance(value, list) and value:
        return _layer_types_variants(family, value, opts, window, switch)
    return []


def _keeps(family: str, changes: dict) -> bool:
    """Whether the family's config class keeps ``changes`` as given when its switch
    ``use_sliding_window`` is off (Qwen2's sets ``sliding_window`` to None then)."""
    cfg = variant_config(Variant(family, "window", "", changes))
    return all(getattr(cfg, k, None) == v for k, v in changes.items())


def _layer_types_variants(family: str, value: list, opts: dict, window: dict,
                          switch: dict) -> list:
    """``layer_types`` as every layer of one type, and the two alternations of the first two
    (each of the family's own attention types, and the sliding/full pair where the config has
    a window), those other than ``value``; each with the window, the switch as it is (where
    the config keeps the window then: :func:`_keeps`) and on."""
    kinds = list(dict.fromkeys(value))
    if "sliding_window" in opts:
        kinds += [k for k in ("sliding_attention", "full_attention") if k not in kinds]
    kinds = [k for k in kinds if k in _attention_layer_types()]
    n = len(value)
    lists = [[k] * n for k in kinds] + [[kinds[(i + j) % 2] for i in range(n)]
                                        for j in range(2) if len(kinds) >= 2]
    ons = [{}] + ([switch] if switch and opts.get("use_sliding_window") is not True else [])
    if switch and not _keeps(family, window):
        ons = [switch]
    return [_variant(family, "window", {"layer_types": v, **window, **on})
            for v in lists if v != value for on in ons]


def _variant(family: str, kind: str, changes: dict, drop: tuple = ()) -> Variant:
    """A :class:`Variant` labelled by its changes."""
    return Variant(family, kind, ", ".join(f"{k}={v}" for k, v in changes.items()), changes, drop)


def _attention_layer_types() -> tuple:
    from transformers import configuration_utils as cu
    return getattr(cu, "ALLOWED_ATTN_LAYER_TYPES", ("full_attention", "sliding_attention"))


def _kv_variants(family: str, cfg, name: str, value) -> list:
    """Key/value heads: one (MQA), a divisor (GQA) and as many as query heads (MHA), the
    counts other than the config's; a flag (``multi_query``, Falcon's
    ``new_decoder_architecture``) flipped."""
    if isinstance(value, bool):
        return [Variant(family, "key/value heads", f"{name}={not value}", {name: not value})]
    heads = next((getattr(cfg, n) for n in tm.HEADS if tm.is_config_int(getattr(cfg, n, None))), None)
    if heads is None or not (tm.is_config_int(value) or value is None):
        return []
    counts = sorted({1, heads} | {k for k in range(2, heads) if heads % k == 0})
    return [Variant(family, "key/value heads", f"{name}={k}", {name: k}) for k in counts
            if k != value]


def _flag_or_number(family: str, kind: str, name: str, value, number) -> list:
    """A flag flipped; a number set to ``number`` (and None, off, where it is on)."""
    if isinstance(value, bool):
        return [Variant(family, kind, f"{name}={not value}", {name: not value})]
    values = [number] + ([None] if value is not None and kind == "soft-cap" else [])
    return [Variant(family, kind, f"{name}={v}", {name: v}) for v in values if v != value]


def _one_value(family: str, cfg, name: str, value, opts: dict) -> list:
    """A head width twice hidden / heads; a bias or QK-norm flag flipped."""
    kind = kind_of(name)
    if kind == "head width" and (tm.is_config_int(value) or value is None):
        return [Variant(family, kind, f"{name}={2 * _head_dim(cfg)}", {name: 2 * _head_dim(cfg)})]
    if isinstance(value, bool):
        return [Variant(family, kind, f"{name}={not value}", {name: not value})]
    return []


def _cap_or_scale(family: str, cfg, name: str, value, opts: dict) -> list:
    """A soft-cap of 2 (and none where there is one); a scale's flag flipped, its number set:
    ``query_pre_attn_scalar`` twice the head width, ``clip_qkv`` 0.5, a multiplier 0.5."""
    kind = kind_of(name)
    if not (value is None or isinstance(value, (bool, int, float))):
        return []
    number = {"query_pre_attn_scalar": 2 * _head_dim(cfg)}.get(name, 2.0 if kind == "soft-cap"
                                                                 else 0.5)
    return _flag_or_number(family, kind, name, value, number)


# each option kind's generator: (family, tiny config, option, its value, every option) -> variants
GENERATORS = {
    "rope type": lambda family, cfg, name, value, opts: _rope_variants(family, cfg, name),
    "partial rotary": _partial_variants,
    "window": _window_variants,
    "key/value heads": lambda family, cfg, name, value, opts: _kv_variants(family, cfg, name,
                                                                           value),
    "head width": _one_value, "bias": _one_value, "QK-norm": _one_value,
    "soft-cap": _cap_or_scale, "scale": _cap_or_scale,
}


def variants(family: str, cfg=None) -> list:
    """Every variant of ``family``: each option :func:`declared` set to the values of its kind
    (:data:`GENERATORS`)."""
    cfg = tm.tiny_config(family) if cfg is None else cfg
    opts = declared(cfg)
    return [v for name, value in opts.items()
            for v in GENERATORS[kind_of(name)](family, cfg, name, value, opts)]


def variant_config(v: Variant):
    """The tiny config of ``v.family`` with ``v.changes`` set (built again from its dict)."""
    cfg = tm.tiny_config(v.family)
    small = {k: x for k, x in cfg.to_dict().items() if k not in v.drop}
    for name, value in v.changes.items():
        top, _, key = name.partition(".")
        small[top] = {**small[top], key: value} if key else value
    small.pop("transformers_version", None)
    return type(cfg).from_dict(small)


def build_variant(v: Variant, seed: int = 0):
    """A tiny random model of the variant (as :func:`~attention_np.interop.transformers.sweep.
    build`: weights from N(0, 0.3^2), eval mode), and the config it was built from."""
    tf = import_optional("transformers", "attention_np.interop.transformers.variant_sweep")
    torch = import_optional("torch", "attention_np.interop.transformers.variant_sweep")
    cfg = variant_config(v)
    model = tf.AutoModel.from_config(cfg)
    if sum(p.numel() for p in model.parameters()) > tm.CAP:
        raise ValueError(f"the variant has over {tm.CAP} parameters")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model.eval()


@dataclass
class VariantRow:
    """One variant's verdicts: the layer alone, the model whole, the model on a filled cache
    (each a verdict of the default sweep's, or ``"-"`` not run), and their reasons."""

    family: str
    kind: str
    label: str
    layer: str = "-"
    model: str = "-"
    cached: str = "-"
    max_error: float = float("nan")
    reasons: dict = field(default_factory=dict)

    @property
    def verdicts(self) -> tuple:
        return self.layer, self.model, self.cached

    @property
    def false_verdict(self) -> bool:
        return any(v in FALSE for v in self.verdicts)

    @property
    def verdict(self) -> str:
        """The row's one word: a false verdict if any, else refused if any diff refused, else
        AGREE if any agreed, else skipped."""
        for v in (*FALSE, "refused", "AGREE"):
            if v in self.verdicts:
                return v
        return "skipped"

    @property
    def reason(self) -> str:
        return "; ".join(f"{k}: {w}" for k, w in self.reasons.items())

    @property
    def short_reason(self) -> str:
        """The table's reason: what each diff that did not agree said (a refusal word for
        word), or, all agreeing, the layers the change was caught at."""
        said = {k: w for k, w in self.reasons.items() if k != "model" or self.model != "AGREE"}
        if not said and "model" in self.reasons:
            return self.reasons["model"].split("; ")[-1]
        return "; ".join(f"{k}: {w}" for k, w in said.items())


def _diff(row: VariantRow, which: str, run) -> None:
    """Run one of the three diffs into ``row``; an exception becomes its ``"error"``."""
    try:
        verdict, err, why = run()
    except Exception as e:                                         # noqa: BLE001
        verdict, err, why = "error", float("nan"), tm.one_line(e)
    setattr(row, which, verdict)
    row.max_error = float(np.nanmax([row.max_error, err])) if not np.isnan(err) else row.max_error
    if verdict != "AGREE" or which == "model":
        row.reasons[which] = why


def sweep_variant(v: Variant, seed: int = 0) -> VariantRow:
    """Build and diff one variant (:func:`build_variant`): the first layer of each attention
    class alone, the model whole (a text model run on input ids), and a decoder on a filled
    cache; each with the ``1e-6`` change. Every failure becomes a verdict, none escapes."""
    from attention_np.interop.transformers.model_diff import attention_layers
    row = VariantRow(v.family, v.kind, v.label)
    quiet = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(quiet), \
            contextlib.redirect_stdout(quiet):
        warnings.simplefilter("ignore")
        try:
            model = build_variant(v, seed)
        except Exception as e:                                     # noqa: BLE001
            row.reasons["build"] = f"config not built: {_sorted_sets(tm.one_line(e))}"
            return row
        try:
            found, refused = attention_layers(model)
        except Exception as e:                                     # noqa: BLE001
            row.layer, row.reasons["layer"] = "error", f"reading the layers: {tm.one_line(e)}"
            return row
        if refused:
            row.layer = row.model = "refused"
            row.reasons["layer"] = f"{refused[0][0]}: {refused[0][1]}"
            return row
        if not found:
            row.reasons["layer"] = "no attention layer"
            return row
        inputs = sw.text_inputs(model)
        own = None if inputs is None else sw.why_not_run(model, inputs)
        if own is not None:          # no user runs it: transformers' own forward raises
            row.reasons["build"] = f"transformers does not run this config ({own})"
            return row
        _diff(row, "layer", lambda: sw.diff_layers(found))
        _model_diffs(row, model, found, inputs)
    return row


def _model_diffs(row: VariantRow, model, found, inputs) -> None:
    """The whole-model diff of a text model (``inputs``: its input ids, or None) and, for a
    decoder that runs continuing from its cache, the cached one (the default sweep's
    :func:`~attention_np.interop.transformers.sweep.diff_model`)."""
    if inputs is None:
        row.reasons["model"] = "not a text model run on input ids"
        return
    _diff(row, "model", lambda: sw.diff_model(model, inputs, found))
    why_not = sw.decoder(model, found) or sw.continues_from_cache(model, inputs)
    if why_not:
        row.reasons["cached"] = f"no cached mode: {why_not}"
        return
    _diff(row, "cached", lambda: sw.diff_model(model, inputs, found, cached=True))
    if row.cached == "skipped":
        row.cached = "-"


def _sorted_sets(text: str) -> str:
    """``text`` with each set of quoted names it prints (``{'short_factor', 'long_factor'}``, in
    an order that changes with the hash seed) sorted, so that a row reads the same every run."""
    def ordered(m):
        return "{" + ", ".join(sorted(m.group(1).split(", "))) + "}"
    return re.sub(r"\{('[^{}']*'(?:, '[^{}']*')*)\}", ordered, text)


def all_variants(types=None) -> list:
    """:func:`variants` of each of ``types`` (default :data:`FAMILIES`), in order; a family whose
    tiny config does not build has none."""
    out = []
    for t in FAMILIES if types is None else types:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                out += variants(t)
            except Exception:                                      # noqa: BLE001
                continue
    return out


def variant_sweep(types=None, seed: int = 0, workers: int | None = None) -> list:
    """:func:`sweep_variant` of every one of :func:`all_variants`, in order, in ``workers``
    processes (default one per core; the default sweep's workers, one torch thread each)."""
    import os
    vs = all_variants(types)
    workers = os.cpu_count() or 1 if workers is None else workers
    if workers <= 1 or len(vs) <= 1:
        sw.worker_init()
        return [sweep_variant(v, seed) for v in vs]
    import concurrent.futures
    import functools
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=sw.worker_init) as pool:
        return list(pool.map(functools.partial(sweep_variant, seed=seed), vs, chunksize=1))


VERDICTS = ("AGREE", "refused", "skipped", *FALSE)
DIFFS = ("layer", "model", "cached")


def counts(rows) -> dict:
    """How many rows have each verdict (:attr:`VariantRow.verdict`, every key of
    :data:`VERDICTS`)."""
    return {v: sum(r.verdict == v for r in rows) for v in VERDICTS}


def counts_line(rows) -> str:
    """The sentence the docs and the README carry."""
    c = counts(rows)
    return (f"{len(rows)} variants of {len({r.family for r in rows})} families: {c['AGREE']} agree "
            f"(a 1e-6 change caught in each diff run), {c['refused']} refused by name, "
            f"{c['MISMATCH']} mismatch, {c['not caught']} change not caught, {c['error']} "
            f"errors, {c['skipped']} skipped (the config not built, or not run by transformers)")


def kinds_table(rows) -> list:
    """Markdown lines: per option kind, its variants, the families declaring it, and the
    rows of each verdict."""
    lines = ["| option kind | variants | families | " + " | ".join(VERDICTS) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in VERDICTS) + " |"]
    for kind in KINDS:
        of = [r for r in rows if r.kind == kind]
        c = counts(of)
        lines.append(f"| {kind} | {len(of)} | {len({r.family for r in of})} | "
                     + " | ".join(str(c[v]) for v in VERDICTS) + " |")
    return lines


def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(rows, version: str) -> str:
    """docs/transformers_variants.md: the counts, the counts by option kind, one row per
    variant."""
    lines = [
        "# Every attention option of a family's config, diffed",
        "",
        "Generated by `python -m attention_np.interop.transformers.variant_sweep "
        f"docs/transformers_variants.md` with transformers {version}; "
        "`tests/interop/test_transformers_variants.py` runs the variant sweep again and holds "
        "this table (family, variant, the three verdicts, a refusal's reason) to it. "
        "Beside [the default-config sweep](transformers_sweep.md): each family of "
        "`variant_sweep.FAMILIES`, its tiny config (the default sweep's) with one attention "
        "option its config class declares set to a value of the option's kind: every RoPE "
        "type of transformers' `ROPE_INIT_FUNCTIONS` with the parameters it requires, then "
        "each optional one added; a quarter, half and all of a head rotated; a window of "
        f"{WINDOW} of the 6 tokens and every arrangement of the layer types; one key/value head, "
        "a divisor of the heads, as many as the heads; a head twice hidden / heads wide; each "
        "bias and QK-norm flag flipped; soft-caps of 2 and none; score scales and multipliers "
        "changed. Each variant is diffed in float64 with 1e-6 added to its first attention "
        "layer's output on the torch side, three ways: **layer** (the first layer of each "
        "attention class alone, `compare_transformers_attention`), **model** (the model whole, "
        "`compare_transformers_model`, on input ids) and **cached** (a decoder's prompt, then 2 "
        "tokens on its cache); AGREE means every other row agrees and the changed layer differs "
        "by exactly the change; `-` a diff not run (the reason says why). "
        "MISMATCH, `not caught` and `error` are open bugs, listed as they are.",
        "",
        f"**{counts_line(rows)}.**",
        "",
        *kinds_table(rows),
        "",
        "| family | option kind | variant | layer | model | cached | reason |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {_cell(r.family)} | {r.kind} | {_cell(r.label)} | {r.layer} | {r.model} | "
                     f"{r.cached} | {_cell(r.short_reason)} |")
    return "\n".join(lines) + "\n"


def read_table(text: str) -> list:
    """``[(family, variant, layer, model, cached, reason)]`` from :func:`markdown`'s table."""
    return [(c[0], c[2], c[3], c[4], c[5], c[6])
            for c in sw.table_cells(text, ("| family", "| option kind")) if len(c) == 7]


if __name__ == "__main__":   # python -m attention_np.interop.transformers.variant_sweep OUT.md
    import sys

    import transformers
    result = variant_sweep()
    with open(sys.argv[1], "w") as f:
        f.write(markdown(result, transformers.__version__))
    print(counts_line(result))
