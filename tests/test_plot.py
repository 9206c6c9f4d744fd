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


def test_importing_the_package_and_the_cli_does_not_import_matplotlib():
    code = ("import sys, attention_np, attention_np.cli as m, attention_np.cli.figures;"
            "[__import__(mod) for mod, _ in m.COMMANDS.values()];"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
