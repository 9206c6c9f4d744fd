"""Deprecated in 0.2.0: the modules of ``attention_np.efficient`` moved (see CHANGELOG.md).

Tiled attention is in :mod:`attention_np.kernels` (``tiled``, ``tiled_forward``,
``tiled_backward``, ``tiles``); decoding with a KV cache in :mod:`attention_np.compose`
(``decode``, ``cross_decode``). ``attention_np.efficient.X`` stays an alias for one release.
"""

import sys as _sys
from importlib import import_module as _import_module

from attention_np._checks import warn_deprecated as _warn_deprecated

MOVED = {
    "flash": "attention_np.kernels.tiled", "flash_forward": "attention_np.kernels.tiled_forward",
    "flash_backward": "attention_np.kernels.tiled_backward", "tiles": "attention_np.kernels.tiles",
    "kv_cache": "attention_np.compose.decode", "cross_cache": "attention_np.compose.cross_decode",
}

_warn_deprecated("attention_np.efficient is deprecated since 0.2.0 and will be removed in 0.3: import "
                 "from attention_np.kernels or attention_np.compose (CHANGELOG.md lists each move)")

for _old, _new in MOVED.items():
    _module = _import_module(_new)
    _sys.modules[f"{__name__}.{_old}"] = _module
    globals()[_old] = _module
