"""Optional dependencies: which extra installs each one, and one import that says so when missing.

The computing layers need NumPy alone; plots, frameworks and the pretrained model import their
packages through :func:`import_optional`, so every missing piece is answered with the ``pip``
command that installs it.
"""

from __future__ import annotations

import importlib

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


def install_hint(module: str) -> str:
    """The command that installs ``module`` (its top-level package), e.g. for matplotlib
    ``pip install "attention-np[plots]"``."""
    top = module.split(".")[0]
    return INSTALL.get(top, f"pip install {top}")


def import_optional(module: str, needed_by: str):
    """Import ``module``, or raise ImportError naming what needs it and how to install it.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"matplotlib.pyplot"``.
    needed_by : str
        What needs it, for the message, e.g. ``"python -m attention_np figures"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None) or module
        raise ImportError(f"{needed_by} needs {missing.split('.')[0]}, which is not installed: "
                          f"{install_hint(missing)}") from e
