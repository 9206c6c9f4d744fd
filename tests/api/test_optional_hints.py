"""A missing optional dependency is answered with its extra and a pip line that keeps torch on its
CPU build and works from a checkout and from an installed package alike (it names the packages)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_np._optional import EXTRA_OF, EXTRAS, TORCH_CPU, import_optional, install_hint

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def test_the_hints_install_the_extras_of_pyproject():
    tomllib = pytest.importorskip("tomllib")
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for extra, packages in EXTRAS.items():
        assert list(packages) == extras[extra], extra
    for module, extra in EXTRA_OF.items():
        assert any(re.split(r"[<>=]", p)[0] == module for p in EXTRAS[extra]), (module, extra)


@pytest.mark.parametrize("module", sorted(EXTRA_OF))
def test_no_hint_installs_torch_from_pypi(module):
    hint = install_hint(module)
    # torch comes only from the CPU index, and before anything that could pull it in
    assert not re.search(r'"torch[>=]', hint), hint
    if "torch" in EXTRAS[EXTRA_OF[module]]:
        assert hint.startswith(TORCH_CPU + " && ") or hint == TORCH_CPU, hint
    assert "attention-np[" not in hint and ".[" not in hint      # no install of the package itself
    if module != "torch":
        assert f'"{module}>=' in hint


@pytest.mark.parametrize("hidden, call", [
    ("torch", lambda: __import__("attention_np.interop", fromlist=["x"]).compare_mha(
        None, np.zeros((1, 2, 4)))),
    ("torch", lambda: __import__("attention_np.interop.torch", fromlist=["x"]).params_to_torch_mha(
        __import__("attention_np").init_mha_params(4, 2, rng=0), 2)),
    ("torch", lambda: __import__("attention_np.interop.torch", fromlist=["x"]).to_torch_sdpa(
        *np.zeros((3, 1, 2, 4)))),
    ("torch", lambda: __import__("attention_np.interop", fromlist=["x"]).compare_transformers_attention(
        None, np.zeros((1, 2, 4)))),
    ("jax", lambda: __import__("attention_np.interop", fromlist=["x"]).compare_flax_mha(
        None, {}, np.zeros((1, 2, 4)))),
    ("jax", lambda: __import__("attention_np.interop.jax", fromlist=["x"]).forward_backward(
        *np.zeros((4, 1, 2, 4)))),
    ("jax", lambda: __import__("attention_np.interop.jax", fromlist=["x"]).x64().__enter__()),
    ("jax", lambda: __import__("attention_np.interop.flax", fromlist=["x"]).flax_mha(
        __import__("attention_np").init_mha_params(4, 2, rng=0), 2)),
    ("flax", lambda: __import__("attention_np.interop.flax", fromlist=["x"]).flax_mha(
        __import__("attention_np").init_mha_params(4, 2, rng=0), 2)),
], ids=["compare_mha", "params_to_torch_mha", "to_torch_sdpa", "compare_transformers_attention",
        "compare_flax_mha", "jax.forward_backward", "jax.x64", "flax_mha(no jax)", "flax_mha(no flax)"])
def test_an_interop_entry_without_its_framework_names_the_extra(monkeypatch, hidden, call):
    monkeypatch.setitem(sys.modules, hidden, None)          # as if not installed
    for name in [m for m in sys.modules if m.startswith(hidden + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError) as info:
        call()
    message = str(info.value)
    assert f"needs {hidden} (the [{EXTRA_OF[hidden]}] extra), which is not installed: " in message
    assert message.endswith(install_hint(hidden))
    # torch comes from its CPU index; JAX and Flax need no torch, and their line installs none
    assert (CPU_INDEX in message) == (hidden == "torch") and ("torch" in message) == (hidden == "torch")


def test_import_optional_names_the_module_and_what_needs_it(monkeypatch):
    for name in ["matplotlib"] + [m for m in sys.modules if m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)     # as if not installed, even once imported
    with pytest.raises(ImportError, match=r'^figures needs matplotlib \(the \[plots\] extra\), which is '
                                          r'not installed: pip install "matplotlib>=3\.7"$'):
        import_optional("matplotlib.pyplot", "figures")


def test_diff_with_no_framework_demonstrates_no_difference():
    # attention_np alone shows no difference from anything: the demonstration is "not run",
    # never counted as "1/1 known differences demonstrated"
    from attention_np.interop import known
    for demo in (known.fully_masked_row(()), known.jax_float32_softmax(()), known.torch_mha_is_causal(())):
        assert demo.not_run is not None, demo.title
