"""Regenerate the student notebooks in exercises/ (stubs, no solutions), then execute them.

    python exercises/make_notebooks.py

Each notebook: the paper's sentence, the shapes, hints, a stub cell per function (tagged
``stub`` with ``metadata.exercise``; tests/test_exercise_notebooks.py replaces it with the
library's solution) and a check cell that prints what :func:`attention_np.exercises.check` finds.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import attention_np.exercises as ex

HERE = Path(__file__).resolve().parent

NOTEBOOKS = {
    "01_softmax": ("The stable softmax and its backward", {
        "softmax": ["Subtracting any constant from a row leaves its softmax unchanged.",
                    "Which constant makes the largest exponent exactly 0?",
                    "Keep the input's dtype: a float32 input gives a float32 output."],
        "softmax_backward": ["Write the Jacobian of one row, dp_i/dx_j, on paper first.",
                             "Never build it: the product with dp collapses to one row sum.",
                             "The checker also compares with central differences of softmax."]}),
    "02_masks": ("Causal and padding masks", {
        "causal_mask": ["Convention: True = may attend.",
                        "With L != S, 'bottom_right' treats the L queries as the last L positions.",
                        "np.tri has an offset argument k."],
        "padding_mask": ["One row per sequence, one column per key.",
                         "Compare np.arange(S) with the lengths, broadcast."]}),
    "03_attention": ("Eq. (1), forward and backward", {
        "attention": ["Scores are (..., L, S); the softmax runs over the keys.",
                      "Masked scores must get weight exactly 0, and a row with no allowed key "
                      "returns 0, not NaN.",
                      "k and v may have fewer leading axes than q (broadcasting)."],
        "attention_backward": ["Undo the forward lines last to first: out = P v, P = softmax(S), "
                               "S = q k^T * scale.",
                               "A gradient has the shape of its input: sum over axes that were "
                               "broadcast."]}),
    "04_multihead": ("Multi-head attention", {
        "split_heads": ["Head i owns feature columns [i*d, (i+1)*d).",
                        "reshape, then swap two axes."],
        "merge_heads": ["The inverse of split_heads."],
        "mha_forward": ["Project, split, attend per head, merge, project again.",
                        "d_k is the width of one head."],
        "mha_backward": ["The backward of a split is a merge, and vice versa.",
                         "A bias added at every position gets the sum of the gradients over "
                         "every position."]}),
    "05_tiled_attention": ("The online-softmax tiled forward (beyond the paper)", {
        "tiled_attention": ["Loop over key blocks only; everything inside is vectorized.",
                            "Keep per query: the running max m, the running sum l and the running "
                            "output.",
                            "When m grows, whatever was computed against the old m must be "
                            "rescaled."]}),
    "06_kv_cache": ("One decoding step with a KV cache (beyond the paper)", {
        "decode_step": ["Project only the new position; the cache holds the earlier keys and "
                        "values, already projected and split into heads.",
                        "The new query is the last position: which keys may it see?"]}),
    "07_positions": ("Sinusoidal positional encodings (§3.5)", {
        "sinusoidal": ["Columns 2i and 2i+1 share one frequency.",
                       "Build the (length, d_model/2) table of angles by broadcasting."]}),
}


def stub_source(name: str) -> str:
    e = ex.EXERCISES[name]
    doc = inspect.getdoc(e.reference) or ""
    doc = "\n".join(("    " + line).rstrip() for line in doc.splitlines()).lstrip()
    return (f"def {e.signature}:\n    \"\"\"{doc}\"\"\"\n"
            f"    raise NotImplementedError  # your code here")


def build(stem: str, title: str, exercises: dict) -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_markdown_cell(
        f"# Exercise {stem[:2]}: {title}\n\n"
        "Write each function below in vectorized NumPy (no loops over batch, heads or "
        "positions), then run its check cell. The checker runs your function on cases "
        "including the edges (fully masked rows, huge logits, broadcasting, L != S, float32) "
        "and, when your answer matches a known mistake, names it and gives a hint."),
        nbformat.v4.new_code_cell(
            "import numpy as np  # noqa: F401 (your solutions use it)\n\n"
            "from attention_np.exercises import check")]
    for name, hints in exercises.items():
        e = ex.EXERCISES[name]
        cells.append(nbformat.v4.new_markdown_cell(
            f"## `{e.signature}`\n\n> {e.paper}\n\n**Shapes and contract:** see the docstring "
            "in the cell below.\n\n**Hints**\n\n" + "\n".join(f"- {h}" for h in hints)))
        stub = nbformat.v4.new_code_cell(stub_source(name))
        stub.metadata.update(tags=["stub"], exercise=name)
        cells.append(stub)
        check_cell = nbformat.v4.new_code_cell(f'print(check("{name}", {ex.function_name(name)}))')
        check_cell.metadata.update(tags=["check"], exercise=name)
        cells.append(check_cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main() -> None:
    for stem, (title, exercises) in NOTEBOOKS.items():
        nb = build(stem, title, exercises)
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(HERE)}}).execute()
        nbformat.write(nb, HERE / f"{stem}.ipynb")
        print("wrote", HERE / f"{stem}.ipynb")


if __name__ == "__main__":
    main()
