"""``python -m attention_np figures [--out DIR]``: regenerate the key plots as PNG files.

Writes exactly the files named in :data:`FIGURES` (the same names every time, default
directory ``figures/``). Every number behind them is seeded, so the pictures are the same on
every run. matplotlib is imported inside :func:`run` only: the command-line parser does not need it.

The lessons' example data (the sentence of notebook 1, the d_k sweeps of notebook 2) lives in
:mod:`attention_np.lessons.examples`, so the notebooks and the figures show the same numbers. The
claim-6 figure draws lesson 06's fair experiment (its appendix) from its committed results (``--claim6``, by
default ``notebooks/results/claim6.json`` of this checkout), the file lesson 06 loads.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

from attention_np._args import int_between, json_object, output_dir
from attention_np._optional import import_optional
from attention_np.cli.progress import ProgressBar

# file name -> what it shows (the README's one sentence per figure comes from here)
FIGURES = {
    "eq1_weights.png": "Eq. (1) on a six-word sentence: each row is one query's weights over the keys.",
    "masks.png": "Padding mask and the two causal alignments when L != S (True = may attend).",
    "multihead_heads.png": "The eight heads of one multi-head attention call (random weights).",
    "scaling_variance.png": "Footnote 4: Var(q·k) grows like d_k; after 1/sqrt(d_k) it stays 1.",
    "scaling_saturation.png": "Without the scale the softmax tends to one-hot as d_k grows.",
    "scaling_gradients.png": "Without the scale the typical gradient through the softmax vanishes.",
    "additive_vs_dot.png": "Claim 6 inside a trained encoder (lesson 06): additive, unscaled and scaled "
                           "dot-product attention as d_k grows.",
}

# lesson 06's committed results of studies.scoring_in_model, in a checkout of the repository
CLAIM6 = Path(__file__).resolve().parents[2] / "notebooks" / "results" / "claim6.json"
CLAIM6_COMMAND = "python -m attention_np.studies.scoring_in_model --out notebooks/results/claim6.json"

def add_arguments(parser) -> None:
    parser.add_argument("--out", type=output_dir, default="figures",
                        help="output directory, made if absent (default: figures/)")
    parser.add_argument("--dpi", type=int_between(1, 1000), default=100,
                        help="resolution of the PNG files, 1 to 1000 dots per inch (default 100)")
    parser.add_argument("--claim6", default=str(CLAIM6),
                        help="the results of lesson 06's claim-6 study, drawn as additive_vs_dot.png "
                             "(default: notebooks/results/claim6.json of this checkout)")


def check_args(parser, args) -> None:
    """Make the output directory before any work, or say why it cannot be made (exit 2); the
    claim-6 results must exist."""
    try:
        json_object(("setup", "runs"), f"the JSON of lesson 06's claim-6 study ({CLAIM6_COMMAND} "
                                       f"makes it)")(args.claim6)
    except argparse.ArgumentTypeError as e:
        parser.error(f"argument --claim6: {e}")
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return                       # run() names the missing extra; no directory is made
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        parser.error(f"argument --out: got {args.out!r}, which cannot be made ({e.strerror}); "
                     f"expected a directory that exists or can be made")


def _save(fig, out_dir: str, name: str, dpi: int) -> None:
    # No "Software" metadata: the bytes then depend on the pixels only.
    fig.savefig(os.path.join(out_dir, name), dpi=dpi, metadata={"Software": None})


def run(args) -> int:
    try:
        matplotlib = import_optional("matplotlib", "python -m attention_np figures")
    except ImportError as e:         # a message naming the [plots] extra, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 1
    matplotlib.use("Agg")            # files only, never a window
    import matplotlib.pyplot as plt

    from attention_np.compose.mha import init_mha_params, mha_forward
    from attention_np.kernels.fused import sdpa_forward
    from attention_np.lessons.examples import SCALING_D_KS, SEED, example_sentence
    from attention_np.paper.masks import causal_mask, padding_mask
    from attention_np.studies import scaling, scoring_in_model
    from attention_np.viz import plot

    os.makedirs(args.out, exist_ok=True)   # made by check_args() already, unless called directly
    written = []
    bar = ProgressBar(len(FIGURES))

    def drawing(name):               # progress before each figure: the last one takes longest
        bar.update(len(written), label=f"drawing {name}")

    def save(fig, name):
        _save(fig, args.out, name, args.dpi)
        plt.close(fig)
        written.append(name)

    drawing("eq1_weights.png")
    tokens, x = example_sentence()
    _, cache = sdpa_forward(x, x, x)
    ax = plot.attention_heatmap(cache.weights, tokens, tokens,
                                title=r"softmax$(QK^\top/\sqrt{d_k})$, Q = K = V = x")
    save(ax.figure, "eq1_weights.png")

    drawing("masks.png")
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), layout="constrained")
    plot.mask_picture(padding_mask([4, 6], S=6)[0].repeat(6, axis=0), tokens, tokens,
                      ax=axes[0], title="key padding (length 4 of 6)", legend=False)
    plot.mask_picture(causal_mask(3, 6), tokens[3:], tokens, ax=axes[1],
                      title="causal, top_left (L=3, S=6)", legend=False)
    plot.mask_picture(causal_mask(3, 6, align="bottom_right"), tokens[3:], tokens, ax=axes[2],
                      title="causal, bottom_right (L=3, S=6)")
    save(fig, "masks.png")

    drawing("multihead_heads.png")
    d_model, h = 64, 8
    rng = np.random.default_rng(SEED)
    x_model = np.concatenate([x, rng.standard_normal((len(tokens), d_model - x.shape[1]))], -1)
    params = init_mha_params(d_model, h, rng=SEED)
    _, mcache = mha_forward(x_model, x_model, x_model, params, num_heads=h, is_causal=True)
    save(plot.head_grid(mcache.weights, tokens, tokens,
                        suptitle=f"masked self-attention, h={h}, d_k={d_model // h}"),
         "multihead_heads.png")

    drawing("scaling_variance.png")
    ax = plot.variance_plot(scaling.dot_product_moments(SCALING_D_KS, rng=SEED))
    save(ax.figure, "scaling_variance.png")
    drawing("scaling_saturation.png")
    axes = plot.saturation_plot(scaling.softmax_saturation(SCALING_D_KS, rng=SEED))
    save(axes[0].figure, "scaling_saturation.png")
    drawing("scaling_gradients.png")
    axes = plot.gradient_plot(scaling.softmax_gradients(SCALING_D_KS, rng=SEED))
    save(axes[0].figure, "scaling_gradients.png")

    drawing("additive_vs_dot.png")
    axes = plot.claim6_plot(scoring_in_model.load(args.claim6))
    save(axes[0].figure, "additive_vs_dot.png")

    bar.update(len(written), label="done")
    assert sorted(written) == sorted(FIGURES), "FIGURES and the files written disagree"
    for name in written:
        print(os.path.join(args.out, name))
    return 0
