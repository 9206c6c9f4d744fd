"""``import attention_np as an`` gives every subpackage as an attribute, imported on first use, so
the import itself needs NumPy alone."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("torch", "jax", "flax", "matplotlib", "transformers", "safetensors", "tokenizers")


def test_import_attention_np_imports_no_optional_dependency():
    code = ("import sys, attention_np\n"
            f"print(sorted(m for m in {OPTIONAL!r} if m in sys.modules))\n"
            "print(sorted(n for n in ('pretrained', 'interop', 'viz', 'cli') "
            "if 'attention_np.' + n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out == ["[]", "[]"]           # no framework, no plots, and the lazy subpackages unloaded


@pytest.mark.parametrize("name", ["nn", "studies", "pretrained", "interop", "viz", "cli", "exercises"])
def test_every_subpackage_is_an_attribute(name):
    """(The 0.1 paths ``core`` and ``efficient`` are gone: tests/api/test_removed_names.py.)"""
    import importlib

    import attention_np as an

    assert getattr(an, name) is importlib.import_module(f"attention_np.{name}")
    assert name in dir(an)


def test_an_unknown_attribute_is_still_an_attribute_error():
    import attention_np as an

    with pytest.raises(AttributeError, match="has no attribute 'bogus'"):
        an.bogus  # noqa: B018
