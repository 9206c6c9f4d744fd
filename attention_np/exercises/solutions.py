"""Model solutions of the 13 exercises, in plain NumPy, as an instructor shows them.

Written independently of the library's references (the checker compares them: see
tests/course/test_exercises.py). The course build puts them in the solution notebooks
(``OUT/solutions/``), never in the student kit. Each function stands alone, with the helpers
listed in :data:`SOLUTIONS`.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap

import numpy as np


def softmax(x):
    m = x.max(axis=-1, keepdims=True)           # the row max: every exponent <= 0, the largest 0
    e = np.exp(x - m)                           # a new array: x is not written to
    return e / e.sum(axis=-1, keepdims=True)


def softmax_backward(dp, p):
    # dx_i = sum_j dp_j dp_j/dx_i = p_i (dp_i - sum_j dp_j p_j)
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def causal_mask(L, S, align):
    i = np.arange(L)[:, None]                   # query positions (L, 1)
    j = np.arange(S)[None, :]                   # key positions   (1, S)
    offset = 0 if align == "top_left" else S - L
    return j <= i + offset                      # (L, S), True = may attend


def padding_mask(lengths, S):
    real = np.arange(S)[None, :] < np.asarray(lengths)[:, None]     # (B, S)
    return real[:, None, :]                                         # (B, 1, S)


def _masked_softmax(s):
    """softmax over the last axis; a row of all -inf gives zeros (not NaN)."""
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)          # a fully masked row: shift by 0, exp(-inf) = 0
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


def attention(q, k, v, mask=None):
    scale = 1 / math.sqrt(q.shape[-1])          # a Python float keeps float32 float32
    s = q @ np.swapaxes(k, -1, -2) * scale      # (..., L, S)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return _masked_softmax(s) @ v               # (..., L, d_v)


def _sum_to_shape(g, shape):
    """Sum ``g`` over the axes that broadcasting added or stretched, to ``shape``."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    stretched = tuple(ax for ax, n in enumerate(shape) if n == 1 and g.shape[ax] != 1)
    return g.sum(axis=stretched, keepdims=True) if stretched else g


def attention_backward(dout, q, k, v, mask=None):
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    p = _masked_softmax(s)                                  # (..., L, S)
    dv = np.swapaxes(p, -1, -2) @ dout                      # out = P v
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))    # P = softmax(S)
    dq = ds @ k * scale                                     # S = q k^T * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    return dq, _sum_to_shape(dk, k.shape), _sum_to_shape(dv, v.shape)


def split_heads(x, num_heads):
    *batch, L, f = x.shape
    x = x.reshape(*batch, L, num_heads, f // num_heads)     # (..., L, h, d)
    return np.swapaxes(x, -2, -3)                           # (..., h, L, d)


def merge_heads(x):
    *batch, h, L, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*batch, L, h * d)


def mha_forward(query, key, value, params, num_heads, mask=None):
    p = params
    q = split_heads(query @ p["W_q"] + p["b_q"], num_heads)    # (B, h, L, d_k)
    k = split_heads(key @ p["W_k"] + p["b_k"], num_heads)      # (B, h, S, d_k)
    v = split_heads(value @ p["W_v"] + p["b_v"], num_heads)    # (B, h, S, d_v)
    heads = attention(q, k, v, mask)                            # (B, h, L, d_v)
    return merge_heads(heads) @ p["W_o"] + p["b_o"]             # (B, L, d_model)


def _linear_backward(x, W, dy):
    """y = x W + b: returns dx, dW, db (summed over every leading axis)."""
    flat_x, flat_dy = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    return dy @ W.T, flat_x.T @ flat_dy, flat_dy.sum(axis=0)


def mha_backward(dout, query, key, value, params, num_heads):
    p, h = params, num_heads
    q = split_heads(query @ p["W_q"] + p["b_q"], h)
    k = split_heads(key @ p["W_k"] + p["b_k"], h)
    v = split_heads(value @ p["W_v"] + p["b_v"], h)
    concat = merge_heads(attention(q, k, v))
    grads = {}
    dconcat, grads["W_o"], grads["b_o"] = _linear_backward(concat, p["W_o"], dout)
    dq, dk, dv = attention_backward(split_heads(dconcat, h), q, k, v)
    inputs = {}
    for name, x, g in (("q", query, dq), ("k", key, dk), ("v", value, dv)):
        inputs[name], grads["W_" + name], grads["b_" + name] = _linear_backward(
            x, p["W_" + name], merge_heads(g))
    return inputs["q"], inputs["k"], inputs["v"], grads    # separate, even if query is key


def tiled_attention(q, k, v, block_size):
    scale = 1 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=q.dtype)     # running max   (..., L, 1)
    l = np.zeros(q.shape[:-1] + (1,), dtype=q.dtype)             # running sum   (..., L, 1)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)  # running output (..., L, d_v)
    for j in range(0, k.shape[-2], block_size):                  # over key blocks only
        s = q @ np.swapaxes(k[..., j:j + block_size, :], -1, -2) * scale
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        rescale = np.exp(m - m_new)                              # exp(-inf) = 0 at the first block
        e = np.exp(s - m_new)
        l = l * rescale + e.sum(axis=-1, keepdims=True)
        acc = acc * rescale + e @ v[..., j:j + block_size, :]
        m = m_new
    return acc / l


def decode_step(x, k_cache, v_cache, params, num_heads):
    p, h = params, num_heads
    q = split_heads(x @ p["W_q"] + p["b_q"], h)                                     # (B, h, 1, d_k)
    k = np.concatenate([k_cache, split_heads(x @ p["W_k"] + p["b_k"], h)], axis=-2)  # (B, h, t+1, d_k)
    v = np.concatenate([v_cache, split_heads(x @ p["W_v"] + p["b_v"], h)], axis=-2)
    out = merge_heads(attention(q, k, v)) @ p["W_o"] + p["b_o"]   # the last position sees every key
    return out, k, v


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]                        # (length, 1)
    two_i = np.arange(0, d_model, 2)[None, :]               # (1, d_model/2)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


#: exercise -> the functions its solution cell shows (helpers first): what the audit mutates
SOLUTIONS = {
    "softmax": [softmax],
    "softmax_backward": [softmax_backward],
    "causal_mask": [causal_mask],
    "padding_mask": [padding_mask],
    "attention": [_masked_softmax, attention],
    "attention_backward": [_sum_to_shape, attention_backward],
    "split_heads": [split_heads],
    "merge_heads": [merge_heads],
    "mha_forward": [_masked_softmax, attention, mha_forward],
    "mha_backward": [_sum_to_shape, attention_backward, _linear_backward, mha_backward],
    "tiled_attention": [tiled_attention],
    "decode_step": [split_heads, merge_heads, _masked_softmax, attention, decode_step],
    "sinusoidal": [sinusoidal],
}


def needs(name: str) -> list:
    """The names of the functions of this module that exercise ``name``'s solution calls,
    directly or through another, and the exercise's own function, in the order they are written
    here (helpers first): what a notebook must define for that solution to run."""
    here = {n: f for n, f in globals().items() if inspect.isfunction(f) and f.__module__ == __name__}
    fn = SOLUTIONS[name][-1]
    found, todo = {fn.__name__}, [fn]
    while todo:
        tree = ast.parse(textwrap.dedent(inspect.getsource(todo.pop())))
        for used in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & set(here) - found:
            found.add(used)
            todo.append(here[used])
    return [f.__name__ for f in sorted((here[n] for n in found), key=lambda f: f.__code__.co_firstlineno)]


def solution_source(name: str, defined=()) -> str:
    """The source of exercise ``name``'s solution cell: the functions :data:`SOLUTIONS` lists,
    and before them any other function the solution needs (:func:`needs`) that is not among
    ``defined``, the names earlier cells of its notebook define, so that the cell runs in its
    notebook alone (the attention_backward cell of notebook 04 needs ``_masked_softmax``, which
    notebook 01 defines)."""
    shown = [f.__name__ for f in SOLUTIONS[name]]
    extra = [n for n in needs(name) if n not in shown and n not in defined]
    return "\n\n".join(inspect.getsource(globals()[n]).rstrip() for n in extra + shown) + "\n"
