"""Pictures of MiniLM's attention (matplotlib, imported only inside these functions).

:func:`save_readme_figure` regenerates ``docs/img/minilm_heads.png``, the README figure:
``python -m attention_np.viz.pretrained`` (from the repository root; ``--out PNG`` writes elsewhere).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attention_np._checks import check_array, check_count, check_flag, check_path, check_str, check_tuple
from attention_np._optional import import_optional
from attention_np.pretrained.head_finder import BEHAVIOURS, best_heads, head_scores

# Sentences with repeated words (for "match" heads) and punctuation, short enough to read.
SENTENCES = [
    "The cat sat on the mat because the cat was tired.",
    "The dog chased the ball, then the dog chased the cat.",
    "She said that she would come, and she did.",
    "Attention is all you need.",
]
SHOWN = ("previous", "next", "cls", "match")


def plot_weights(ax, weights: np.ndarray, tokens, title: str = "", labels: bool = True):
    """One (L, L) weight matrix, cut to the ``len(tokens)`` real tokens, as a heatmap
    (:func:`attention_np.viz.plot.attention_heatmap`): rows are queries, columns are keys."""
    from attention_np.viz.plot import attention_heatmap

    check_str(title, "title")
    check_flag(labels, "labels")
    if ax is None or not hasattr(ax, "imshow"):
        raise TypeError(f"ax must be a matplotlib Axes, got {ax!r:.60}")
    weights = check_array(weights, "weights", ndim=2, layout="(L, L)")
    n = len(check_tuple(tokens, "tokens", sequence=True))
    if n > min(weights.shape):
        raise ValueError(f"tokens has {n} tokens but weights is {weights.shape}: expected at most "
                         f"{min(weights.shape)} tokens")
    attention_heatmap(weights[:n, :n], tokens, tokens, ax=ax, annotate=False, colorbar=False)
    ax.set_aspect("equal")                     # queries and keys are the same tokens
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("")                          # the callers label the outer axes only
    ax.set_ylabel("")
    if labels:
        ax.tick_params(labelsize=10)
    else:
        ax.set_xticks([])
        ax.set_yticks([])


def plot_grid(attentions, tokens, *, sentence: int = 0):
    """Every layer (rows) × every head (columns) for one sentence; returns the figure.

    72 small panels: drawn as bare images with one shared colorbar (no per-panel tick labels,
    which would be unreadable at this size and slow to lay out).
    """
    check_count(sentence, "sentence", minimum=0, maximum=max(len(tokens) - 1, 0))
    attentions = check_tuple(attentions, "attentions", nonempty=True, sequence=True,
                             item=lambda a, name: check_array(a, name, ndim=4, layout="(B, h, L, L)"))
    plt = import_optional("matplotlib.pyplot", "attention_np.viz.pretrained")

    num_layers, num_heads = len(attentions), attentions[0].shape[1]
    toks = tokens[sentence]
    n = len(toks)
    # 9.6 inches wide: the width the site shows it at, so its 10-point labels stay 10 points
    fig, axes = plt.subplots(num_layers, num_heads, figsize=(9.6, 0.78 * num_layers + 1.0), squeeze=False,
                             gridspec_kw=dict(left=0.08, right=0.9, bottom=0.02, top=0.86,
                                              wspace=0.08, hspace=0.12))
    for layer in range(num_layers):
        for head in range(num_heads):
            ax = axes[layer, head]
            im = ax.imshow(attentions[layer][sentence, head, :n, :n], vmin=0, vmax=1, cmap="viridis")
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"{head}", fontsize=10)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=10)
    fig.colorbar(im, cax=fig.add_axes((0.92, 0.1, 0.012, 0.7)), label="attention weight")
    fig.suptitle(f"all-MiniLM-L6-v2 attention weights, heads 0-{num_heads - 1} (rows: queries, columns: "
                 f"keys, {n} tokens):\n\"{' '.join(toks[1:-1])}\"", fontsize=10)
    return fig


def plot_recognizable_heads(attentions, tokens, *, sentence: int = 0, shown=SHOWN):
    """The top-scoring head of each behaviour in ``shown`` (scored on every sentence)."""
    check_count(sentence, "sentence", minimum=0, maximum=max(len(tokens) - 1, 0))
    unknown = [s for s in shown if s not in BEHAVIOURS] if isinstance(shown, (tuple, list)) else shown
    if unknown or not shown:
        raise ValueError(f"shown must be a non-empty tuple of {list(BEHAVIOURS)}, got {shown!r}")
    plt = import_optional("matplotlib.pyplot", "attention_np.viz.pretrained")

    best = best_heads(head_scores(attentions, tokens))
    ncols = min(2, len(shown))                       # two a row: 9.6 inches wide, the width shown
    nrows = -(-len(shown) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 4.9 * nrows), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    axes = axes.flat[:len(shown)]
    positioned = [f"{t} {i}" for i, t in enumerate(tokens[sentence])]   # repeated words told apart
    for ax, name in zip(axes, shown, strict=True):
        layer, head, score = best[name]
        plot_weights(ax, attentions[layer][sentence, head], positioned,
                     f"layer {layer}, head {head}: attends to\n{BEHAVIOURS[name]}\n(mean weight {score:.2f})")
    for i, ax in enumerate(axes):
        ax.set_xlabel("key", fontsize=10)
        if i % ncols == 0:
            ax.set_ylabel("query")
    fig.colorbar(axes[0].images[0], ax=list(axes), shrink=0.6, pad=0.01, label="attention weight")
    return fig


def save_readme_figure(path="docs/img/minilm_heads.png", dpi: int = 100) -> Path:
    """Run MiniLM on :data:`SENTENCES` and save the recognizable heads; returns the path."""
    check_path(path)
    check_count(dpi, "dpi", maximum=1000)
    from attention_np._optional import import_optional

    import_optional("matplotlib", "attention_np.viz.pretrained").use("Agg")
    from attention_np.pretrained.minilm import MiniLM

    out, batch = MiniLM()(SENTENCES)
    fig = plot_recognizable_heads(out.attentions, batch.tokens)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def main(argv=None) -> int:
    """``python -m attention_np.viz.pretrained [--out PNG] [--dpi N]``: the README figure."""
    import argparse
    import sys

    from attention_np._args import int_between, output_file

    parser = argparse.ArgumentParser(prog="python -m attention_np.viz.pretrained",
                                     description=save_readme_figure.__doc__.splitlines()[0])
    parser.add_argument("--out", type=output_file(".png"), default="docs/img/minilm_heads.png",
                        help="the PNG to write (default docs/img/minilm_heads.png)")
    parser.add_argument("--dpi", type=int_between(1, 1000), default=100,
                        help="resolution, 1 to 1000 dots per inch (default 100)")
    args = parser.parse_args(argv)
    try:
        print(save_readme_figure(args.out, dpi=args.dpi))
    except ImportError as e:         # a missing extra, or the weights package: one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
