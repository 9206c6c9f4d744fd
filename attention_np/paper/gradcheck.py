r"""Checking a hand-written backward against central finite differences, in float64.

For ``out = f(x)`` and a random upstream gradient ``dout``, the loss
:math:`\ell = \sum \mathrm{out} \odot \mathrm{dout}` has the gradient the backward returns, and

.. math:: \frac{\partial \ell}{\partial x_i} \approx
          \frac{\ell(x + \varepsilon e_i) - \ell(x - \varepsilon e_i)}{2\varepsilon}

with an error :math:`O(\varepsilon^2)`. ``dout`` is random, never ``ones``: the softmax backward
of a constant upstream gradient is exactly 0 and would hide a bug.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from attention_np.paper._validate import check_arity, check_callable, check_int, check_real


@dataclass
class GradcheckResult:
    """``errors[name] = (max |analytic - numerical|, max |numerical|)`` per input (``"params.W_q"``
    for an entry of a dict input); ``failed`` lists the names out of tolerance; ``ok`` if none."""

    errors: dict = field(default_factory=dict)
    atol: float = 0.0
    rtol: float = 0.0
    failed: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        lines = [f"gradcheck {'passed' if self.ok else 'FAILED'} "
                 f"(|analytic - numerical| <= {self.atol:g} + {self.rtol:g} * |numerical|)"]
        for name, (err, size) in self.errors.items():
            flag = "  <-- FAILED" if name in self.failed else ""
            lines.append(f"  {name:>10}: max abs error {err:.3e} (max |grad| {size:.3e}){flag}")
        return "\n".join(lines)


def numerical_gradient(loss, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of the scalar ``loss()`` w.r.t. the array ``x``.

    ``x`` is nudged in place one entry at a time and restored (two calls of ``loss`` per entry,
    and one first, to check that it returns a number: keep ``x`` small).

    Parameters
    ----------
    loss : callable, ``loss()`` -> a real number (a scalar, not an array), reading ``x``
    x : float ndarray (...), writeable: the very array ``loss`` reads, nudged in place and restored
    eps : float, the step (> 0)

    Returns
    -------
    grad : the shape and dtype of ``x``
    """
    check_callable(loss, "loss", " taking no arguments and returning a real number", arity=0)
    if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.floating):
        got = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        raise TypeError(f"x must be a floating-point ndarray, the very array loss() reads (it is "
                        f"nudged in place: a scalar or a copy would change nothing), got {got}")
    if not x.flags.writeable:
        raise ValueError(f"x must be writeable: it is nudged in place (and restored), got a "
                         f"read-only array of shape {x.shape}; pass the array loss() reads, "
                         f"made writeable (e.g. a copy that loss reads)")
    check_real(eps, "eps", positive=True)
    _check_scalar_loss(loss)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):      # index x itself: a reshape of a strided view (a transpose) is a copy
        old = x[i]
        x[i] = old + eps
        plus = loss()
        x[i] = old - eps
        minus = loss()
        x[i] = old
        grad[i] = (plus - minus) / (2 * eps)
    return grad


def _check_scalar_loss(loss) -> float:
    """``loss()`` at the unchanged input is one real number; else a ``TypeError`` naming ``loss``
    (an array would be summed into the wrong gradient, or fail deep inside)."""
    value = loss()
    if isinstance(value, (bool, np.bool_)) or not (
            isinstance(value, (int, float, np.integer, np.floating))
            or (isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "fiu")):
        shape = f" of shape {np.shape(value)}" if hasattr(value, "shape") else ""
        raise TypeError(f"loss must return a real number (a scalar), got {type(value).__name__}"
                        f"{shape}: reduce it, e.g. float(np.sum(out * dout))")
    return float(value)


def _leaves(inputs, names):
    """``(name, (position, key), array)`` for each array, and each array inside a dict input."""
    for i, (x, name) in enumerate(zip(inputs, names, strict=True)):
        if isinstance(x, dict):
            yield from ((f"{name}.{key}", (i, key), a) for key, a in x.items())
        else:
            yield name, (i, None), x


def _positional_names(forward, n: int) -> tuple:
    """The names of ``forward``'s first ``n`` positional parameters, else ``("0", "1", ...)``."""
    try:
        params = list(inspect.signature(forward).parameters.values())[:n]
    except (TypeError, ValueError):                     # no signature to read
        params = []
    names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return names if len(names) == n else tuple(str(i) for i in range(n))


def _copied_inputs(inputs) -> tuple:
    """A float64 copy of ``inputs``, a tuple of arrays or dicts of arrays (the caller's are
    never nudged)."""
    if not isinstance(inputs, tuple):
        shape = f" of shape {np.shape(inputs)}" if hasattr(inputs, "shape") else ""
        hint = " (tuple(inputs) if these are the inputs)" if isinstance(inputs, list) else ""
        raise TypeError(f"inputs must be a tuple of the forward's inputs, one per positional "
                        f"argument, e.g. (x,) for one input; got {type(inputs).__name__}{shape}{hint}")
    return tuple({key: np.array(a) for key, a in x.items()} if isinstance(x, dict) else np.array(x)
                 for x in inputs)


def _input_names(forward, inputs: tuple, names) -> tuple:
    """One name per input (``names``, else ``forward``'s parameters'), each input float64."""
    if names is not None and (isinstance(names, str) or not isinstance(names, (tuple, list))
                              or not all(isinstance(n, str) for n in names)):
        raise TypeError(f"names must be a sequence of str, one per input, got {names!r}")
    names = _positional_names(forward, len(inputs)) if names is None else tuple(names)
    if len(names) != len(inputs):
        raise ValueError(f"names has {len(names)} entries {names} for {len(inputs)} inputs")
    for name, _, x in _leaves(inputs, names):
        if x.dtype != np.float64:
            raise TypeError(f"gradcheck needs float64 inputs (central differences in lower "
                            f"precision are noise); input {name} is {x.dtype}")
    return names


def gradcheck(forward, backward, inputs, *, names=None, seed: int = 0, eps: float = 1e-6,
              atol: float = 1e-8, rtol: float = 1e-6) -> GradcheckResult:
    """Compare ``backward`` with central differences of ``forward``, in float64.

    Parameters
    ----------
    forward : callable, ``forward(*inputs)`` -> ``out`` or ``(out, cache)``
    backward : callable, ``backward(dout, cache)`` -> one gradient per input, in the same
        structure (a dict for a dict of arrays). A ``forward`` that returns ``out`` alone gives
        ``backward(dout, out)``: ``gradcheck(softmax, softmax_backward, (x,))`` works as written
    inputs : tuple of float64 arrays or dicts of them, one per positional argument of
        ``forward`` (``(x,)`` for one input); copied, never modified
    names : sequence of str, optional
        Default: ``forward``'s positional parameter names (``q, k, v``), else ``0, 1, ...``.
    seed : int, seed of the random upstream gradient
    eps, atol, rtol : float, the step and ``|analytic - numerical| <= atol + rtol * |numerical|``

    Returns
    -------
    GradcheckResult, ``ok`` when every gradient matches; ``print`` it for each input's error.
    """
    check_callable(forward, "forward", " forward(*inputs) -> out or (out, cache)")
    check_callable(backward, "backward", " backward(dout, cache) -> gradients", arity=2)
    check_real(eps, "eps", positive=True)                 # the step: a 0 divides by 0
    check_real(atol, "atol")                             # tolerances: a negative one fails all
    check_real(rtol, "rtol")
    check_int(seed, "seed", minimum=0)
    inputs = _copied_inputs(inputs)
    check_arity(forward, "forward", len(inputs))          # forward(*inputs)
    names = _input_names(forward, inputs, names)

    def run():
        result = forward(*inputs)
        return result if isinstance(result, tuple) else (result, result)   # no cache: out

    out, cache = run()
    dout = np.random.default_rng(seed).standard_normal(np.shape(out))
    analytic = backward(dout, cache)
    analytic = analytic if isinstance(analytic, tuple) else (analytic,)
    if len(analytic) != len(inputs):
        raise ValueError(f"backward returned {len(analytic)} gradients for {len(inputs)} inputs")

    def loss():
        return float(np.sum(run()[0] * dout))

    result = GradcheckResult(atol=atol, rtol=rtol)
    for name, (i, key), x in _leaves(inputs, names):
        got = analytic[i] if key is None else analytic[i][key]
        want = numerical_gradient(loss, x, eps)        # nudges x, an array forward reads
        if np.shape(got) != want.shape:
            raise ValueError(f"gradient {name} has shape {np.shape(got)}, input has {want.shape}")
        result.errors[name] = (float(np.max(np.abs(got - want), initial=0.0)),
                               float(np.max(np.abs(want), initial=0.0)))
        if not np.allclose(got, want, atol=atol, rtol=rtol):
            result.failed.append(name)
    return result
