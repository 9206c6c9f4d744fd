"""Optional dependencies: which extra installs each one, and one import that says so when missing.

The computing layers need NumPy alone; plots, frameworks and the pretrained model import their
packages through :func:`import_optional`, so every missing piece is answered with the ``pip``
command that installs it.
"""

from __future__ import annotations

import importlib
import re

# top-level module -> the command that installs it
INSTALL = {
    "matplotlib": 'pip install "attention-np[plots]"',
    "safetensors": 'pip install "attention-np[pretrained]"',
    "tokenizers": 'pip install "attention-np[pretrained]"',
    "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    "jax": 'pip install "attention-np[frameworks]"',
    "flax": 'pip install "attention-np[frameworks]"',
    "transformers": 'pip install "attention-np[transformers]"',
    "nbclient": 'pip install "attention-np[test]"',
    "pytest": 'pip install "attention-np[test]"',
}
# top-level module -> the oldest release the code that imports it works with (the test suite's
# transformers tests pass on 5.15.0 and fail on 5.14.1: T5 has no sdpa attention before 5.15)
MINIMUM = {"transformers": "5.15"}


def install_hint(module: str) -> str:
    """The command that installs ``module`` (its top-level package), e.g. for matplotlib
    ``pip install "attention-np[plots]"``."""
    top = module.split(".")[0]
    return INSTALL.get(top, f"pip install {top}")


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
        raise ImportError(f"{needed_by} needs {missing.split('.')[0]}, which is not installed: "
                          f"{install_hint(missing)}") from e
    top = module.split(".")[0]
    minimum = MINIMUM.get(top) if minimum is None else minimum
    if minimum is not None:
        found = getattr(importlib.import_module(top), "__version__", None)
        if found is not None and version_tuple(found) < version_tuple(minimum):
            raise ImportError(f"{needed_by} needs {top} >= {minimum}, found {found}: "
                              f"{install_hint(top).replace('pip install', 'pip install -U', 1)}")
    return imported
