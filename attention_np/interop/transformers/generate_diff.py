"""Diff a decoder's ``generate()``, every step and every attention layer:
:func:`compare_transformers_generate`.

A float64 copy of the model generates greedily with every attention layer hooked
(:func:`~attention_np.interop.transformers.model_diff.diff_run`): the prompt is each layer's
first call, then one call per new token continuing from the cache ``generate()`` filled. Each
call is a row (``#k``: step ``k``), its cached keys and values a row of their own (``... (cache)``,
against ours recomputed from the layer's earlier steps), and the tokens the copy generated a
row against those of ``model.generate()`` as given (its dtype, its attention implementation).
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_int
from attention_np._optional import import_optional
from attention_np.interop.tolerance import Check
from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.model_diff import diff_run
from attention_np.interop.transformers.model_report import LayerResult, ModelReport


def _ids_and_mask(input_ids, attention_mask):
    ids = np.asarray(to_numpy(input_ids) if hasattr(input_ids, "detach") else input_ids)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer) or 0 in ids.shape:
        raise ValueError(f"input_ids must be (B, L) integers, B, L >= 1, got {ids.dtype} "
                         f"{ids.shape}")
    if attention_mask is None:
        return ids, np.ones(ids.shape, np.int64)
    mask = np.asarray(to_numpy(attention_mask) if hasattr(attention_mask, "detach")
                      else attention_mask)
    if mask.shape != ids.shape or not np.isin(mask, (0, 1)).all():
        raise ValueError(f"attention_mask must be 0/1 of the shape of input_ids {ids.shape}, "
                         f"got {mask.dtype} {mask.shape}")
    if not mask.any(axis=1).all():
        raise ValueError("attention_mask: every prompt needs a real token (a row of 1s somewhere)")
    return ids, mask.astype(np.int64)


def compare_transformers_generate(model, input_ids, *, attention_mask=None,
                                  max_new_tokens: int = 3, seed: int = 0) -> ModelReport:
    """Greedy ``generate()`` on a float64 copy of ``model``, every step diffed.

    Parameters
    ----------
    model : a transformers decoder with ``generate`` (``...ForCausalLM``); left untouched
    input_ids : (B, L) int
        The prompts (left-padded for a batch of several lengths).
    attention_mask : (B, L) 0/1, optional
        Their padding (default none). ``generate()`` gives each token its position counted
        from the first real token of its row; the rows read those positions.
    max_new_tokens : int
        Tokens generated (exactly: ``min_new_tokens`` is the same).
    seed : int
        Seed of the random upstream gradients.

    Returns
    -------
    ModelReport
        One row per layer and step (``#k``, step 0 the prompt), per filled cache (``(cache)``),
        and ``generated tokens``: the copy's tokens against ``model.generate()``'s and the
        number of steps each layer ran. A cache ``generate()`` makes that cannot be replayed
        (a static cache, a hybrid model's) is refused by name.
    """
    torch = import_optional("torch", "attention_np.interop.transformers.generate_diff")
    import_optional("transformers", "attention_np.interop.transformers.generate_diff")
    if not isinstance(model, torch.nn.Module) or not callable(getattr(model, "generate", None)):
        raise TypeError(f"model must be a transformers model with generate() (a ...ForCausalLM),"
                        f" got {type(model).__name__}")
    if getattr(model.config, "is_encoder_decoder", False):
        raise TypeError(f"{type(model).__name__} is an encoder-decoder: its generate() caches "
                        "self- and cross-attention (EncoderDecoderCache), not supported here; "
                        "decode_diff.replay_generate replays T5's and BART's first decoder layer")
    ids, mask = _ids_and_mask(input_ids, attention_mask)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens")
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else \
        model.config.eos_token_id
    pad = (pad[0] if isinstance(pad, (list, tuple)) else pad) or 0
    options = {"max_new_tokens": max_new_tokens, "min_new_tokens": max_new_tokens,
               "do_sample": False, "pad_token_id": pad, "use_cache": True}

    def run(work, to_torch):
        return work.generate(**to_torch({"input_ids": ids, "attention_mask": mask}), **options)
    report, tokens = diff_run(model, run, seed)
    report.model = f"{type(model).__name__}.generate()"
    if tokens is None:
        return report
    with torch.no_grad():
        theirs = model.generate(input_ids=torch.from_numpy(ids),
                                attention_mask=torch.from_numpy(mask), **options)
    ours, theirs = to_numpy(tokens), to_numpy(theirs)
    differ = ours.size if ours.shape != theirs.shape else int((ours != theirs).sum())
    steps = {}
    for r in report.attention:
        steps[r.name.split("#")[0]] = steps.get(r.name.split("#")[0], 0) + 1
    checks = [Check("tokens (float64 copy vs model)", differ, ours.size, 0, "equal")]
    if not report.refused:                 # (a refused call is not a row)
        short = sum(abs(n - max_new_tokens) for n in steps.values())
        checks.append(Check("steps per layer", short, max_new_tokens, 0, "equal"))
    report.layers.append(LayerResult("generated tokens", "generate()", checks, kind="tokens"))
    report.notes.append(f"generated {max_new_tokens} token(s) greedily for {ids.shape[0]} "
                        f"prompt(s) of {ids.shape[1]}; tokens of the copy: {ours[:, ids.shape[1]:].tolist()}")
    return report
