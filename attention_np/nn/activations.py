r"""Element-wise nonlinearities of the feed-forward network (§3.3) and their backward passes.

- ReLU, :math:`\max(0, x)`: the paper's FFN, Eq. (2).
- GELU, :math:`x\,\Phi(x) = \tfrac{x}{2}\left(1 + \mathrm{erf}(x/\sqrt{2})\right)` (Hendrycks &
  Gimpel, 2016): BERT's FFN, in the exact erf form (not the tanh approximation).

NumPy has no ``erf``. :func:`erf` expands it in a Taylor series about the nearest multiple
``x0`` of 1/256, whose value comes from a table made once with Python's ``math.erf``; the
derivatives of erf are Hermite polynomials times a Gaussian,

.. math:: \mathrm{erf}(x_0 + d) = \mathrm{erf}(x_0) + \frac{2}{\sqrt\pi}\, e^{-x_0^2}
          \sum_{n \ge 1} (-1)^{n-1} H_{n-1}(x_0)\, \frac{d^n}{n!},\qquad |d| \le \tfrac{1}{512},

so six terms reach float64 rounding for every ``x`` (|d| is tiny; three suffice for a float32
result), the correction is small next to ``erf(x0)``, and every coefficient is tabulated once per
grid point: an element costs a table lookup per term and Horner's rule. Beyond |x| = 6,
erf(x) rounds to ±1 in float64.
"""

from __future__ import annotations

import math

import numpy as np

from attention_np._checks import check_array, check_dout
from attention_np.kernels.threads import deal, num_threads, parallel_map

_ERF_CLIP = 6.0           # 1 - erf(6) = 2.2e-17, below half an ulp of 1.0 in float64
_GRID = 256               # erf is tabulated at the multiples of 1/256 in [0, 6]
_TERMS = 6                # Taylor terms about the nearest grid point: float64 rounding
_TERMS_FLOAT32 = 3        # enough for a float32 result: the next term is below 1e-10
_CHUNK = 1 << 15          # elements per chunk: a chunk's float64 temporaries stay in cache
_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def _taylor_table() -> np.ndarray:
    """(_TERMS + 1, grid points): row 0 is erf(x0) (``math.erf``); row n >= 1 the coefficient of
    d^n, (2/sqrt(pi)) e^(-x0^2) (-1)^(n-1) H_(n-1)(x0) / n!, H the Hermite polynomials."""
    x0 = np.arange(int(_ERF_CLIP * _GRID) + 1) / _GRID
    rows = [np.array([math.erf(t) for t in x0])]
    h_prev, h = np.zeros_like(x0), np.ones_like(x0)           # H_{-1} = 0, H_0 = 1
    gauss = _TWO_OVER_SQRT_PI * np.exp(-x0 * x0)
    for n in range(1, _TERMS + 1):
        rows.append(gauss * (-1) ** (n - 1) * h / math.factorial(n))
        h_prev, h = h, 2.0 * x0 * h - 2.0 * (n - 1) * h_prev   # H_n = 2 x H_{n-1} - 2(n-1) H_{n-2}
    return np.stack(rows)


_ERF_TAYLOR = _taylor_table()


def erf(x) -> np.ndarray:
    """The error function, element-wise; within 2e-16 of ``math.erf`` in float64 (tested).

    Computed in float64 even for float32 input (then rounded back), so that a float32 result is
    within one float32 ulp. Large arrays are cut into chunks that stay in cache, shared out to the
    worker threads of :func:`attention_np.kernels.threads.parallel_map`.

    Parameters
    ----------
    x : float array

    Returns
    -------
    erf(x) : array of ``x.shape`` and ``x.dtype``
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"x must be a floating-point array, got dtype {x.dtype}")
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, x.dtype)
    chunks = [slice(i, i + _CHUNK) for i in range(0, flat.size, _CHUNK)]

    terms = _TERMS_FLOAT32 if x.dtype.itemsize <= 4 else _TERMS

    def work(my_chunks):
        for c in my_chunks:
            out[c] = _erf64(flat[c].astype(np.float64), terms)

    parts = deal(chunks, num_threads())
    if len(parts) == 1:
        work(parts[0])          # no matrix product: the BLAS thread count is not this call's concern
    else:
        parallel_map(work, parts)
    return out.reshape(x.shape)


def _erf64(x: np.ndarray, terms: int) -> np.ndarray:
    """erf of a 1-D float64 array, ``terms`` Taylor terms (see the module docstring)."""
    z = np.minimum(np.abs(x), _ERF_CLIP)          # erf is odd: work on |x|, sign at the end
    nan = np.isnan(z)
    if nan.any():
        z[nan] = 0.0                              # any grid index; NaN is put back below
    i = np.rint(z * _GRID)                        # the nearest grid point x0 = i / 256
    d = z - i / _GRID                             # |d| <= 1/512, exact
    i = i.astype(np.intp)
    # erf(x0 + d) = sum_n c_n(x0) d^n (the table's rows), by Horner's rule in d
    total = _ERF_TAYLOR[terms][i]
    for n in range(terms - 1, -1, -1):
        total *= d
        total += _ERF_TAYLOR[n][i]
    out = np.copysign(np.minimum(total, 1.0), x)  # rounding may land one ulp above 1 near 6
    out[nan] = np.nan
    return out


def relu_forward(x: np.ndarray):
    """``max(0, x)``; the cache is the input.

    Parameters
    ----------
    x : (..., d) float array

    Returns
    -------
    y : (..., d), and the cache ``x``
    """
    x = check_array(x, "x")
    return np.maximum(x, 0), x


def relu_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """forward: y = max(0, x)  ->  dx = dy where x > 0, else 0.

    Parameters
    ----------
    dy : (..., d) float array, the upstream gradient (the shape and dtype of ``x``)
    x : (..., d) float array, the cache of :func:`relu_forward`
    """
    x = check_array(x, "x")
    dy = check_dout(dy, x.shape, x.dtype, "dy", "x")
    return dy * (x > 0)


def gelu_forward(x: np.ndarray):
    r"""Exact GELU, :math:`x\,\Phi(x)` with :math:`\Phi` the standard normal CDF; cache is ``x``.

    PyTorch's ``nn.GELU()`` (``approximate='none'``) and BERT's ``hidden_act="gelu"``.

    Parameters
    ----------
    x : (..., d) float array
    """
    x = check_array(x, "x")
    cdf = 0.5 * (1.0 + erf(x * x.dtype.type(1 / np.sqrt(2.0))))  # Phi(x)
    return x * cdf, x


def gelu_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    r"""forward: y = x * Phi(x)  ->  dx = dy * (Phi(x) + x * phi(x)), phi the normal density.

    Parameters
    ----------
    dy : (..., d) float array, the upstream gradient (the shape and dtype of ``x``)
    x : (..., d) float array, the cache of :func:`gelu_forward`
    """
    x = check_array(x, "x")
    dy = check_dout(dy, x.shape, x.dtype, "dy", "x")
    cdf = 0.5 * (1.0 + erf(x * x.dtype.type(1 / np.sqrt(2.0))))
    pdf = x.dtype.type(_INV_SQRT_2PI) * np.exp(-0.5 * x * x)
    return dy * (cdf + x * pdf)
