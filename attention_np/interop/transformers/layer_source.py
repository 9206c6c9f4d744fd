"""What a transformers layer's code says: its ``forward``'s parameters and source, the functions of its
family's modeling module, and its layer type (the readers' shared probes of the code, not its weights).

Reads attributes and source text: imports neither torch nor transformers itself.
"""

from __future__ import annotations

import inspect
import sys


def forward_parameters(module) -> tuple:
    """The names of the layer's ``forward`` parameters."""
    return tuple(inspect.signature(module.forward).parameters)


def forward_source(module) -> str:
    """The source of the layer's class's ``forward`` ("" when it has none)."""
    try:
        return inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return ""


def function_source(fn) -> str:
    """A function's source ("" when it has none or is None)."""
    try:
        return inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return ""


def family_function(module, name: str):
    """A function of the layer's modeling module (``rotate_half``, ``apply_rotary_pos_emb``):
    its class's, or for a subclass its nearest base's that has one; None if none has."""
    for cls in type(module).__mro__:
        fn = getattr(sys.modules.get(cls.__module__), name, None)
        if fn is not None:
            return fn
    return None


def layer_type(module, cfg) -> str | None:
    """The layer's type (``"sliding_attention"``, ``"full_attention"``, ...): its own
    ``layer_type``, else ``config.layer_types[layer_idx]``; None for a model without types."""
    kind = getattr(module, "layer_type", None)
    types, i = getattr(cfg, "layer_types", None), getattr(module, "layer_idx", None)
    if kind is None and isinstance(types, (list, tuple)) and isinstance(i, int) and \
            0 <= i < len(types):
        kind = types[i]
    return kind

