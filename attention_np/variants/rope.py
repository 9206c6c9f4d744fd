r"""Rotary position embeddings (RoPE; Su et al., "RoFormer", 2021), beyond the paper.

The paper adds sinusoidal encodings to the embeddings (§3.5). RoPE instead *rotates* each query
and key by an angle proportional to its position, so that ``q_i · k_j`` depends on ``i - j`` only:
feature pair ``m`` of a vector at position ``p`` turns by ``p * theta^(-2m/r)``,

.. math:: \begin{pmatrix} y_1 \\ y_2 \end{pmatrix} =
          \begin{pmatrix} \cos\phi & -\sin\phi \\ \sin\phi & \cos\phi \end{pmatrix}
          \begin{pmatrix} x_1 \\ x_2 \end{pmatrix},\qquad \phi = p\,\theta^{-2m/r}.

Which features form a pair is the *layout*; real models use two:

- ``"half"``: feature ``m`` pairs with ``m + r/2`` (``rotate_half`` in transformers' Llama,
  Mistral, Qwen2, GPT-NeoX);
- ``"interleaved"``: features ``2m`` and ``2m + 1`` (the RoFormer paper, GPT-J, Meta's Llama code).

With ``rotary_dim=r < d`` only the first ``r`` features rotate (GPT-NeoX, Phi); the rest pass
unchanged. A rotation's inverse is its transpose, the rotation by ``-phi``: that is the backward.

Shapes: ``x (..., L, d)``; ``positions`` int, ``(L,)`` or ``(..., L)`` broadcasting against
``x.shape[:-1]`` (for heads ``(B, h, L, d)`` and per-sequence positions ``(B, L)``, pass
``positions[:, None]``). Explicit positions make decoding at an offset (``positions = [t]``) and
left padding work.

Models trained on short sequences and run on longer ones change the frequencies (Llama 3.1,
YaRN, LongRoPE, ...): ``scaling=`` takes them from :mod:`attention_np.variants.rope_scaling`.
"""

from __future__ import annotations

import numpy as np

from attention_np._checks import as_float_array, check_min_ndim, sum_to_shape
from attention_np.paper._validate import check_even_width, check_float_dtype
from attention_np.variants.rope_scaling import freeze_scaling, rope_frequencies

LAYOUTS = ("half", "interleaved")


def _check_positions(positions) -> np.ndarray:
    positions = np.asarray(positions)
    if not np.issubdtype(positions.dtype, np.integer) or positions.ndim < 1:
        raise TypeError(f"positions must be an int array (L,) or (..., L), got dtype "
                        f"{positions.dtype} and shape {positions.shape}")
    return positions


def _check_theta(theta) -> float:
    if isinstance(theta, (bool, np.bool_)) or not isinstance(
            theta, (int, float, np.integer, np.floating)):
        raise TypeError(f"theta must be a positive real number, got {theta!r}")
    if not (np.isfinite(theta) and theta > 0):
        raise ValueError(f"theta must be a positive finite number, got {theta!r}")
    return float(theta)


def _seq_len(positions: np.ndarray) -> int | None:
    """The length a forward runs, as transformers' ``dynamic_rope_update`` reads it (at least 1:
    negative positions are allowed)."""
    return max(int(positions.max()) + 1, 1) if positions.size else None


def rope_angles(positions, d: int, *, theta=10000.0, dtype=np.float64, scaling=None):
    r"""The cosines and sines of the rotary angles ``phi[p, m] = p * theta^(-2m/d)``.

    Computed in float64 and rounded once to ``dtype`` (transformers computes them in float32,
    even in a float64 model: see docs/frameworks.md). With ``scaling`` the frequencies are
    :func:`~attention_np.variants.rope_scaling.rope_frequencies`' (``seq_len = 1 + max(positions)``)
    and cos and sin are multiplied by its attention factor, as transformers' rotary embeddings
    return them.

    Parameters
    ----------
    positions : int array (L,) or (..., L)
    d : int
        The rotated width (even): there are ``d // 2`` frequencies.
    theta : float
        The base (10000 in RoFormer and Llama 2; Llama 3 uses 500000).
    dtype : dtype
        The floating dtype of the result (float32 or float64; an integer dtype is refused).
    scaling : dict, optional
        A RoPE scaling type and its parameters (``{"rope_type": "yarn", ...}``, see
        :func:`~attention_np.variants.rope_scaling.rope_frequencies`); None: plain RoPE.

    Returns
    -------
    cos, sin : (..., L, d // 2)
    """
    positions = _check_positions(positions)
    check_even_width(d, "d")
    theta = _check_theta(theta)
    dtype = check_float_dtype(dtype, "dtype")
    inv_freq, factor = rope_frequencies(d, theta=theta, scaling=scaling,
                                        seq_len=_seq_len(positions))   # (d/2,), float
    phi = positions[..., None].astype(np.float64) * inv_freq                # (..., L, d/2)
    return (factor * np.cos(phi)).astype(dtype), (factor * np.sin(phi)).astype(dtype)


def _pairs(r: int, layout: str):
    """The two halves of each rotated pair: slices of the last axis (the first ``r`` features)."""
    if layout == "half":
        return slice(0, r // 2), slice(r // 2, r)
    return slice(0, r, 2), slice(1, r, 2)


def _rotate(x, positions, theta, layout, rotary_dim, scaling, sign: float, name: str):
    x = as_float_array(x, name)
    check_min_ndim(x, name, 2, "(..., L, d)")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    d = x.shape[-1]
    if rotary_dim is None and d % 2:
        raise ValueError(f"{name} has d={d} features ({name} {x.shape}): RoPE rotates pairs of "
                         f"features, so d must be even, or pass an even rotary_dim < d")
    r = d if rotary_dim is None else rotary_dim
    if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)) or not (
            2 <= r <= d and r % 2 == 0):
        raise ValueError(f"rotary_dim must be an even int in [2, d={d}], got {rotary_dim!r}")
    positions = _check_positions(positions)
    try:
        np.broadcast_shapes(positions.shape, x.shape[:-1])
    except ValueError:
        raise ValueError(f"positions of shape {positions.shape} do not broadcast against "
                         f"{name}.shape[:-1] = {x.shape[:-1]} (..., L); for heads (B, h, L, d) "
                         f"pass positions[:, None]") from None
    if positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions has {positions.shape[-1]} entries but {name} has "
                         f"L={x.shape[-2]} positions ({name} {x.shape})")
    cos, sin = rope_angles(positions, r, theta=theta, dtype=x.dtype,
                           scaling=scaling)                                 # (..., L, r/2)
    sin = -sin if sign < 0 else sin
    a, b = _pairs(r, layout)
    x1, x2 = x[..., a], x[..., b]                                           # (..., L, r/2)
    shape = np.broadcast_shapes(x.shape, cos.shape[:-1] + (d,))
    y = np.empty(shape, dtype=x.dtype)
    # (y1, y2) = (x1 cos - x2 sin, x2 cos + x1 sin): a rotation by phi in each pair's plane
    # (times the attention factor of a scaling type, folded into cos and sin)
    y[..., a] = x1 * cos - x2 * sin
    y[..., b] = x2 * cos + x1 * sin
    y[..., r:] = x[..., r:]                                                 # unrotated features
    return y


def apply_rope(x, positions, *, theta=10000.0, layout="half", rotary_dim=None, scaling=None):
    """Rotate queries or keys by their positions (forward).

    Parameters
    ----------
    x : (..., L, d) queries or keys (per head)
    positions : int array (L,) or (..., L), broadcasting against ``x.shape[:-1]``
    theta : float
        The base of the frequencies ``theta^(-2m/r)``.
    layout : {"half", "interleaved"}
        Which features pair up: ``m`` with ``m + r/2`` (transformers' ``rotate_half``), or
        ``2m`` with ``2m + 1`` (RoFormer, GPT-J).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (even); default all ``d``.
    scaling : dict, optional
        A RoPE scaling type (Llama 3.1, YaRN, LongRoPE, ...): ``{"rope_type": ..., **params}``
        as :func:`~attention_np.variants.rope_scaling.rope_frequencies` takes it. Its frequencies
        replace ``theta^(-2m/r)`` and its attention factor multiplies the result;
        ``"dynamic"`` and ``"longrope"`` depend on ``1 + max(positions)``.

    Returns
    -------
    x_rot : (..., L, d), same dtype as ``x``
    """
    return _rotate(x, positions, theta, layout, rotary_dim, scaling, +1.0, "x")


def apply_rope_backward(dx_rot, positions, *, theta=10000.0, layout="half", rotary_dim=None,
                        scaling=None):
    """Backward of :func:`apply_rope`: the gradient w.r.t. ``x``.

    forward: ``x_rot = a R(phi) x``  ->  ``dx = a R(phi)^T dx_rot = a R(-phi) dx_rot``: the same
    rotation with the sines negated (``a`` the attention factor of ``scaling``, else 1). Takes
    the positions instead of a cache (they and the options are all it needs). If ``positions``
    broadcast ``x`` up, sum ``dx`` back yourself.

    Parameters
    ----------
    dx_rot : (..., L, d) gradient w.r.t. the rotated ``x``
    positions, theta, layout, rotary_dim, scaling : as given to :func:`apply_rope`

    Returns
    -------
    dx : (..., L, d)
    """
    return _rotate(dx_rot, positions, theta, layout, rotary_dim, scaling, -1.0, "dx_rot")


# --- RoPE inside multi-head attention (used by mha_forward and mha_decode_step) -------------

ROPE_OPTIONS = ("theta", "layout", "rotary_dim", "scaling")


def check_rope(rope) -> dict | None:
    """The ``rope=`` option of multi-head attention: None (no rotation) or a dict of
    :func:`apply_rope`'s options (``{}`` for the defaults: theta 10000, layout "half"). Every
    entry is validated here, before anything (a KV cache) changes; the copy returned has
    ``theta`` as a float and ``scaling`` frozen
    (:func:`~attention_np.variants.rope_scaling.freeze_scaling`)."""
    if rope is None:
        return None
    if rope is True:
        return {}
    if not isinstance(rope, dict) or set(rope) - set(ROPE_OPTIONS):
        raise ValueError(f"rope must be None, True or a dict with keys among {ROPE_OPTIONS}, "
                         f"got {rope!r}")
    out = dict(rope)
    if "theta" in out:
        out["theta"] = _check_theta(out["theta"])
    if "layout" in out and (not isinstance(out["layout"], str) or out["layout"] not in LAYOUTS):
        raise ValueError(f"layout must be one of {LAYOUTS}, got {out['layout']!r}")
    r = out.get("rotary_dim")
    if r is not None:
        out["rotary_dim"] = check_even_width(r, "rotary_dim")
    if "scaling" in out:
        out["scaling"] = freeze_scaling(out["scaling"])
    return out


def head_positions(positions, n: int, start: int = 0) -> np.ndarray:
    """Positions of ``n`` tokens for heads ``(..., h, n, d)``: ``(..., n)`` gets a head axis,
    ``(..., 1, n)``; None means ``start, start + 1, ..., start + n - 1``."""
    if positions is None:
        return np.arange(start, start + n)
    positions = _check_positions(positions)
    return positions if positions.ndim == 1 else positions[..., None, :]


def rotate_heads(q, k, q_positions, k_positions, rope: dict):
    """:func:`apply_rope` on query heads ``(..., h, L, d)`` and key heads ``(..., h_kv, S, d)``.

    Returns ``q_rot, k_rot, saved``; ``saved`` is what :func:`rotate_heads_backward` needs.
    """
    q_rot = apply_rope(q, q_positions, **rope)
    k_rot = apply_rope(k, k_positions, **rope)
    return q_rot, k_rot, (rope, q_positions, k_positions, q.shape, k.shape)


def rotate_heads_backward(dq_rot, dk_rot, saved):
    """Backward of :func:`rotate_heads`: each gradient rotated back by ``-phi`` and summed to the
    unrotated shape (positions with batch dims may have broadcast an unbatched input up)."""
    rope, q_positions, k_positions, q_shape, k_shape = saved
    dq = apply_rope_backward(dq_rot, q_positions, **rope)
    dk = apply_rope_backward(dk_rot, k_positions, **rope)
    return sum_to_shape(dq, q_shape), sum_to_shape(dk, k_shape)
