"""JAX ⇄ attention_np: ``jax.nn.dot_product_attention``'s layout, masks and precision.

Importing this module needs only NumPy; JAX is imported by the functions that call it.

- **layout**: JAX puts heads *after* time, ``(B, T, N, H)`` (batch, positions, heads, head
  width); we put them before, ``(B, N, T, H)``, as PyTorch does. Converting is one
  ``swapaxes(-2, -3)``, its own inverse. The mask and bias are ``(B, N, T, S)`` in both.
- **masks**: same polarity (True = may attend), floats refused (pass ``bias``). ``is_causal``
  is top-left aligned, as ours.
- **grouped-query attention**: ``key``/``value`` may have ``K`` heads with ``N % K == 0``; query
  head ``n`` uses key/value head ``n // (N / K)``, our
  ``sdpa_forward(..., spec=AttentionSpec(enable_gqa=True))``.
- **d_k == d_v**: JAX requires ``value`` to have the shape of ``key``.
- **precision**: JAX casts the scores to float32 for the softmax, whatever the input dtype, so
  float64 inputs get float32-accurate outputs. Without ``jax_enable_x64`` float64 arrays are
  float32 altogether. Compare JAX with float32 tolerances.
- **fully masked query row**: uniform weights, so the output is ``mean(V)``; ours is 0.
"""

from __future__ import annotations

import contextlib

import numpy as np

from attention_np._checks import as_bool_mask, check_array, check_flag, check_number
from attention_np._optional import import_optional
from attention_np.variants.spec import AttentionSpec


def _jax():
    return import_optional("jax", "attention_np.interop.jax")


def to_jax_layout(x) -> np.ndarray:
    """Ours ``(..., N, T, H)`` -> JAX's ``(..., T, N, H)`` (a view)."""
    x = check_array(x, "x", kind="number", min_ndim=3, layout="(..., heads, positions, width)")
    return np.swapaxes(x, -2, -3)


def from_jax_layout(x) -> np.ndarray:
    """JAX's ``(..., T, N, H)`` -> ours ``(..., N, T, H)`` (a view)."""
    x = check_array(x, "x", kind="number", min_ndim=3, layout="(..., positions, heads, width)")
    return np.swapaxes(x, -2, -3)


def to_jax_dpa(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None) -> dict:
    """Keyword arguments for ``jax.nn.dot_product_attention`` that compute what
    ``sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)`` does
    (fully masked rows aside).

    Parameters
    ----------
    q : (B, N, T, H), k, v : (B, K, S, H)
        Our layout, exactly 4-D (JAX's is fixed); ``K`` may divide ``N`` (grouped-query).
    mask, bias : broadcastable to (B, N, T, S), optional
    is_causal, scale : as in :func:`sdpa_forward`

    Returns
    -------
    dict with ``query, key, value`` in JAX's layout (NumPy arrays) and ``bias, mask,
    is_causal, scale``; call ``jax.nn.dot_product_attention(**kwargs)``.
    """
    q, k, v = (check_array(a, name, ndim=4, layout="(B, heads, positions, width) for JAX")
               for name, a in (("q", q), ("k", k), ("v", v)))
    check_flag(is_causal, "is_causal")
    scale = check_number(scale, "scale", optional=True)
    if bias is not None:
        check_array(bias, "bias")
    if v.shape != k.shape:
        raise ValueError(f"jax.nn.dot_product_attention needs v of k's shape (d_k == d_v): "
                         f"k {k.shape}, v {v.shape}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"q has {q.shape[1]} heads, not a multiple of k's {k.shape[1]}")
    kwargs = {"query": to_jax_layout(q), "key": to_jax_layout(k), "value": to_jax_layout(v),
              "bias": None, "mask": None, "is_causal": bool(is_causal), "scale": scale}
    if mask is not None:
        kwargs["mask"] = as_bool_mask(mask)
    if bias is not None:
        kwargs["bias"] = np.asarray(bias, dtype=q.dtype)
    return kwargs


def from_jax_dpa(query, key, value, bias=None, mask=None, *, scale=None, is_causal: bool = False):
    """``jax.nn.dot_product_attention``'s arguments in our layout: ``(q, k, v, kwargs)``.

    ``kwargs`` holds ``mask, bias, is_causal, scale, spec`` for :func:`sdpa_forward`;
    ``spec.enable_gqa`` is True when the key/value have fewer heads than the query (grouped-query
    attention).
    """
    q, k, v = (from_jax_layout(check_array(np.asarray(a), n, ndim=4, layout="(B, T, N, H)"))
               for n, a in (("query", query), ("key", key), ("value", value)))
    check_flag(is_causal, "is_causal")
    scale = check_number(scale, "scale", optional=True)
    if bias is not None:
        check_array(np.asarray(bias), "bias")
    kwargs = {"mask": None if mask is None else as_bool_mask(np.asarray(mask)),
              "bias": None if bias is None else np.asarray(bias),
              "is_causal": bool(is_causal), "scale": scale,
              "spec": AttentionSpec(enable_gqa=k.shape[-3] != q.shape[-3])}
    return q, k, v, kwargs


def forward_backward(q, k, v, dout, mask=None, *, bias=None, is_causal: bool = False, scale=None):
    """``jax.nn.dot_product_attention`` forward and its ``jax.vjp`` backward, in our layout.

    Takes what :func:`to_jax_dpa` takes plus the upstream gradient ``dout`` (like ``q`` but
    ``d_v`` wide), and returns ``(out, dq, dk, dv)`` as NumPy arrays in our layout. float64
    stays float64 only inside :func:`x64`.
    """
    jax = _jax()
    import jax.numpy as jnp

    kw = to_jax_dpa(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)
    dout = check_array(dout, "dout", ndim=4, layout="(B, N, T, H), like q")
    if dout.shape != np.shape(q)[:-1] + np.shape(v)[-1:]:
        raise ValueError(f"dout must have the output's shape {np.shape(q)[:-1] + np.shape(v)[-1:]}, "
                         f"got {dout.shape}")
    q, k, v = (jnp.asarray(kw.pop(n)) for n in ("query", "key", "value"))
    kw = {n: (jnp.asarray(a) if isinstance(a, np.ndarray) else a) for n, a in kw.items()}

    # One compiled forward+backward: JAX's op-by-op mode would compile every primitive for
    # every new shape, which is seconds per case on a small CPU.
    @jax.jit
    def run(q, k, v, dout):
        out, vjp = jax.vjp(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, **kw), q, k, v)
        return (out, *vjp(dout))

    return tuple(from_jax_layout(np.asarray(a))
                 for a in run(q, k, v, jnp.asarray(to_jax_layout(dout))))


@contextlib.contextmanager
def x64(enabled: bool = True):
    """Let JAX hold float64 arrays inside this block only (``jax_enable_x64``, scoped).

    ``x64(False)`` does the opposite: float64 inputs become float32, JAX's default. attention_np
    never switches x64 on globally: it would change every other JAX computation in the process.
    """
    check_flag(enabled, "enabled")
    jax = _jax()
    if hasattr(jax, "enable_x64"):               # jax >= 0.8: a context manager
        with jax.enable_x64(enabled):
            yield
    else:                                         # pragma: no cover - older jax
        from jax.experimental import disable_x64, enable_x64
        with enable_x64() if enabled else disable_x64():
            yield
