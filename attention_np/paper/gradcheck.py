r"""Check any forward/backward pair against central finite differences.

For a forward ``out = f(x)`` and a random upstream gradient ``dout``, the loss
:math:`\ell = \sum \mathrm{out} \odot \mathrm{dout}` has gradient

.. math:: \frac{\partial \ell}{\partial x_i} \approx
          \frac{\ell(x + \varepsilon e_i) - \ell(x - \varepsilon e_i)}{2\varepsilon}

with error :math:`O(\varepsilon^2)`. The upstream gradient is random, never ``ones``: the
softmax backward of a constant upstream gradient is exactly zero and would hide bugs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np


@dataclass
class GradcheckResult:
    """Per-input comparison of an analytic gradient with a numerical one.

    ``errors`` maps an input's name (``"q"``, ``"k"``, ... or ``"params.W_q"`` inside a dict; see
    :func:`gradcheck` for where the names come from) to
    ``(max_abs_error, max_abs_gradient)``.
    """

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


def _leaves(tree, names):
    """(name, index, array) for every array in a tuple whose items are arrays or dicts of arrays."""
    for i, (item, name) in enumerate(zip(tree, names, strict=True)):
        if isinstance(item, dict):
            for key, value in item.items():
                yield f"{name}.{key}", (i, key), value
        else:
            yield name, (i, None), item


def input_names(forward, n: int) -> tuple:
    """The names of ``forward``'s first ``n`` positional parameters (``("q", "k", "v")`` for
    ``sdpa_forward``), or ``("0", "1", ...)`` when its signature does not give them."""
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):             # a builtin or callable without a signature
        params = []
    positional = [p.name for p in params[:n]
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(positional) if len(positional) == n else tuple(str(i) for i in range(n))


def numerical_gradient(loss, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of the scalar function ``loss()`` w.r.t. the array ``x``.

    ``x`` is perturbed in place, one element at a time, and restored. A teaching tool:
    it calls ``loss`` twice per element, so keep ``x`` small.
    """
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)   # views: writing flat[i] writes x
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        plus = loss()
        flat[i] = old - eps
        minus = loss()
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad


def gradcheck(forward, backward, inputs, *, names=None, seed: int = 0, eps: float = 1e-6,
              atol: float = 1e-8, rtol: float = 1e-6) -> GradcheckResult:
    """Compare ``backward`` with central differences of ``forward``, in float64.

    Parameters
    ----------
    forward : callable
        ``forward(*inputs)`` returns ``out`` or ``(out, cache)``.
    backward : callable
        ``backward(dout, cache)`` returns one gradient per input, in the same structure
        (an array for an array, a dict for a dict of arrays), e.g. ``sdpa_backward`` or
        ``mha_backward``. With a forward that returns no cache, ``cache`` is None.
    inputs : sequence of float64 arrays or dicts of float64 arrays
        Copied; the caller's arrays are not modified.
    names : sequence of str, optional
        One name per input, used in the report (``"params.W_q"`` for a dict entry). Default:
        the names of ``forward``'s positional parameters (``q, k, v`` for ``sdpa_forward``),
        or ``0, 1, 2, ...`` when it has none to give.
    seed : int
        Seed of the random upstream gradient.

    Returns
    -------
    GradcheckResult
        ``result.ok`` is True when every analytic gradient matches; ``print(result)`` shows
        the error of each input.

    Examples
    --------
    >>> import numpy as np, attention_np as an
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 2, 4, 3))
    >>> an.gradcheck(an.sdpa_forward, an.sdpa_backward, (q, k, v)).ok
    True
    """
    inputs = tuple({k: np.array(v) for k, v in x.items()} if isinstance(x, dict)
                   else np.array(x) for x in inputs)
    if names is None:
        names = input_names(forward, len(inputs))
    names = tuple(str(n) for n in names)
    if len(names) != len(inputs):
        raise ValueError(f"names has {len(names)} entries {names} for {len(inputs)} inputs")
    for name, _, x in _leaves(inputs, names):
        if x.dtype != np.float64:
            raise TypeError(f"gradcheck needs float64 inputs (central differences in lower "
                            f"precision are noise); input {name} is {x.dtype}")

    def run():
        result = forward(*inputs)
        return result if isinstance(result, tuple) else (result, None)

    out, cache = run()
    dout = np.random.default_rng(seed).standard_normal(np.shape(out))
    analytic = backward(dout, cache)
    if not isinstance(analytic, tuple):
        analytic = (analytic,)
    if len(analytic) != len(inputs):
        raise ValueError(f"backward returned {len(analytic)} gradients for {len(inputs)} inputs")

    def loss():
        return float(np.sum(run()[0] * dout))

    result = GradcheckResult(atol=atol, rtol=rtol)
    for name, (i, key), x in _leaves(inputs, names):
        got = analytic[i] if key is None else analytic[i][key]
        want = numerical_gradient(loss, x, eps)
        if np.shape(got) != want.shape:
            raise ValueError(f"gradient {name} has shape {np.shape(got)}, input has {want.shape}")
        err = float(np.max(np.abs(got - want), initial=0.0))
        result.errors[name] = (err, float(np.max(np.abs(want), initial=0.0)))
        if not np.allclose(got, want, atol=atol, rtol=rtol):
            result.failed.append(name)
    return result
