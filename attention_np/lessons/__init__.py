"""What the lesson notebooks run besides the library: their example data, the trained runs they
show, and timing whose verdicts survive a busy machine.

- :mod:`.examples`          the sentence of lesson 1, the d_k sweeps of lesson 2, the trained runs
- :mod:`.timing`            one BLAS thread, thread CPU time, interleaved repeats
- :mod:`.reversal_schedule`, :mod:`.dates_schedule`  the training schedules the lessons use

The §3.2 claims those lessons measure are in :mod:`attention_np.studies`.
"""

import importlib as _importlib
import pkgutil as _pkgutil

#: the modules of this package, reachable as attributes and imported on first use
MODULES = tuple(m.name for m in _pkgutil.iter_modules(__path__))


def __getattr__(name):
    if name in MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *MODULES})
