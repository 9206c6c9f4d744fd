"""Is every label of a figure readable where it is shown? At least :data:`MIN_PT` points at the size
the figure is shown at.

A figure is shown at its own width, or shrunk to fit :data:`SHOWN_WIDTH_IN` when it is wider: the
course site's content column is 60rem (960 px, ``docs/_static/course.css``), which at the lessons'
100 dpi is 9.6 inches, and a projected notebook is no wider. So a label of ``s`` points in a figure
``w`` inches wide is seen at ``s * min(1, 9.6 / w)`` points.

:func:`install` registers an IPython hook (in a lesson's kernel) that measures every figure open at
the end of each cell, then closes it; :func:`report` returns what it found. The notebook test runs
each lesson with it.
"""

from __future__ import annotations

SHOWN_WIDTH_IN = 9.6
MIN_PT = 10.0

_FOUND: list = []


def small_labels(fig, *, shown_width: float = SHOWN_WIDTH_IN, min_pt: float = MIN_PT) -> list:
    """``(text, points as shown)`` for every visible, non-empty text of ``fig`` seen below ``min_pt``."""
    from matplotlib.text import Text

    fig.draw_without_rendering()                         # lay out the ticks and their labels
    scale = min(1.0, shown_width / fig.get_size_inches()[0])
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox
    small = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.width == 0 or not box.overlaps(inside):   # a tick label outside the view is never drawn
            continue
        shown = text.get_fontsize() * scale
        if shown < min_pt - 1e-9:
            small.append((text.get_text()[:40], round(shown, 1)))
    return small


def _check_open_figures(result=None) -> None:
    import matplotlib.pyplot as plt

    cell = getattr(getattr(result, "info", None), "raw_cell", "") or ""
    for num in plt.get_fignums():
        fig = plt.figure(num)
        small = small_labels(fig)
        if small:
            _FOUND.append({"cell": cell.strip().splitlines()[0][:60] if cell.strip() else "",
                           "width_in": round(float(fig.get_size_inches()[0]), 2), "small": small[:6],
                           "count": len(small)})
        plt.close(fig)


def install() -> None:
    """Measure the figures of every later cell of this IPython kernel."""
    from IPython import get_ipython

    get_ipython().events.register("post_run_cell", _check_open_figures)


def report() -> list:
    return list(_FOUND)
