"""Every computation of Eq. (1) behind one small protocol, each declaring what it can do.

A kernel is called as ``out, cache = forward(q, k, v, plan)`` and ``grads = backward(dout,
cache)``, one :class:`~attention_np.kernels.grads.Grads` whatever the options: ``plan``
(:class:`Plan`) carries the mask and every option of one call, built once by the caller
(multi-head attention builds it from its :class:`attention_np.AttentionSpec`).
Options a kernel cannot do are refused by name (:func:`check_supports`), never ignored, unlike
transformers' attention interface, which drops keyword arguments a kernel does not use.

=============  ===================================================================  =========
kernel         what it is                                                           supports
=============  ===================================================================  =========
``reference``  Eq. (1) line by line (:mod:`.reference`), with bias and window       bias, window
``fused``      fewer passes, one (L, S) buffer (:mod:`.fused`, :mod:`.blocked`);     everything
               with sinks, one more term in each row's softmax (:mod:`.sinks`)      but sinks + dropout
``tiled``      key blocks and an online softmax (:mod:`.tiled`), no (L, S) array     all but dropout
=============  ===================================================================  =========

The tests hold every kernel equal to :mod:`attention_np.paper` on one case matrix
(``tests/kernels/test_registry.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np.kernels import fused, reference, sink_logits, tiled
from attention_np.kernels.grads import Grads
from attention_np.kernels.plan import OPTIONS, Plan


@dataclass(frozen=True)
class Kernel:
    """One computation of Eq. (1): ``forward(q, k, v, plan) -> (out, cache)`` and
    ``backward(dout, cache) -> Grads`` (:class:`~attention_np.kernels.grads.Grads`: ``dq, dk,
    dv``, and ``dbias``, ``dsinks`` None when the plan had no bias, no sinks)."""

    name: str
    forward: object
    backward: object
    supports: frozenset
    refuses_together: tuple = ()       # pairs of options it does not combine


def _reference_backward(dout, cache) -> Grads:
    dq, dk, dv, dbias = reference.sdpa_backward(dout, cache, return_dbias=True)
    return Grads(dq=dq, dk=dk, dv=dv, dbias=dbias)


def _fused_forward(q, k, v, p: Plan):
    if p.sinks is not None:
        return sink_logits.sinks_plan(q, k, v, p)
    return fused.sdpa_plan(q, k, v, p)


def _fused_backward(dout, cache) -> Grads:
    if isinstance(cache, sink_logits.SinksCache):
        return sink_logits.backward(dout, cache, dbias=True)
    return fused.backward(dout, cache, dbias=True)


KERNELS = {
    "reference": Kernel("reference", reference.sdpa_plan, _reference_backward,
                        frozenset({"bias", "window"})),
    "fused": Kernel("fused", _fused_forward, _fused_backward, frozenset(OPTIONS),
                    refuses_together=(("sinks", "dropout"),)),
    "tiled": Kernel("tiled", tiled.tiled_plan, tiled.backward, frozenset(OPTIONS) - {"dropout"}),
}


def get_kernel(name: str) -> Kernel:
    """The kernel registered as ``name``."""
    if not isinstance(name, str) or name not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {name!r}")
    return KERNELS[name]


def check_supports(kernel: Kernel, plan: Plan) -> None:
    """Raise a ``ValueError`` naming every option of ``plan`` that ``kernel`` cannot do."""
    used = plan.options()
    missing = [name for name in used if name not in kernel.supports]
    if missing:
        able = sorted(n for n, kern in KERNELS.items() if set(used) <= kern.supports)
        raise ValueError(f"kernel {kernel.name!r} cannot do {', '.join(missing)} (it supports "
                         f"{', '.join(sorted(kernel.supports)) or 'the paper alone'}); "
                         f"kernels that can: {able or 'none in one call'}")
    for a, b in kernel.refuses_together:
        if a in used and b in used:
            raise ValueError(f"kernel {kernel.name!r} cannot combine {a} with {b}")


def attend(kernel: str, q, k, v, plan: Plan):
    """``out, cache`` of Eq. (1) by the kernel named ``kernel``, after checking it can do
    ``plan``; the cache remembers its kernel for :func:`attend_backward`."""
    check_supports(get_kernel(kernel), plan)
    return run(kernel, q, k, v, plan)


def run(kernel: str, q, k, v, plan: Plan):
    """:func:`attend` for a plan whose support the caller has checked (:func:`check_supports`,
    once per call, before any work): multi-head attention's step 3."""
    kern = get_kernel(kernel)
    out, cache = kern.forward(q, k, v, plan)
    return out, KernelCache(kern.name, cache)


@dataclass(frozen=True)
class KernelCache:
    """A kernel's cache with the kernel's name; ``.weights`` as the kernel's cache has it."""

    kernel: str
    cache: object

    @property
    def weights(self) -> np.ndarray:
        if not hasattr(self.cache, "weights"):       # the tiled kernel never holds (L, S)
            raise AttributeError(f"kernel {self.kernel!r} keeps no (L, S) attention weights; run "
                                 f"the 'fused' or 'reference' kernel to read them")
        return self.cache.weights


def attend_backward(dout, cache: KernelCache):
    """Backward of :func:`attend`: one :class:`~attention_np.kernels.grads.Grads`."""
    return KERNELS[cache.kernel].backward(dout, cache.cache)
