"""How a transformers layer that attention_np cannot express is refused: by what it computes.

The lowest module of :mod:`attention_np.interop.transformers`: the layer readers
(:mod:`.layer_reading`, :mod:`.weights`) both refuse through it, so neither imports the other for it.
"""

from __future__ import annotations


class UnsupportedLayer(TypeError):
    """A module that is not an attention layer attention_np can express; the message names what
    it computes that the spec cannot."""


def check_module(module, name: str = "module", what: str = "an attention layer") -> None:
    """``module`` is a ``torch.nn.Module`` (a ``TypeError`` naming ``name`` otherwise): checked
    before anything is read from it, so that a string or an array is not refused by what
    reading it trips over."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(module, torch.nn.Module):
        raise TypeError(f"{name} must be {what} (a torch.nn.Module), got "
                        f"{type(module).__name__} ({module!r:.40})")


def refuse(module, feature: str):
    """Raise :class:`UnsupportedLayer` for ``module``, naming the ``feature`` it computes.

    Parameters
    ----------
    module : torch.nn.Module
        The layer refused.
    feature : str
        What it computes that attention_np cannot express (a non-empty sentence).

    Raises
    ------
    UnsupportedLayer
        Always: that is this function's job (a ``TypeError`` naming ``module`` or ``feature``
        instead when they are not a module and a non-empty str).
    """
    check_module(module)
    if not isinstance(feature, str) or not feature:
        raise TypeError(f"feature must be a non-empty str, got {type(feature).__name__} ({feature!r:.40})")
    raise UnsupportedLayer(f"{type(module).__name__}: {feature} is not supported (attention_np "
                           f"reads a layer by what it computes; see docs/frameworks.md)")


__all__ = ["UnsupportedLayer", "refuse"]
