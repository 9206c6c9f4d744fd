"""Optional dependencies: which extra installs each one, and one import that says so when missing.

The computing layers need NumPy alone; plots, frameworks and the pretrained model import their
packages through :func:`import_optional`, so every missing piece is answered with the extra
that brings it and the ``pip`` command that installs it (torch always from its CPU index).
"""

from __future__ import annotations

import importlib
import re

# PyTorch's CPU build, installed before any extra that lists torch: from PyPI, `torch` is the
# CUDA build (triton and the nvidia-* packages, gigabytes). Any torch >= 2.5 works.
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
# The optional extras of pyproject.toml the hints install (tests/api/test_packaging.py holds these
# equal to pyproject.toml's [project.optional-dependencies]).
EXTRAS = {
    "plots": ("matplotlib>=3.7",),
    "frameworks": ("torch>=2.5", "jax>=0.4.30", "flax>=0.10"),
    "transformers": ("torch>=2.5", "transformers>=5.15"),
    "pretrained": ("safetensors>=0.4", "tokenizers>=0.15"),
}
# top-level module -> the extra that brings it
EXTRA_OF = {
    "matplotlib": "plots",
    "safetensors": "pretrained", "tokenizers": "pretrained",
    "torch": "frameworks", "jax": "frameworks", "flax": "frameworks",
    "transformers": "transformers",
}
# top-level module -> what installs it alone, where its extra also brings packages it does not need
# (JAX and Flax need no torch: their hint must not install it)
ALONE = {"jax": ("jax>=0.4.30",), "flax": ("jax>=0.4.30", "flax>=0.10")}
# top-level module -> the oldest release the code that imports it works with (the test suite's
# transformers tests pass on 5.15.0 and fail on 5.14.1: T5 has no sdpa attention before 5.15)
MINIMUM = {"transformers": "5.15"}


def extra_command(extra: str) -> str:
    """The command that installs the packages of an extra, torch (if listed) from its CPU index
    first. It names the packages rather than ``attention-np[extra]``, so the same line works from
    a checkout, from an installed wheel, and with attention_np not installed at all."""
    packages = [p for p in EXTRAS[extra] if not p.startswith("torch")]
    torch_first = len(packages) < len(EXTRAS[extra])
    rest = "pip install " + " ".join(f'"{p}"' for p in packages) if packages else ""
    return " && ".join(c for c in (TORCH_CPU if torch_first else "", rest) if c)


def install_hint(module: str) -> str:
    """The command that installs ``module`` (its top-level package) and the rest of its extra,
    torch always from its CPU index, e.g. for matplotlib ``pip install "matplotlib>=3.7"``, for
    transformers ``pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && pip
    install "transformers>=5.15"``; for torch alone the first of those two commands. JAX and Flax
    install without torch (:data:`ALONE`): ``pip install "jax>=0.4.30" "flax>=0.10"`` for flax."""
    top = module.split(".")[0]
    if top == "torch":
        return TORCH_CPU
    if top in ALONE:
        return "pip install " + " ".join(f'"{p}"' for p in ALONE[top])
    if top in EXTRA_OF:
        return extra_command(EXTRA_OF[top])
    return f"pip install {top}"


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version string: ``"5.15.0.dev0"`` -> ``(5, 15, 0)``."""
    match = re.match(r"\d+(\.\d+)*", str(version))
    if match is None:
        raise ValueError(f"version must start with a number, got {version!r}")
    return tuple(int(n) for n in match.group().split("."))


def import_optional(module: str, needed_by: str, minimum: str | None = None):
    """Import ``module``, or raise ImportError naming what needs it and how to install it.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"matplotlib.pyplot"``.
    needed_by : str
        What needs it, for the message, e.g. ``"python -m attention_np figures"``.
    minimum : str, optional
        The oldest release that works, e.g. ``"5.15"`` (default: the package's entry in
        :data:`MINIMUM`): an older ``__version__`` of the top-level package is an ImportError
        naming both versions and the upgrade command.
    """
    try:
        imported = importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None) or module
        top = missing.split(".")[0]
        extra = f" (the [{EXTRA_OF[top]}] extra)" if top in EXTRA_OF else ""
        raise ImportError(f"{needed_by} needs {top}{extra}, which is not installed: "
                          f"{install_hint(missing)}") from e
    top = module.split(".")[0]
    minimum = MINIMUM.get(top) if minimum is None else minimum
    if minimum is not None:
        found = getattr(importlib.import_module(top), "__version__", None)
        if found is not None and version_tuple(found) < version_tuple(minimum):
            raise ImportError(f"{needed_by} needs {top} >= {minimum}, found {found}: "
                              f'pip install -U "{top}>={minimum}"')
    return imported
