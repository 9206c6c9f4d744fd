"""``python -m attention_np diff --framework transformers``: one attention layer of each
transformers family, and a ``generate()`` replay of each decoder and encoder-decoder, diffed
against attention_np.

Runs :func:`~attention_np.interop.transformers.compare_transformers_attention` on the tiny random
layers of :mod:`attention_np.interop.transformers.family_cases` (float64, forward and every gradient),
:func:`~attention_np.interop.transformers.decode_diff.replay_generate` on GPT-2, Llama, Mistral,
Qwen2, Qwen3, Gemma 2, Gemma 3 and gpt-oss (plain and left-padded prompts) and on T5 and BART
(the decoder's self- and cross-attention; plain and padded sources), both again on a tiny Llama
per RoPE scaling type (rows ``rope:<type>``), and a whole tiny model of each family of
:data:`MODELS` (mode "model", :func:`~attention_np.interop.transformers.model_diff.
compare_transformers_model`; a refused one says why and is no mismatch), prints the largest
differences per family, then demonstrates
transformers' traps (:mod:`attention_np.interop.transformers.family_traps`). Exit status 1 on a
mismatch, on a trap that no longer reproduces as documented, or when torch or transformers is not
installed (said on stderr, with the pip command).

Only NumPy is imported here; torch and transformers are imported while the command runs.
"""

from __future__ import annotations

import importlib
import sys
import time

import numpy as np

from attention_np._optional import import_optional, install_hint
from attention_np.cli.progress import ProgressBar

DECODERS = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gpt_oss")
ENCODER_DECODERS = ("t5", "bart")
# RoPE scaling types (family_cases.ROPE_SCALINGS): a layer and a generate() of 4 + 7
# tokens each, past the length 8 where "dynamic" and "longrope" change their frequencies
ROPE_TYPES = ("linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
# whole models of the families read by what they compute (families.NEW), mode "model"
MODELS = ("roberta", "distilbert", "deberta-v2", "albert", "opt", "gpt_neox", "falcon", "phi",
          "phi3", "stablelm", "gemma", "cohere", "mixtral", "olmo", "granite", "smollm3",
          "whisper", "clip", "olmo2", "beit", "data2vec-vision", "swin")


def _fmt(e: float) -> str:
    return f"{e:.1e}"


def _float64_ratio(checks) -> float:
    """The worst err/tol of the float64 checks (not RoPE's float32 ``inv_freq`` check)."""
    return max(c.ratio for c in checks if c.rule == "float64")


def _layer_row(family: str, module, report) -> tuple:
    """A table row of a layer diff: its output error and its worst gradient."""
    out = next(c for c in report.checks if c.name == "out")
    worst = max((c for c in report.checks if c.name.startswith("d")), key=lambda c: c.err)
    return (family, type(module).__name__, "layer", out.err, worst.err, worst.name,
            _float64_ratio(report.checks), report.ok)


def _replay_row(family: str, mode: str, report) -> tuple:
    """A table row of a ``generate()`` replay: its worst step, and how many steps per layer."""
    worst = max(report.checks, key=lambda c: c.err)
    if len(report.layers) == 1:
        steps = f"{len(report.checks)} steps"
    else:                                                               # "4 self + 4 cross"
        steps = " + ".join(f"{sum(c.name.startswith(n) for c in report.checks)} {n}"
                           for n in report.layers)
    return (family, report.module.split(" ")[0], mode, worst.err, float("nan"), steps,
            _float64_ratio(report.checks), report.ok)


def _model_row(family: str, report) -> tuple:
    """A table row of a whole-model diff: its worst layer; ``ok`` None when a layer was refused."""
    if report.refused:
        return (family, report.refused[0][1].split(":")[0], "model", float("nan"),
                float("nan"), "refused", float("nan"), None)
    layers = report.attention                       # the rotary rows count in report.ok
    checks = [c for r in layers for c in r.checks]
    out = max(r.forward_error for r in layers)
    worst = max((c for c in checks if c.name.startswith("d")), key=lambda c: c.err)
    module = layers[0].module
    return (family, module, "model", out, worst.err, f"{worst.name} ({len(layers)} l.)",
            _float64_ratio(checks), report.ok)


def _missing(module: str) -> str | None:
    """Why ``module`` cannot be imported, or None when it can."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        return str(e) or type(e).__name__
    return None


def _too_old(module: str) -> str | None:
    """The message when an installed ``module`` is older than :data:`MINIMUM` allows, or None."""
    try:
        import_optional(module, "--framework transformers")
    except ImportError as e:
        return str(e)
    return None


def _not_ready(option: str) -> int | None:
    """Exit status 1, with the install line printed, when torch or transformers is missing or
    too old for ``option``; None when both are there."""
    missing = {f: why for f in ("torch", "transformers") if (why := _missing(f)) is not None}
    for f, why in missing.items():
        print(f"error: {option} needs {f}, which is not installed "
              f"({install_hint('transformers')}; {why})", file=sys.stderr)
    if missing:
        return 1
    if (old := _too_old("transformers")) is not None:
        print(f"error: {old}", file=sys.stderr)
        return 1
    return None


def run(args) -> int:
    """``diff --framework transformers``: the layer of each family, the ``generate()`` replays,
    the RoPE scaling types, the whole models, then the traps; the table, the refusals and the
    counts printed. Exit 1 on a mismatch or a trap no longer as documented, 2 for ``--dtype
    float32`` (float64 only), 1 when torch or transformers is missing or too old."""
    start = time.perf_counter()
    if getattr(args, "dtype", "all") == "float32":     # the layers are diffed in float64 only
        print("error: --framework transformers diffs in float64 only (a float64 copy of each "
              "layer); drop --dtype float32", file=sys.stderr)
        return 2
    if (status := _not_ready("--framework transformers")) is not None:
        return status
    import transformers

    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers import family_traps as known

    transformers.logging.set_verbosity_error()
    bar = ProgressBar(len(cases.FAMILIES) + len(DECODERS) + len(ENCODER_DECODERS)
                      + len(ROPE_TYPES) + len(MODELS) + len(known.DEMOS))
    rows, done = _layer_rows(args.seed, bar, 0)
    replays, done = _replay_rows(args.seed, bar, done)
    ropes, done = _rope_rows(args.seed, bar, done)
    models, refused, done = _model_rows(args.seed, bar, done)
    rows += replays + ropes + models
    demos = []
    for demo in known.DEMOS:
        bar.update(done, label=f"trap: {demo.__name__}")
        demos.append(demo(args.seed))
        done += 1
    bar.update(done, label="done")
    bar.close()
    _print_table(transformers.__version__, rows)
    if refused:
        print("\nRefused, with the feature attention_np cannot express:\n" + "\n".join(refused))
    print("\nKnown traps (docs/frameworks.md), demonstrated:")
    for demo in demos:
        print(f"\n{demo.title}")
        print("\n".join(demo.lines))
    return _summary(rows, demos, start)


def _layer_rows(seed: int, bar, done: int) -> tuple:
    """``(rows, done)``: one attention layer of each family of ``family_cases.FAMILIES``
    diffed, a row each (``done`` counting the progress bar's steps)."""
    from attention_np.interop.transformers import compare_transformers_attention
    from attention_np.interop.transformers import family_cases as cases
    rows = []
    for family in cases.FAMILIES:
        bar.update(done, label=f"{family} layer")
        module, inputs = cases.case(family, seed)
        rows.append(_layer_row(family, module, compare_transformers_attention(
            module, **inputs, seed=seed)))
        done += 1
    return rows, done


def _replay_rows(seed: int, bar, done: int) -> tuple:
    """``(rows, done)``: a ``generate()`` replay of each of :data:`DECODERS` (plain and
    left-padded prompts) and :data:`ENCODER_DECODERS` (plain and padded sources)."""
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers.decode_diff import replay_generate
    prompts = np.array([[3, 5, 7, 9], [2, 4, 6, 8]])
    left_pad = np.array([[1, 1, 1, 1], [0, 0, 1, 1]])
    sources = np.array([[3, 5, 7, 9, 11], [2, 4, 6, 8, 10]])
    source_pad = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    replays = ([(f, prompts, "leftpad", left_pad) for f in DECODERS]
               + [(f, sources, "padsrc", source_pad) for f in ENCODER_DECODERS])
    rows = []
    for family, ids, padded_mode, pad in replays:
        bar.update(done, label=f"{family} generate()")
        model = cases.tiny_model(family, seed, causal_lm=True)
        for mode, mask in (("decode", None), (padded_mode, pad)):
            rows.append(_replay_row(family, mode, replay_generate(
                model, ids, attention_mask=mask, max_new_tokens=4)))
        done += 1
    return rows, done


def _rope_rows(seed: int, bar, done: int) -> tuple:
    """``(rows, done)``: for each of :data:`ROPE_TYPES`, a Llama layer and its ``generate()``
    replay (inv_freq and the attention factor among the checks)."""
    from attention_np.interop.transformers import compare_transformers_attention
    from attention_np.interop.transformers import family_cases as cases
    from attention_np.interop.transformers.decode_diff import replay_generate
    prompts = np.array([[3, 5, 7, 9], [2, 4, 6, 8]])
    rows = []
    for rope_type in ROPE_TYPES:        # inv_freq and attention factor are among the checks
        bar.update(done, label=f"rope {rope_type}")
        module, inputs = cases.rope_case(rope_type, seed)
        rows.append(_layer_row(f"rope:{rope_type}", module, compare_transformers_attention(
            module, **inputs, seed=seed)))
        model = cases.rope_model(rope_type, seed, causal_lm=True)
        rows.append(_replay_row(f"rope:{rope_type}", "decode",
                                replay_generate(model, prompts, max_new_tokens=7)))
        done += 1
    return rows, done


def _model_rows(seed: int, bar, done: int) -> tuple:
    """``(rows, refused, done)``: a whole tiny model of each of :data:`MODELS` diffed, a row
    each, and the first refusal of each refused one."""
    from attention_np.interop.transformers import families as fam
    from attention_np.interop.transformers.model_diff import compare_transformers_model
    rows, refused = [], []
    for family in MODELS:
        bar.update(done, label=f"{family} model")
        model = fam.family_model(family, seed)
        report = compare_transformers_model(model, seed=seed,
                                            **fam.model_inputs(family, model, seed=seed))
        rows.append(_model_row(family, report))
        refused += [f"{family}: {why}" for _, why in report.refused[:1]]
        done += 1
    return rows, refused, done


def _print_table(version: str, rows: list) -> None:
    """What the columns measure, and a line per row (family, layer, mode)."""
    from attention_np.interop.tolerance import RTOL64
    print(f"attention_np diff --framework transformers ({version}): one "
          f"attention layer per family, float64, forward and backward (random weights and "
          f"upstream gradient)\n")
    print("out err: max|transformers - attention_np| of the layer's output (decode: of the "
          "worst generate() step; leftpad: a left-padded batch, padded rows left out; t5, bart: "
          "the decoder's self- and cross-attention, padsrc: a padded source)\n"
          "grad err: the largest over the input and every parameter gradient "
          f"(worst: which)\ntolerance: max|theirs - ours| <= {RTOL64:g} * max(1, max|ours|); "
          "err/tol: the worst ratio (< 1 passes); the verdict of a RoPE row also holds the "
          "model's inv_freq (a float32 buffer) to ours within 8 float32 ulps, relative, and "
          "its attention factor\n")
    head = (f"{'family':<17} {'layer':<25} {'mode':<7} {'out err':>8} {'grad err':>9} "
            f"{'worst':<22} {'err/tol':>8}  verdict")
    lines = [head, "-" * len(head)]
    for family, layer, mode, out, grad, worst, ratio, ok in rows:
        g = _fmt(grad) if mode in ("layer", "model") and ok is not None else "-"
        verdict = "refused" if ok is None else "ok" if ok else "MISMATCH"
        o, r = ("-", "-") if ok is None else (_fmt(out), _fmt(ratio))
        lines.append(f"{family:<17} {layer:<25} {mode:<7} {o:>8} {g:>9} {worst:<22} "
                     f"{r:>8}  {verdict}")
    print("\n".join(lines))


def _summary(rows: list, demos: list, start: float) -> int:
    """The counts line; exit 1 on a mismatch or a trap no longer as documented, else 0."""
    bad = [r for r in rows if r[-1] is False]
    n_refused = sum(r[-1] is None for r in rows)
    unexplained = [d for d in demos if not d.explained]
    print(f"\n{len(rows) - len(bad) - n_refused}/{len(rows)} diffs (family, mode) agree, "
          f"{len(bad)} mismatches, {n_refused} refused, {len(demos) - len(unexplained)}/"
          f"{len(demos)} traps demonstrated as documented  ({time.perf_counter() - start:.1f} s)")
    return 1 if bad or unexplained else 0


def _is_path(name: str) -> bool:
    import os
    return os.sep in name or name.startswith(".") or os.path.exists(name)


def checkpoint_inputs(model, seed: int = 0) -> dict | None:
    """Inputs for a local checkpoint: token ids ``(2, 6)`` within its vocabulary and a padding
    mask, or pixels ``(2, C, H, W)`` at its ``image_size``; None when its main input is neither."""
    import torch
    rng = np.random.default_rng(seed)
    cfg = model.config
    name = getattr(model, "main_input_name", "input_ids")
    if name == "input_ids":
        vocab = getattr(cfg, "vocab_size", None) or cfg.get_text_config().vocab_size
        ids = torch.from_numpy(rng.integers(min(3, vocab - 1), vocab, (2, 6)))
        inputs = {"input_ids": ids, "attention_mask": torch.ones((2, 6), dtype=torch.long)}
        if getattr(cfg, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = ids[:, :4]
        return inputs
    if name == "pixel_values":
        size = getattr(cfg, "image_size", 224)
        size = size if isinstance(size, int) else size[0]
        return {"pixel_values": torch.from_numpy(rng.standard_normal(
            (2, getattr(cfg, "num_channels", 3), size, size)))}
    return None


def _load_checkpoint(path: str):
    """``(model, None)`` from a local folder, or ``(None, one-line error)``."""
    import os

    import transformers
    if not os.path.isdir(path):
        return None, (f"--model {path!r} is neither a known family nor a folder (a local "
                      "checkpoint: the folder save_pretrained wrote)")
    if not os.path.isfile(os.path.join(path, "config.json")):
        return None, f"--model {path!r} has no config.json: not a transformers checkpoint folder"
    try:
        model = transformers.AutoModel.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        return None, f"--model {path!r} could not be loaded: {' '.join(str(e).split())[:300]}"
    return model.eval(), None


def run_model(args) -> int:
    """``diff --model NAME|PATH``: :func:`~attention_np.interop.transformers.model_diff.
    compare_transformers_model` on a tiny random model of family NAME, or on the checkpoint in
    the local folder PATH (``from_pretrained(PATH, local_files_only=True)``), its report
    printed. Exit 0 when every layer agrees, 1 otherwise (a refused layer included), 2 for an
    unknown NAME (the known ones listed) or a PATH that is no loadable checkpoint."""
    from attention_np.interop.transformers.families import KNOWN
    path = args.model not in KNOWN and _is_path(args.model)
    if args.model not in KNOWN and not path:
        print(f"error: --model {args.model!r} is not a known family; the known ones are: "
              f"{', '.join(KNOWN)} (or give a checkpoint folder, e.g. ./my-model)",
              file=sys.stderr)
        return 2
    if (status := _not_ready("--model")) is not None:
        return status
    import transformers

    from attention_np.interop.transformers.model_diff import compare_transformers_model
    transformers.logging.set_verbosity_error()
    model, inputs, error = _model_and_inputs(args, path)
    if error is None:
        prompt, inputs, error = _cached_split(args, model, inputs)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = compare_transformers_model(model, seed=args.seed, prompt=prompt, **inputs)
    print(report)
    return 0 if report.ok else 1


def _model_and_inputs(args, path: bool) -> tuple:
    """``(model, inputs, error)``: the tiny random model of the family ``args.model`` and its
    inputs, or the checkpoint in the folder ``args.model`` and made-up inputs it takes; ``error``
    the one-line reason there is none (else None)."""
    if not path:
        from attention_np.interop.transformers import families as fam
        model = fam.family_model(args.model, args.seed)
        return model, fam.model_inputs(args.model, model, seed=args.seed), None
    model, error = _load_checkpoint(args.model)
    inputs = None if model is None else checkpoint_inputs(model, args.seed)
    if model is not None and inputs is None:
        error = (f"--model {args.model!r}: {type(model).__name__} takes "
                 f"{model.main_input_name!r}; only token ids and pixels are made up here "
                 "(call compare_transformers_model with your own inputs)")
    return model, inputs, error


def _cached_split(args, model, inputs: dict) -> tuple:
    """``(prompt, inputs, error)``: with ``--cached``, the inputs split into a prompt and its
    last 2 tokens continuing from the cache it fills (the mask of all of them), or the reason
    the model is no decoder that can; without it, ``(None, inputs, None)``."""
    if not getattr(args, "cached", False):
        return None, inputs, None
    from attention_np.interop.transformers.model_diff import attention_layers
    from attention_np.interop.transformers.sweep import decoder
    why = "no input ids" if "input_ids" not in inputs or inputs["input_ids"].shape[1] < 3 \
        else decoder(model, attention_layers(model)[0])
    if why is not None:
        return None, inputs, (f"--cached: {type(model).__name__} is not a decoder continuing "
                              f"from a cache ({why})")
    prompt = {k: v[:, :-2] for k, v in inputs.items()}
    inputs = {k: (v if k == "attention_mask" else v[:, -2:]) for k, v in inputs.items()}
    return prompt, inputs, None
