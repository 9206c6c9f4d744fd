"""Pictures of attention: weight heatmaps, a grid of heads, masks, the scaling-study curves.

Needs matplotlib, the ``[plots]`` extra (``pip install "matplotlib>=3.7"``); the core package
never imports this module. Every function draws into an ``Axes`` you pass (or a new figure) and returns it, so
the pictures compose into larger figures.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import check_array, check_count, check_flag, check_instance, check_keys, check_str
from attention_np._optional import import_optional

plt = import_optional("matplotlib.pyplot", "attention_np.viz.plot")   # ImportError naming [plots]

# One colour per scoring function / setting, the same in every plot.
COLORS = {"scaled": "tab:blue", "unscaled": "tab:red", "additive": "tab:green",
          "analytic": "black"}

# One marker per scoring function, so that the lines stay apart in grey and where they overlap.
MARKERS = {"scaled": "o", "unscaled": "^", "additive": "s"}


def _d_k_axis(ax, d_k) -> None:
    """A log x-axis ticked at exactly the swept d_k, labelled as integers."""
    ax.set_xscale("log")
    ax.set_xticks(d_k, [str(int(d)) for d in d_k])
    ax.minorticks_off()
    ax.set_xlabel("$d_k$")


def _axes(ax, figsize=(4, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _labels(labels, n: int, name: str, default: str):
    if labels is None:
        return [f"{default}{i}" for i in range(n)]
    labels = [str(t) for t in labels]
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the array has {n} along that axis")
    return labels


def _by_position(labels):
    """``labels`` with each one's position appended when some label repeats ("the 0", "the 4")."""
    if len(set(labels)) == len(labels):
        return labels
    return [f"{t} {i}" for i, t in enumerate(labels)]


def _check_matrix(x, name: str, ndim: int, layout: str, kind: str = "number") -> np.ndarray:
    """``x`` as an array of ``ndim`` dims laid out as ``layout``: weights are numbers (int or
    float; complex, object or text are refused), a mask is bool."""
    x = check_array(x, name, kind=kind, layout=layout)
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {layout}, got shape {x.shape}")
    return x


def attention_heatmap(weights, query_labels=None, key_labels=None, *, ax=None, title=None,
                      annotate: bool = True, cmap: str = "viridis", colorbar: bool = True):
    """One (L, S) weight matrix as a heatmap: row ``i`` is query ``i``'s distribution over keys.

    Labels that repeat (the same word twice) get their position appended, ``"the 0"``, ``"the 4"``,
    so that every row and column can be told apart.

    Parameters
    ----------
    weights : (L, S) array, values in [0, 1]
    query_labels : L strings (rows), optional
    key_labels : S strings (columns), optional
    ax : matplotlib Axes, optional
    title : str, optional
    annotate : bool
        Write each weight in its cell (for small matrices).
    colorbar : bool
        Draw the colour scale (weight 0 to 1) beside the axes.

    Returns
    -------
    ax : the Axes drawn into
    """
    w = _check_matrix(weights, "weights", 2, "(L, S)")
    check_flag(annotate, "annotate")
    check_flag(colorbar, "colorbar")
    check_str(cmap, "cmap")
    if cmap not in plt.colormaps():
        raise ValueError(f"cmap must be a matplotlib colormap name (e.g. 'viridis', 'Greys'), got {cmap!r}")
    L, S = w.shape
    rows = _labels(query_labels, L, "query_labels", "q")
    cols = _labels(key_labels, S, "key_labels", "k")
    rows, cols = _by_position(rows), _by_position(cols)
    ax = _axes(ax)
    im = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_xticks(range(S), cols, rotation=45, ha="right")
    ax.set_yticks(range(L), rows)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if annotate:
        for i in range(L):            # a few dozen text labels, not arithmetic: loops are fine
            for j in range(S):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=10,
                        color="black" if w[i, j] > 0.6 else "white")
    if title:
        ax.set_title(title)
    return ax


def head_grid(weights, query_labels=None, key_labels=None, *, ncols: int = 4, titles=None,
              suptitle=None, annotate: bool = False):
    """Every head's (L, S) weights side by side, from an (h, L, S) array (``cache.weights[b]``).

    Returns
    -------
    fig : the matplotlib Figure
    """
    w = _check_matrix(weights, "weights", 3, "(h, L, S)")
    check_count(ncols, "ncols")
    check_flag(annotate, "annotate")
    h = w.shape[0]
    if titles is not None and len(titles) != h:
        raise ValueError(f"titles has {len(titles)} entries but weights has h={h} heads")
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols, 2.3 * nrows),
                             layout="constrained", squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        attention_heatmap(w[i], query_labels, key_labels, ax=ax, annotate=annotate, colorbar=False,
                          title=titles[i] if titles is not None else f"head {i}")
        if i % ncols:
            ax.set_ylabel("")
        if i < h - ncols:             # only the bottom row says "key"
            ax.set_xlabel("")
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.8, label="attention weight")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def mask_picture(mask, query_labels=None, key_labels=None, *, ax=None, title=None,
                 legend: bool = True):
    """A bool (L, S) mask: dark = may attend (True), light with a red × = masked (False).

    ``legend`` says so beside the axes."""
    from matplotlib.lines import Line2D
    m = _check_matrix(mask, "mask", 2, "(L, S)", kind="bool")
    check_flag(legend, "legend")
    if m.dtype != np.bool_:
        raise TypeError(f"mask must be a bool array (True = may attend), got dtype {m.dtype}")
    L, S = m.shape
    ax = attention_heatmap(m.astype(float), query_labels, key_labels, ax=ax, title=title,
                           annotate=False, cmap="Greys", colorbar=False)
    im = ax.images[-1]
    im.set_clim(-0.3, 1.3)              # keep "blocked" visibly off-white, "allowed" not pure black
    for i, j in zip(*np.nonzero(~m), strict=True):
        ax.text(j, i, "×", ha="center", va="center", fontsize=10, color="tab:red")
    if legend:
        swatch = dict(marker="s", ls="", ms=10, markeredgecolor="gray")
        ax.legend(handles=[Line2D([], [], markerfacecolor=im.cmap(im.norm(1.0)), **swatch,
                                  label="may attend (True)"),
                           Line2D([], [], markerfacecolor=im.cmap(im.norm(0.0)), **swatch,
                                  label="masked (False)")],
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=10, frameon=False)
    return ax


def variance_plot(moments: dict, *, ax=None):
    """Measured Var(q·k) and Var(q·k/√d_k) against d_k (from ``scaling.dot_product_moments``)."""
    check_keys(moments, "moments", ("d_k", "var", "var_scaled"), maker="scaling.dot_product_moments")
    d_k = np.asarray(moments["d_k"])
    ax = _axes(ax, figsize=(4.5, 3.5))
    ax.loglog(d_k, d_k, "--", color=COLORS["analytic"], lw=1, label="analytic: $d_k$ and 1")
    ax.loglog(d_k, np.ones_like(d_k), "--", color=COLORS["analytic"], lw=1)
    ax.loglog(d_k, moments["var"], "o", color=COLORS["unscaled"], label=r"Var$(q\cdot k)$")
    ax.loglog(d_k, moments["var_scaled"], "s", color=COLORS["scaled"],
              label=r"Var$(q\cdot k/\sqrt{d_k})$")
    _d_k_axis(ax, d_k)
    ax.set_ylabel("variance")
    ax.set_title(r"footnote 4: Var$(q\cdot k) = d_k$")
    ax.legend(fontsize=10)
    return ax


def saturation_plot(saturation: dict, *, axes=None):
    """Largest weight and entropy against d_k, scaled vs unscaled (``scaling.softmax_saturation``)."""
    check_keys(saturation, "saturation", ("d_k", "max_entropy") + tuple(
        f"{w}_{how}" for w in ("max_weight", "entropy") for how in ("scaled", "unscaled")),
        maker="scaling.softmax_saturation")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
    d_k = np.asarray(saturation["d_k"])
    for how in ("scaled", "unscaled"):
        axes[0].plot(d_k, saturation[f"max_weight_{how}"], "-", marker=MARKERS[how], color=COLORS[how],
                     label=how)
        axes[1].plot(d_k, saturation[f"entropy_{how}"], "-", marker=MARKERS[how], color=COLORS[how],
                     label=how)
    axes[0].set_ylim(0, 1.02)
    axes[0].set_ylabel("mean largest weight")
    axes[1].axhline(saturation["max_entropy"], ls="--", color=COLORS["analytic"], lw=1,
                    label="uniform: log S")
    axes[1].set_ylabel("mean entropy (nats)")
    for ax in axes:
        _d_k_axis(ax, d_k)
        ax.legend(fontsize=10)
    axes[0].set_title("softmax saturation")
    return axes


def gradient_plot(gradients: dict, *, axes=None):
    """Gradient norms at the scores and the queries against d_k (``scaling.softmax_gradients``).

    Colour and marker say scaled / unscaled, the line style says which summary: solid, filled
    markers for the median query, dashed, open markers for the root mean square. One legend,
    below both panels."""
    check_keys(gradients, "gradients", ("d_k",) + tuple(
        f"{g}_{stat}_{how}" for g in ("dscores", "dq") for stat in ("median", "rms")
        for how in ("scaled", "unscaled")), maker="scaling.softmax_gradients")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(9, 3.9), layout="constrained")
    d_k = np.asarray(gradients["d_k"])
    for ax, g, name in ((axes[0], "dscores", "scores"), (axes[1], "dq", "queries")):
        for how in ("scaled", "unscaled"):
            ax.loglog(d_k, gradients[f"{g}_median_{how}"], "-", marker=MARKERS[how], ms=7, lw=2,
                      color=COLORS[how], label=f"{how}: median query")
            ax.loglog(d_k, gradients[f"{g}_rms_{how}"], "--", marker=MARKERS[how], ms=7, lw=1.5,
                      color=COLORS[how], markerfacecolor="white", label=f"{how}: root mean square")
        _d_k_axis(ax, d_k)
        ax.set_ylabel(f"gradient norm at the {name}")
        ax.set_title(f"at the {name}")
    axes[0].figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2,
                          fontsize=10)
    axes[0].figure.suptitle("gradient through the softmax, per query (2 000 queries)")
    return axes


def claim6_plot(claim6: dict, *, axes=None):
    """§3.2.1's claim 6 inside a trained encoder (``studies.scoring_in_model``'s results, e.g.
    ``notebooks/results/claim6.json``): test accuracy against d_k (mean over seeds, bars from the
    smallest to the largest seed), each seed's steps to the threshold (x at the budget: never), and
    the training loss at the largest d_k."""
    check_keys(claim6, "claim6", ("setup", "runs"), maker="studies.scoring_in_model.run_study")
    setup = claim6["setup"]
    runs = {(r["scoring"], r["d_k"]): r for r in claim6["runs"]}
    d_ks = sorted({r["d_k"] for r in claim6["runs"]})
    if axes is None:                # two rows, 9.6 inches wide: the width shown, so labels stay 10 pt
        fig = plt.figure(figsize=(9.6, 7.0), layout="constrained")
        grid = fig.subplot_mosaic([["accuracy", "steps"], ["loss", "loss"]])
        axes = [grid["accuracy"], grid["steps"], grid["loss"]]
    for j, s in enumerate(setup["scorings"]):
        acc = np.array([runs[s, d]["test_accuracy"] for d in d_ks])          # (len(d_ks), seeds)
        x = np.array(d_ks) * 1.08 ** (j - 1)                                 # side by side
        axes[0].errorbar(x, acc.mean(1), yerr=[acc.mean(1) - acc.min(1), acc.max(1) - acc.mean(1)],
                         marker=MARKERS[s], capsize=3, color=COLORS[s], label=s)
        for d, xd in zip(d_ks, x, strict=True):
            steps = runs[s, d]["steps_to_threshold"]
            reached = [t for t in steps if t is not None]
            axes[1].plot([xd] * len(reached), reached, MARKERS[s], color=COLORS[s], alpha=0.8,
                         label=s if d == d_ks[0] else None)
            never = len(steps) - len(reached)
            if never:
                axes[1].plot([xd] * never, [setup["steps"]] * never, "x", color=COLORS[s], ms=9)
        curve = runs[s, d_ks[-1]]["loss_curve"]
        axes[2].plot(np.arange(1, len(curve) + 1), curve, color=COLORS[s], label=s)
    axes[0].set(ylabel="test token accuracy", title="mean over seeds, bars: min to max")
    axes[1].axhline(setup["steps"], color="gray", lw=0.8, ls=":")
    axes[1].set(ylabel="step", title=f"steps to {setup['threshold']:.0%} (× at the cap: never)")
    axes[2].set(yscale="log", xlabel="step", ylabel="training loss (mean over seeds)",
                title=f"training loss at $d_k$ = {d_ks[-1]}")
    for ax in axes[:2]:
        _d_k_axis(ax, d_ks)
    for ax in axes:
        ax.legend(fontsize=10)
    axes[0].figure.suptitle(f"claim 6 inside a trained encoder: {len(setup['seeds'])} seeds per point, "
                            f"{setup['steps']} steps each,\nlearning rate tuned per scorer and $d_k$")
    return axes


def comparison_plot(result: dict, *, axes=None):
    """Additive vs unscaled vs scaled on the retrieval task (``compare_scoring.train_retrieval``)."""
    check_keys(result, "result", ("d_k", "n_keys"), maker="compare_scoring.train_retrieval")
    scorings = [s for s in ("additive", "unscaled", "scaled") if f"accuracy_{s}" in result]
    if not scorings:
        raise ValueError(f"result has no accuracy_<scoring> key (additive, unscaled, scaled): expected "
                         f"what compare_scoring.train_retrieval returns, got the keys {sorted(result)[:12]}")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(8, 3.2), layout="constrained")
    d_k = np.asarray(result["d_k"])
    steps = result[f"curve_{scorings[0]}"].shape[1]
    for s in scorings:
        axes[0].plot(d_k, result[f"accuracy_{s}"], "o-", color=COLORS[s], label=s)
        reached = np.asarray(result[f"steps_to_threshold_{s}"], dtype=float)
        never = reached >= steps                    # the cap means "never reached", not a measured step
        axes[1].plot(d_k, np.where(never, np.nan, reached), "o-", color=COLORS[s], label=s)
        if never.any():
            axes[1].plot(d_k[never], np.full(never.sum(), steps), "x", color=COLORS[s], ms=8,
                         label=f"{s}: never reached")
    if "n_keys" in result:
        axes[0].axhline(1 / result["n_keys"], ls="--", color=COLORS["analytic"], lw=1,
                        label="chance: 1/S")
    axes[0].set_ylim(0, 1.02)
    axes[0].set_ylabel(f"held-out accuracy after {steps} steps")
    axes[1].set_ylabel(f"steps to loss < threshold (x: not in {steps})")
    for ax in axes:
        _d_k_axis(ax, d_k)                         # ticks at the swept d_k, not 10^1, 10^2
        ax.legend(fontsize=10)
    axes[0].set_title("retrieval task")
    return axes


def training_curves(result: dict, d_k_index: int = -1, *, ax=None, window: int = 10):
    """Training loss (running mean over ``window`` steps) of each scoring at one ``d_k``."""
    check_instance(result, dict, "result", maker="compare_scoring.train_retrieval's")
    n = len(result.get("d_ks", ())) or 1
    check_count(d_k_index, "d_k_index", minimum=-n, maximum=n - 1)     # an index: negative counts back
    check_count(window, "window")
    ax = _axes(ax, figsize=(5, 3.2))
    for s in ("additive", "unscaled", "scaled"):
        if f"curve_{s}" not in result:
            continue
        curve = result[f"curve_{s}"][d_k_index]
        smooth = np.convolve(curve, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(curve)), smooth, color=COLORS[s], label=s)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"$d_k$ = {int(result['d_k'][d_k_index])}")
    ax.legend(fontsize=10)
    return ax
