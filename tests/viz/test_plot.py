"""Plots draw the numbers they are given, label what they say, and refuse bad shapes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import require

matplotlib = require("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attention_np.studies import scaling  # noqa: E402
from attention_np.viz import plot  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _weights(rng, L, S):
    w = rng.random((L, S))
    return w / w.sum(-1, keepdims=True)


def test_heatmap_shows_the_weights_with_token_labels(rng):
    w = _weights(rng, 3, 4)
    ax = plot.attention_heatmap(w, ["a", "b", "c"], ["w", "x", "y", "z"], title="t")
    np.testing.assert_array_equal(ax.images[0].get_array(), w)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    cells = sorted(t.get_text() for t in ax.texts)
    assert cells == sorted(f"{x:.2f}" for x in w.ravel())
    assert ax.images[0].get_clim() == (0.0, 1.0)   # colours comparable across plots


def test_heatmap_has_a_colorbar_and_tells_repeated_tokens_apart(rng):
    ax = plot.attention_heatmap(_weights(rng, 3, 3), ["the", "cat", "the"], ["a", "b", "c"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["the 0", "cat 1", "the 2"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]   # distinct: unchanged
    colorbars = [a for a in ax.figure.axes if a is not ax]
    assert len(colorbars) == 1 and colorbars[0].get_ylabel() == "attention weight"
    ax = plot.attention_heatmap(_weights(rng, 3, 3), colorbar=False)
    assert ax.figure.axes == [ax]


def test_heatmap_refuses_labels_of_the_wrong_length(rng):
    with pytest.raises(ValueError, match="key_labels has 2 labels but the array has 4"):
        plot.attention_heatmap(_weights(rng, 3, 4), None, ["a", "b"])
    with pytest.raises(ValueError, match=r"weights must be \(L, S\)"):
        plot.attention_heatmap(np.ones((2, 3, 4)))


def test_head_grid_draws_one_panel_per_head(rng):
    w = np.stack([_weights(rng, 3, 5) for _ in range(6)])       # (h=6, L, S)
    fig = plot.head_grid(w, ncols=4)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 6 and len(fig.axes) == 9                # two empty panels off, a colorbar
    assert fig.axes[-1].get_ylabel() == "attention weight"      # one shared colour scale
    for i, ax in enumerate(drawn):
        np.testing.assert_array_equal(ax.images[0].get_array(), w[i])
        assert ax.get_title() == f"head {i}"
    with pytest.raises(ValueError, match="titles has 2 entries but weights has h=6"):
        plot.head_grid(w, titles=["x", "y"])


def test_mask_picture_marks_every_blocked_pair():
    mask = np.tri(3, 5, k=2, dtype=bool)
    ax = plot.mask_picture(mask)
    assert sum(t.get_text() == "×" for t in ax.texts) == int((~mask).sum())
    np.testing.assert_array_equal(ax.images[0].get_array(), mask.astype(float))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["may attend (True)", "masked (False)"]
    with pytest.raises(TypeError, match="mask must be a bool"):
        plot.mask_picture(mask.astype(float))


def test_variance_plot_draws_the_measured_variances():
    m = scaling.dot_product_moments([1, 8, 64], n_samples=200, rng=0)
    ax = plot.variance_plot(m)
    ys = [line.get_ydata() for line in ax.get_lines()]
    assert any(np.array_equal(y, m["var"]) for y in ys)
    assert any(np.array_equal(y, m["var_scaled"]) for y in ys)
    assert any(np.array_equal(y, m["d_k"]) for y in ys)       # the analytic line Var = d_k


def test_saturation_and_gradient_plots_draw_both_settings():
    sat = scaling.softmax_saturation([1, 16], n_queries=50, rng=0)
    axes = plot.saturation_plot(sat)
    assert any(np.array_equal(ln.get_ydata(), sat["max_weight_unscaled"])
               for ln in axes[0].get_lines())
    grads = scaling.softmax_gradients([1, 16], n_queries=50, rng=0)
    axes = plot.gradient_plot(grads)
    assert any(np.array_equal(ln.get_ydata(), grads["dq_median_scaled"])
               for ln in axes[1].get_lines())


def test_gradient_plot_lines_are_distinguishable_ticked_at_the_swept_d_k_and_legible():
    d_ks = [1, 4, 16]
    grads = scaling.softmax_gradients(d_ks, n_queries=50, rng=0)
    axes = plot.gradient_plot(grads)
    for ax in axes:
        lines = ax.get_lines()
        styles = {(ln.get_color(), ln.get_marker(), ln.get_linestyle(), ln.get_markerfacecolor())
                  for ln in lines}
        assert len(lines) == len(styles) == 4                  # no two lines drawn alike
        assert len({ln.get_marker() for ln in lines}) == 2     # scaled / unscaled apart without colour
        assert len({ln.get_linestyle() for ln in lines}) == 2  # median / RMS apart without colour
        assert list(ax.get_xticks()) == d_ks
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    (legend,) = axes[0].figure.legends
    assert len(legend.get_texts()) == 4 and all(t.get_fontsize() >= 9 for t in legend.get_texts())


def test_claim6_plot_draws_every_seed_and_marks_the_runs_that_never_reached_the_threshold():
    runs = [{"scoring": s, "d_k": d, "test_accuracy": [acc, acc - 0.1],
             "steps_to_threshold": [None, None] if s == "unscaled" and d == 64 else [100 + d, 120 + d],
             "loss_curve": [2.0, 1.0, 0.5]}
            for s, acc in (("scaled", 1.0), ("unscaled", 0.5), ("additive", 0.9)) for d in (4, 64)]
    claim6 = {"setup": {"scorings": ["scaled", "unscaled", "additive"], "steps": 400, "threshold": 0.99,
                        "seeds": [0, 1]}, "runs": runs}
    axes = plot.claim6_plot(claim6)
    scaled = next(c for c in axes[0].containers if c.get_label() == "scaled")
    np.testing.assert_allclose(scaled.lines[0].get_ydata(), [0.95, 0.95])   # the mean over seeds
    never = [ln for ln in axes[1].get_lines() if ln.get_marker() == "x"]
    assert len(never) == 1 and list(never[0].get_ydata()) == [400, 400]   # two seeds at the cap
    assert list(axes[0].get_xticks()) == [4, 64]
    assert "$d_k$ = 64" in axes[2].get_title()


def test_importing_the_package_and_the_cli_does_not_import_matplotlib():
    code = ("import sys, attention_np, attention_np.cli as m, attention_np.cli.figures;"
            "[__import__(mod) for mod, _ in m.COMMANDS.values()];"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
