"""The claims of §3.2, measured: footnote 4 (why 1/sqrt(d_k)), additive against dot-product
attention, the scoring functions compared on a task, what the heads of §3.2.2 learn, positional
schemes. Each returns numbers; :mod:`attention_np.viz` draws them. The lessons' example data and
timing are in :mod:`attention_np.lessons`.
"""

import importlib as _importlib
import pkgutil as _pkgutil

#: the modules of this package, reachable as attributes (``an.studies.positions.shift_matrix``)
#: and imported on first use
MODULES = tuple(m.name for m in _pkgutil.iter_modules(__path__))


def __getattr__(name):
    if name in MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *MODULES})
