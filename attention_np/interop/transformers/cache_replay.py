"""A layer call that continues from a transformers KV cache, replayed on attention_np's
:class:`~attention_np.compose.decode.KVCache`; the cache kinds that can be read, and the others
refused by name.

A decoder's ``generate()`` runs each attention layer on the new tokens only: their keys and
values are appended to the layer's cache and the new queries attend every cached position
(bottom-right causal, :func:`~attention_np.compose.decode.mha_decode_step`). The whole-model
diff replays such a call in three parts:

- the keys and values the layer held before the call (read from the model's cache as it was:
  :func:`cached_keys_values`) against ours recomputed from the layer's earlier calls
  (:func:`new_keys_values`: projected, QK-normed and rotated at their positions);
- the new tokens' output: :func:`~attention_np.compose.decode.mha_decode_step` on a
  :class:`KVCache` holding the model's cached keys and values;
- the gradients of that call (:func:`replay_cached`), the cached keys and values constants, as
  they are in transformers (computed without a graph, before the call).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_np.compose.decode import KVCache, mha_decode_step
from attention_np.compose.layer_spec import check_layer
from attention_np.compose.pipeline import (
    attend_heads,
    output,
    project_heads,
    project_heads_backward,
    transform_qk,
    transform_qk_backward,
)
from attention_np.interop.transformers.layer_reading import (
    GridTable,
    LayerSpec,
    T5Buckets,
    UnsupportedLayer,
    mha_options,
)
from attention_np.kernels.fast_linear import linear_backward
from attention_np.kernels.registry import attend_backward
from attention_np.paper.heads import split_heads
from attention_np.paper.masks import causal_mask
from attention_np.variants.rope import head_positions

#: The cache layers whose keys and values are those of every position seen (DynamicLayer), or
#: of the last ``sliding_window - 1`` (DynamicSlidingWindowLayer: the window's, all a new query
#: may see): the two a cached call can be replayed from.
READABLE = ("DynamicLayer", "DynamicSlidingWindowLayer")
#: Why the other kinds of transformers' caches are not replayed, by class name.
WHY = {
    "StaticLayer": "its keys sit in max_cache_len fixed slots written at cache_position, the "
                   "empty slots masked (not the last positions of a growing cache)",
    "StaticSlidingWindowLayer": "a fixed ring of slots overwritten in turn (the keys are not "
                                "in position order)",
    "QuantizedLayer": "its keys and values are stored quantized (int2/int4) and dequantized "
                      "on read: they are not the layer's",
    "LinearAttentionLayer": "a recurrent state (linear attention, Mamba), not keys and values",
    "DummyLayer": "no keys or values (a layer that reads another layer's cache)",
    "EncoderDecoderCache": "an encoder-decoder's two caches (self and cross-attention)",
}


def _why(obj) -> str:
    for cls in type(obj).__mro__:
        if cls.__name__ in WHY:
            return WHY[cls.__name__]
    return "a cache kind the diff does not read"


def check_cache(cache) -> None:
    """Refuse (:class:`UnsupportedLayer`, naming the class and why) a cache whose layer calls
    cannot be replayed: anything but a ``DynamicCache`` of ``DynamicLayer`` and
    ``DynamicSlidingWindowLayer`` layers, not offloaded (a legacy tuple of tuples, a static,
    quantized, offloaded, hybrid or encoder-decoder cache)."""
    name = type(cache).__name__
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        article = "an" if name[:1] in "AEIOU" else "a"
        raise UnsupportedLayer(f"{article} {name} as the cache is not supported ({_why(cache)}); a "
                               "transformers DynamicCache is (what generate() makes by default)")
    if getattr(cache, "offloading", False):
        raise UnsupportedLayer(f"{name} with offloading=True is not supported (its layers move "
                               "between devices during the forward); without offloading it is")
    for i, layer in enumerate(layers):
        if type(layer).__name__ not in READABLE:
            raise UnsupportedLayer(
                f"{name}: layer {i} is a {type(layer).__name__} ({_why(layer)}): not supported; "
                f"a cache of {' and '.join(READABLE)} layers is")
    if name in WHY or any(c.__name__ == "EncoderDecoderCache" for c in type(cache).__mro__):
        raise UnsupportedLayer(f"{name} is not supported ({_why(cache)}); a DynamicCache is")


def cached_keys_values(cache, index: int):
    """The keys and values ``(B, h_kv, n, d)`` layer ``index`` of ``cache`` holds now (copies),
    or None when it holds nothing yet."""
    if index >= len(cache.layers):
        return None
    layer = cache.layers[index]
    if not getattr(layer, "is_initialized", False) or layer.keys is None or \
            layer.keys.numel() == 0:
        return None
    return layer.keys.detach().clone(), layer.values.detach().clone()


def kv_heads(spec: LayerSpec, k, v, name: str) -> tuple:
    """A layer's cached ``k, v (B, h', n, d)`` with the layer's ``h_kv`` key/value heads: as
    held, or, held broadcast to ``h' = g h_kv`` heads (Falcon's new decoder architecture caches
    each key/value head copied to its ``g`` query heads), one of each group's ``g`` equal
    copies; copies that differ are refused by name."""
    have, want = k.shape[-3], spec.num_kv_heads
    if have == want:
        return k, v
    g = have // want
    grouped = [t.reshape(*t.shape[:-3], want, g, *t.shape[-2:]) for t in (k, v)]
    if have % want or not all((t == t[..., :1, :, :]).all() for t in grouped):
        raise UnsupportedLayer(f"{name}: a cache holding {have} key/value heads for the "
                               f"layer's {want} (not {want} heads each copied to its query "
                               "heads) is not supported")
    return tuple(t[..., 0, :, :] for t in grouped)


def new_keys_values(spec: LayerSpec, params: dict, x, cos_sin=None):
    """Our keys and values of the positions ``x (B, T, d_model)``, as a cache holds them:
    ``(B, h_kv, T, d_k)`` projected and QK-normed, then (RoPE) turned by the ``cos_sin`` the
    layer was given, ``(B, T, r)`` each (the model's, checked against ours in the rotary row:
    its float32 angles are the cache's); ``(B, h_kv, T, d_v)`` projected. A layout of cos and
    sin other than a family's plain ``"half"`` or ``"interleaved"`` pairs is refused by name."""
    opts = mha_options(spec)
    if "W_o" not in params:                    # (BERT's, GIT's: the concatenated heads)
        params = {**params, "W_o": np.eye(spec.num_heads * spec.head_dim)}
    x, _, _, layer = check_layer("new_keys_values", x, x, x, params,
                                 replace(opts["spec"], rope=None), spec.num_heads, spec.scale)
    q = project_heads(x, params, "q", layer.num_heads)
    k = project_heads(x, params, "k", layer.num_kv_heads)
    v = project_heads(x, params, "v", layer.num_kv_heads)
    _, k, _ = transform_qk(q, k, params, layer, None, None)                 # QK-norm only
    if spec.attention.rope is not None:
        k = _turn(k, *cos_sin, spec)
    return k, v


def _turn(k, cos, sin, spec: LayerSpec):
    """``k (B, h_kv, T, d)`` turned by transformers' ``cos, sin (B, T, r)`` (the first ``r``
    features): ``k * cos + turn(k) * sin``, ``turn`` the pair layout's quarter turn. The cos
    and sin are those the layer was given, or those its own rotary embedding returned in the
    call (IDEFICS, Moshi: ``spec.rope_inputs.in_layer``); a layer whose cos and sin were not seen
    (a sin|cos table of its own, indexed inside the layer) is refused by name."""
    if cos is None:
        raise UnsupportedLayer(f"{spec.family}: the cached keys of a layer whose RoPE cos and "
                               "sin were not seen (not passed to it, not returned by a rotary "
                               "embedding of its own: a sin|cos table indexed inside the "
                               "layer) are not recomputed; a layer given cos and sin, or "
                               "calling its own rotary embedding for them, is")
    given, layout = spec.rope_inputs, spec.attention.rope.layout
    cos, sin = (np.asarray(t)[:, None] for t in ((sin, cos) if given.sin_first else
                                                 (cos, sin)))              # (B, 1, T, r|r/2)
    angles = given.angles_layout or layout
    if cos.shape[-1] * 2 == spec.rotated_width:   # gpt-oss, GPT-J: the r/2 angles, as pairs need
        cos, sin = ((np.repeat(t, 2, axis=-1) if angles == "interleaved" else
                     np.concatenate([t, t], axis=-1)) for t in (cos, sin))
    elif angles != layout:                    # GLM: concatenated angles, interleaved pairs
        cos, sin = (np.repeat(t[..., :t.shape[-1] // 2], 2, axis=-1) for t in (cos, sin))
    r = cos.shape[-1]
    x = k[..., :r]
    if layout == "interleaved":
        turned = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)
    else:
        turned = np.concatenate([-x[..., r // 2:], x[..., :r // 2]], axis=-1)
    return np.concatenate([x * cos + turned * sin, k[..., r:]], axis=-1)


def refuse_cached(spec: LayerSpec, name: str) -> None:
    """A layer whose call with a filled cache is not replayed, refused by what it has."""
    bias, residual = spec.relative_bias, spec.residual
    for what, has in (("T5's relative position bias table", isinstance(bias, T5Buckets)),
                      ("a 2-D relative position bias table", isinstance(bias, GridTable)),
                      ("a LayerNorm after the attention (ALBERT)",
                       residual is not None and residual.norm_eps is not None),
                      ("keys and values from another sequence (cross-attention)", spec.cross)):
        if has:
            raise UnsupportedLayer(f"{name}: a call continuing from a KV cache of a layer with "
                                   f"{what} is not supported; a causal self-attention layer's is")


def replay_cached(spec: LayerSpec, params: dict, x, cached_k, cached_v, mask, dout, *,
                  positions=None, bias=None) -> dict:
    """attention_np's forward and backward of a layer's call on new positions ``x (B, T,
    d_model)`` after ``n`` cached ones (``cached_k (B, h_kv, n, d_k)``, ``cached_v``):
    ``{"out", "dhidden_states", "d<param>"...}`` in the names of ``params``.

    ``out`` is :func:`~attention_np.compose.decode.mha_decode_step` on a :class:`KVCache`
    holding the cached keys and values; the gradients are those of the same steps
    (:mod:`attention_np.compose.pipeline`), the cached keys and values constants. ``mask``
    bool ``(B, 1, T, n + T)`` (padding, the window; the bottom-right causal mask is the
    step's), ``bias`` additive ``(.., h, T, n + T)`` (ALiBi), ``positions (B, T)`` RoPE's."""
    p = dict(params)
    if "W_o" not in p:                         # (BERT's, GIT's: the concatenated heads)
        p["W_o"] = np.eye(spec.num_heads * spec.head_dim)
    opts = mha_options(spec, positions)
    T, n = x.shape[-2], cached_k.shape[-2]
    allowed = causal_mask(T, n + T, align="bottom_right")
    if not spec.is_causal and (mask is None or (mask & ~allowed).any()):
        raise UnsupportedLayer(f"{spec.family}: a call continuing from a KV cache of a layer "
                               "whose mask lets a new query see a later position (not causal) "
                               "is not supported; a causal layer's (by its mask too) is")
    kv = KVCache(n + T)
    kv.append(cached_k, cached_v)
    out = mha_decode_step(x, p, kv, mask=mask, bias=bias, **opts)        # (B, T, d_model)
    # the same step again, keeping what the backward needs
    x, _, _, layer = check_layer("replay_cached", x, x, x, p, opts["spec"], spec.num_heads,
                                 spec.scale)
    at = head_positions(positions, T, start=n)
    q = project_heads(x, p, "q", layer.num_heads)                       # (B, h, T, d_k)
    k_new = project_heads(x, p, "k", layer.num_kv_heads)                # (B, h_kv, T, d_k)
    v_new = project_heads(x, p, "v", layer.num_kv_heads)
    q, k_new, transforms = transform_qk(q, k_new, p, layer, at, at)
    k = np.concatenate([np.broadcast_to(cached_k, k_new.shape[:-2] + cached_k.shape[-2:]),
                        k_new], axis=-2)                                # (B, h_kv, n + T, d_k)
    v = np.concatenate([np.broadcast_to(cached_v, v_new.shape[:-2] + cached_v.shape[-2:]),
                        v_new], axis=-2)
    heads, kernel_cache = attend_heads(q, k, v, p, layer, bias=bias,
                                       mask=allowed if mask is None else mask & allowed)
    _, concat = output(heads, p)                                        # out, as above
    grads = {}
    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, concat, p["W_o"], "b_o" in p)
    kernel_grads = attend_backward(split_heads(dconcat, layer.num_heads), kernel_cache)
    dq, dk, dv = kernel_grads.qkv
    if kernel_grads.dsinks is not None:
        grads["sinks"] = kernel_grads.dsinks
    dq, dk = transform_qk_backward(dq, dk[..., n:, :], transforms, grads)   # new keys only
    dx, grads["W_q"], grads["b_q"] = project_heads_backward(dq, x, p, "q")
    dxk, grads["W_k"], grads["b_k"] = project_heads_backward(dk, x, p, "k")
    dxv, grads["W_v"], grads["b_v"] = project_heads_backward(dv[..., n:, :], x, p, "v")
    ours = {"out": out, "dhidden_states": dx + dxk + dxv}
    ours.update({f"d{name}": grads[name] for name in params})
    return ours
