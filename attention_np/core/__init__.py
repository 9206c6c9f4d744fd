"""Deprecated in 0.2.0: the modules of ``attention_np.core`` moved (see CHANGELOG.md).

``attention_np.core.X`` is kept for one release as an alias of the module's new home, so old
imports, and monkeypatching by the old dotted path, still work:

- §3.2 of the paper: :mod:`attention_np.paper`
- beyond the paper: :mod:`attention_np.variants`
- the computations of Eq. (1): :mod:`attention_np.kernels`
- where they meet (multi-head attention, decoding): :mod:`attention_np.compose`
"""

import sys as _sys
import types as _types
from importlib import import_module as _import_module

from attention_np._checks import warn_deprecated as _warn_deprecated

MOVED = {
    "_checks": "attention_np._checks", "optional": "attention_np._optional",
    "attention": "attention_np.kernels.reference", "blocked": "attention_np.kernels.blocked",
    "fused": "attention_np.kernels.fused", "threads": "attention_np.kernels.threads",
    "scores": "attention_np.kernels.scores", "sinks": "attention_np.kernels.sink_logits",
    "dropout": "attention_np.variants.dropout", "gqa": "attention_np.variants.gqa",
    "position_bias": "attention_np.variants.position_bias", "qk_norm": "attention_np.variants.qk_norm",
    "rope": "attention_np.variants.rope", "rope_scaling": "attention_np.variants.rope_scaling",
    "gradcheck": "attention_np.paper.gradcheck", "heads": "attention_np.paper.heads",
    "linear": "attention_np.paper.linear", "masks": "attention_np.paper.masks",
    "softmax": "attention_np.paper.softmax",
    "mha_params": "attention_np.compose.mha_params", "multihead": "attention_np.compose.mha",
}

_warn_deprecated("attention_np.core is deprecated since 0.2.0 and will be removed in 0.3: import from "
                 "attention_np.paper, .variants, .kernels or .compose (CHANGELOG.md lists each move)")

# Modules 0.2 split in two or more: the old path gets a module with the public names of all parts
SPLIT = {
    "masks": ("attention_np.paper.masks", "attention_np.variants.window", "attention_np.variants.lengths",
              "attention_np.kernels.guard"),
    "scores": ("attention_np.kernels.scores", "attention_np.variants.softcap"),
    "softmax": ("attention_np.paper.softmax", "attention_np.kernels.softmax_inplace"),
    "linear": ("attention_np.paper.linear", "attention_np.paper.params"),
}

for _old, _new in MOVED.items():
    _module = _import_module(_new)
    if _old in SPLIT:
        _merged = _types.ModuleType(f"{__name__}.{_old}", f"0.1 alias of {', '.join(SPLIT[_old])}")
        for _part in SPLIT[_old]:
            _merged.__dict__.update({k: v for k, v in vars(_import_module(_part)).items()
                                     if not k.startswith("__")})
        _module = _merged
    _sys.modules[f"{__name__}.{_old}"] = _module
    globals()[_old] = _module
