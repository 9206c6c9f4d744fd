"""How a transformers layer that attention_np cannot express is refused: by what it computes.

The lowest module of :mod:`attention_np.interop.transformers`: the layer readers
(:mod:`.layer_reading`, :mod:`.weights`) both refuse through it, so neither imports the other for it.
"""

from __future__ import annotations


class UnsupportedLayer(TypeError):
    """A module that is not an attention layer attention_np can express; the message names what
    it computes that the spec cannot."""


def refuse(module, feature: str):
    """Raise :class:`UnsupportedLayer` for ``module``, naming the ``feature`` it computes."""
    raise UnsupportedLayer(f"{type(module).__name__}: {feature} is not supported (attention_np "
                           f"reads a layer by what it computes; see docs/frameworks.md)")


__all__ = ["UnsupportedLayer", "refuse"]
