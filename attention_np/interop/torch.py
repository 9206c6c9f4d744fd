"""PyTorch ⇄ attention_np: ``nn.MultiheadAttention`` parameters, its masks, and SDPA arguments.

Importing this module needs only NumPy; the functions that build or read torch objects import
torch when called. Three conventions differ between PyTorch and this project:

- **weights**: ``nn.Linear`` stores ``(d_out, d_in)`` and computes ``x @ W.T + b``; we store the
  paper's ``(d_in, d_out)`` and compute ``x @ W + b``. Every conversion is a transpose. The
  three input projections are packed row-wise into ``in_proj_weight = [W_q.T; W_k.T; W_v.T]``
  ``(3E, E)`` when ``kdim == vdim == E``, and kept apart as ``q_proj_weight (E, E)``,
  ``k_proj_weight (E, kdim)``, ``v_proj_weight (E, vdim)`` otherwise; the biases are always
  packed in ``in_proj_bias (3E,)``.
- **mask polarity**: ``nn.MultiheadAttention``'s bool ``key_padding_mask`` and ``attn_mask``
  are True = *blocked*; ours (and SDPA's) are True = may attend.
- **float masks**: torch adds a float ``attn_mask`` to the scores. Here a float array is a
  ``bias``; its ``-inf`` entries are what a bool mask says, so they become ``mask=False``.
"""

from __future__ import annotations

import functools

import numpy as np

from attention_np._checks import (
    as_bool_mask,
    check_array,
    check_count,
    check_flag,
    check_instance,
    check_number,
    check_params_dict,
)
from attention_np._optional import import_optional
from attention_np.paper.masks import causal_mask, mask_from_blocked

_IN_PROJ = ("W_q", "W_k", "W_v")
_BIASES = ("b_q", "b_k", "b_v", "b_o")


def _torch():
    return import_optional("torch", "attention_np.interop.torch")


def check_real_input(x, name: str, layout: str = "") -> None:
    """``x`` is a real floating-point torch tensor or array (a ``TypeError`` naming ``name``, its
    type or dtype and ``layout`` otherwise): a string, a bool, int or complex array is refused
    before it is converted, not by what the conversion or the layer trips over."""
    if hasattr(x, "detach") and hasattr(x, "is_floating_point"):      # a torch tensor
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a real floating-point tensor {layout}, got dtype "
                            f"{x.dtype}".replace("  ", " "))
        return
    check_array(x, name, layout=layout)


def to_numpy(x, dtype=None) -> np.ndarray | None:
    """A torch tensor or anything array-like as a NumPy array (None stays None).

    A tensor is detached (``requires_grad`` or not), moved to the CPU, its conjugate and
    negative bits resolved, and strided (a sparse tensor made dense); a view keeps its strides.
    ``dtype`` (``np.float64``, ``np.float32``, ...) converts in torch before the copy, so a
    ``bfloat16`` or ``float16`` checkpoint reads exactly as float64 (every bf16 and fp16 number is
    a float32 and a float64 one). Without ``dtype`` a floating tensor keeps its dtype when NumPy
    has it (float16, float32, float64) and is upcast, exactly, to float32 when NumPy has none
    (``bfloat16``, the ``float8`` kinds); a complex one without a NumPy dtype (``complex32``)
    becomes complex64.
    """
    if x is None:
        return None
    if hasattr(x, "detach") and hasattr(x, "is_floating_point"):      # a torch tensor
        import torch
        x = x.detach().cpu()
        if x.layout != torch.strided:
            x = x.to_dense()
        x = x.resolve_conj().resolve_neg()
        if dtype is not None:
            x = x.to(getattr(torch, np.dtype(dtype).name))
        elif x.is_floating_point() and x.dtype not in (torch.float16, torch.float32, torch.float64):
            x = x.to(torch.float32)
        elif x.is_complex() and x.dtype not in (torch.complex64, torch.complex128):
            x = x.to(torch.complex64)
        return x.numpy()
    return np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)


# ---------------------------------------------------------------- nn.MultiheadAttention weights

def _check_module(module, name: str = "module", optional: bool = False):
    """``module`` is a ``torch.nn.MultiheadAttention`` (None too when ``optional``)."""
    if module is None and optional:
        return None
    return check_instance(module, _torch().nn.MultiheadAttention, name, optional=optional)


def _torch_mha_tensors(module, attr: str = "data") -> dict:
    """Our parameter names -> the module's tensors (or their ``.grad``), in torch's layout."""
    E = module.embed_dim

    def get(t):
        return None if t is None else getattr(t, attr)

    if module._qkv_same_embed_dim:
        packed = get(module.in_proj_weight)                       # (3E, E): rows [Wq; Wk; Wv]
        weights = dict(zip(_IN_PROJ, (packed[:E], packed[E:2 * E], packed[2 * E:]), strict=True))
    else:
        weights = {"W_q": get(module.q_proj_weight), "W_k": get(module.k_proj_weight),
                   "W_v": get(module.v_proj_weight)}
    weights["W_o"] = get(module.out_proj.weight)
    if module.in_proj_bias is not None:
        packed = get(module.in_proj_bias)                          # (3E,)
        weights.update(b_q=packed[:E], b_k=packed[E:2 * E], b_v=packed[2 * E:],
                       b_o=get(module.out_proj.bias))
    if module.bias_k is not None:                                  # add_bias_kv: (1, 1, E) each
        weights.update(bias_k=get(module.bias_k), bias_v=get(module.bias_v))
    return weights


def params_from_torch_mha(module, *, grads: bool = False) -> tuple[dict, int]:
    """Read an ``nn.MultiheadAttention`` as ``(params, num_heads)`` for :func:`mha_forward`.

    Parameters
    ----------
    module : torch.nn.MultiheadAttention
        Packed ``in_proj_weight`` or separate ``q/k/v_proj_weight`` (kdim/vdim != embed_dim),
        with or without bias; ``add_bias_kv`` gives ``bias_k``, ``bias_v`` ``(E,)`` (for
        :func:`~attention_np.compose.extra_kv.mha_extra_kv_forward`).
    grads : bool
        Read the parameters' ``.grad`` instead of their values (same names, same layout), to
        compare torch's gradients with :func:`mha_backward`'s.

    Returns
    -------
    params : dict of NumPy arrays in the module's dtype
        ``W_q = q_proj.T (E, E)``, ``W_k (kdim, E)``, ``W_v (vdim, E)``, ``W_o = out_proj.weight.T``,
        and the biases when the module has them.
    num_heads : int
    """
    _check_module(module)
    check_flag(grads, "grads")
    tensors = _torch_mha_tensors(module, "grad" if grads else "data")
    missing = [n for n, t in tensors.items() if t is None]
    if missing:
        raise ValueError(f"module has no .grad for {missing}: run a backward pass first")
    params = {}
    for name, t in tensors.items():
        a = to_numpy(t)
        params[name] = a.T.copy() if name.startswith("W") else a.reshape(-1).copy() \
            if name.startswith("bias_") else a.copy()                  # (out, in) -> (in, out)
    return params, module.num_heads


def params_to_torch_mha(params: dict, num_heads: int, *, batch_first: bool = True, module=None):
    """Build (or fill) an ``nn.MultiheadAttention`` that computes what ``mha_forward`` does.

    Parameters
    ----------
    params : dict from :func:`init_mha_params`
        torch needs ``h*d_k == h*d_v == d_model`` (its head width is ``embed_dim // num_heads``)
        and either all four biases or none.
    num_heads : int
    batch_first : bool
        Layout of the new module's inputs, ``(N, L, E)`` if True else ``(L, N, E)``.
    module : torch.nn.MultiheadAttention, optional
        Copy the weights into this module instead of building a new one.

    Returns
    -------
    module : torch.nn.MultiheadAttention in the dtype of ``params``
    """
    torch = _torch()
    W_q, W_k, W_v, W_o = _check_mha_weights(params, num_heads)
    check_flag(batch_first, "batch_first")
    _check_module(module, optional=True)
    has_bias = _check_torch_can_hold(params, W_q, W_k, W_v, W_o)
    if module is None:
        module = torch.nn.MultiheadAttention(W_q.shape[0], num_heads, bias=has_bias, kdim=W_k.shape[0],
                                             vdim=W_v.shape[0], batch_first=batch_first,
                                             dtype=getattr(torch, np.dtype(W_q.dtype).name))
    targets = _torch_mha_tensors(module, "data")
    if set(targets) != set(params):
        raise ValueError(f"module has parameters {sorted(targets)} but params has {sorted(params)}")
    with torch.no_grad():
        for name, t in targets.items():
            t.copy_(torch.from_numpy(np.ascontiguousarray(_torch_layout(name, params[name], t))))
    return module


def _check_mha_weights(params: dict, num_heads) -> tuple:
    """``W_q, W_k, W_v, W_o`` of ``params`` as arrays: present, 2-D, ``num_heads`` dividing h*d_k."""
    check_params_dict(params)
    missing = [n for n in ("W_q", "W_k", "W_v", "W_o") if n not in params]
    if missing:
        raise ValueError(f"params is missing {missing} (init_mha_params makes W_q, W_k, W_v, W_o)")
    W_q, W_k, W_v, W_o = (np.asarray(params[n]) for n in ("W_q", "W_k", "W_v", "W_o"))
    if any(W.ndim != 2 for W in (W_q, W_k, W_v, W_o)):
        raise ValueError(f"params['W_q'], ['W_k'], ['W_v'], ['W_o'] must be 2-D, got shapes "
                         f"{[W.shape for W in (W_q, W_k, W_v, W_o)]}")
    check_count(num_heads, "num_heads")
    if W_q.shape[1] % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide h*d_k = {W_q.shape[1]} (params['W_q'])")
    return W_q, W_k, W_v, W_o


def _check_torch_can_hold(params: dict, W_q, W_k, W_v, W_o) -> bool:
    """Whether ``params`` has biases, after refusing what torch's module cannot hold: a head
    width other than ``embed_dim // num_heads`` (every projection h*d = d_model), some biases only."""
    E = W_q.shape[0]
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        if W.shape[1] != E:
            raise ValueError(f"params['{name}'] has {W.shape[1]} output columns but torch's "
                             f"MultiheadAttention needs h*d = embed_dim = {E} (d_model)")
    if W_o.shape != (E, E):
        raise ValueError(f"params['W_o'] has shape {W_o.shape}, torch needs ({E}, {E})")
    has_bias = [b in params for b in _BIASES]
    if any(has_bias) and not all(has_bias):
        raise ValueError(f"torch's MultiheadAttention has all of {list(_BIASES)} or none; "
                         f"params has {[b for b in _BIASES if b in params]}")
    return all(has_bias)


def _torch_layout(name: str, value, target) -> np.ndarray:
    """``params[name]`` in the layout of torch's tensor ``target``: weights (in, out) -> (out, in),
    biases reshaped; a shape that still differs refused by name."""
    value = np.asarray(value)
    value = value.T if name.startswith("W") else value                     # (in, out) -> (out, in)
    value = value.reshape(tuple(target.shape)) if name.startswith("bias_") else value
    if tuple(target.shape) != value.shape:
        raise ValueError(f"params['{name}'] gives torch shape {value.shape}, module "
                         f"expects {tuple(target.shape)}")
    return value


def mha_forward_backward(module, query, key, value, dout, **kwargs):
    """Run ``module`` forward and autograd backward on NumPy inputs.

    ``query``, ``key`` and ``value`` each become their own leaf, even when they are one array
    (self-attention), so that torch does not add their gradients together. The module's
    ``.grad`` values are overwritten. ``kwargs`` go to ``module.forward`` (masks,
    ``need_weights``, ...).

    Returns
    -------
    out, weights : NumPy arrays in the module's layout (``weights`` None without need_weights)
    dinputs : (dquery, dkey, dvalue)
    grads : dict, the parameter gradients in our names and layout
        (:func:`params_from_torch_mha` with ``grads=True``)
    """
    torch = _torch()
    _check_module(module)
    arrays = [check_array(to_numpy(a), n, min_ndim=2) for n, a in (("query", query), ("key", key),
                                                                     ("value", value))]
    dout = check_array(to_numpy(dout), "dout", min_ndim=2)
    if dout.shape[:-1] != arrays[0].shape[:-1] or dout.shape[-1] != module.embed_dim:
        raise ValueError(f"dout must have the output's shape, query's {arrays[0].shape[:-1]} + "
                         f"(embed_dim={module.embed_dim},), got {dout.shape}")
    query, key, value = arrays
    module.zero_grad(set_to_none=True)
    leaves = [torch.tensor(np.asarray(a), requires_grad=True) for a in (query, key, value)]
    if kwargs.get("static_k") is not None or kwargs.get("static_v") is not None:
        out, weights = _functional_mha(module, *leaves, **kwargs)
    else:
        out, weights = module(*leaves, **kwargs)
    out.backward(torch.from_numpy(np.ascontiguousarray(dout)))
    grads, _ = params_from_torch_mha(module, grads=True)
    dinputs = tuple(np.zeros(t.shape, dtype=to_numpy(t).dtype) if t.grad is None   # static_k/v
                    else to_numpy(t.grad) for t in leaves)
    return to_numpy(out), to_numpy(weights), dinputs, grads


def _functional_mha(module, query, key, value, **kwargs):
    """``module``'s forward through ``F.multi_head_attention_forward``, the one entry point
    that takes ``static_k``/``static_v`` (``nn.MultiheadAttention.forward`` does not)."""
    torch = _torch()
    if module.batch_first and query.dim() == 3:                 # F takes (L, N, E)
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    separate = not module._qkv_same_embed_dim
    out, weights = torch.nn.functional.multi_head_attention_forward(
        query, key, value, module.embed_dim, module.num_heads, module.in_proj_weight,
        module.in_proj_bias, module.bias_k, module.bias_v, module.add_zero_attn, 0.0,
        module.out_proj.weight, module.out_proj.bias, training=False,
        use_separate_proj_weight=separate, q_proj_weight=module.q_proj_weight,
        k_proj_weight=module.k_proj_weight, v_proj_weight=module.v_proj_weight, **kwargs)
    if module.batch_first and query.dim() == 3:
        out = out.transpose(0, 1)
    return out, weights


# ---------------------------------------------------------------- masks

def split_float_mask(float_mask) -> tuple[np.ndarray | None, np.ndarray]:
    """A torch float mask (added to the scores) as our ``(mask, bias)``.

    ``-inf`` entries mean "blocked": they become ``mask=False`` and bias 0 there, so the bias
    stays finite. So do entries at or below float32's minimum (about -3.4e38): masks filled with
    ``torch.finfo(dtype).min``, as transformers builds them, block those keys too (torch then
    gives a fully masked row the mean of the values; attention_np gives 0, see
    docs/frameworks.md). ``mask`` is None when nothing is blocked.
    """
    f = check_array(to_numpy(float_mask), "float_mask")
    blocked = np.isneginf(f) | (f <= np.finfo(np.float32).min)
    if not blocked.any():
        return None, f
    return ~blocked, np.where(blocked, 0, f).astype(f.dtype)


def _combine(masks, biases):
    """Masks AND together (every one must allow), biases add up; None when there are none."""
    return (functools.reduce(np.logical_and, masks) if masks else None,
            functools.reduce(np.add, biases) if biases else None)


def masks_from_torch_mha(key_padding_mask=None, attn_mask=None, *, num_heads: int):
    """``nn.MultiheadAttention``'s masks as our ``(mask, bias)`` for :func:`mha_forward`.

    Parameters
    ----------
    key_padding_mask : (N, S) or (S,), bool (True = blocked) or float (added), optional
    attn_mask : (L, S) or (N*num_heads, L, S), bool (True = blocked) or float, optional
    num_heads : int

    Returns
    -------
    mask : bool (True = may attend), broadcastable to (N, h, L, S), or None
    bias : float, broadcastable to (N, h, L, S), or None
    """
    check_count(num_heads, "num_heads")
    masks, biases = [], []
    for name, m in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
        if m is None:
            continue
        m = to_numpy(m)
        if name == "key_padding_mask":
            if m.ndim not in (1, 2):
                raise ValueError(f"key_padding_mask must be (N, S) or (S,), got shape {m.shape}")
            m = m[..., None, None, :]                                   # (N, 1, 1, S)
        elif m.ndim == 3:
            if m.shape[0] % num_heads:
                raise ValueError(f"attn_mask of shape {m.shape}: first dim must be "
                                 f"N*num_heads with num_heads={num_heads}")
            m = m.reshape(-1, num_heads, *m.shape[1:])                  # (N*h, L, S) -> (N, h, L, S)
        elif m.ndim != 2:
            raise ValueError(f"attn_mask must be (L, S) or (N*num_heads, L, S), got shape {m.shape}")
        if m.dtype == np.bool_:
            masks.append(mask_from_blocked(m))                          # True = blocked -> may attend
        elif np.issubdtype(m.dtype, np.floating):
            allowed, bias = split_float_mask(m)
            masks += [] if allowed is None else [allowed]
            biases.append(bias)
        else:
            raise TypeError(f"{name} must be bool or floating, got dtype {m.dtype}")
    return _combine(masks, biases)


def masks_to_torch_mha(mask=None, *, bias=None, num_heads: int, batch_size: int | None = None):
    """Our ``(mask, bias)`` as keyword arguments for ``nn.MultiheadAttention.forward``.

    A bool mask of shape ``(N, 1, 1, S)`` (key padding) becomes ``key_padding_mask (N, S)``.
    Anything else becomes ``attn_mask``: ``(L, S)`` when it is the same for every batch entry
    and head, else ``(N*h, L, S)``. With a bias the ``attn_mask`` is float: ``bias`` where
    allowed, ``-inf`` where masked.

    Parameters
    ----------
    mask : bool, broadcastable to (N, h, L, S), optional
    bias : float, broadcastable to (N, h, L, S), optional
    num_heads : int
    batch_size : int, optional
        ``N``. torch wants the batch axis written out, so it is needed when the mask has a
        batch axis of 1 (or none) but is not the same for every head and batch entry.

    Returns
    -------
    dict with ``key_padding_mask`` and/or ``attn_mask`` as torch tensors (True = blocked).
    """
    torch = _torch()
    check_count(num_heads, "num_heads")
    check_count(batch_size, "batch_size", optional=True)
    if bias is not None:
        bias = check_array(to_numpy(bias), "bias")
    if mask is None and bias is None:
        return {}
    if mask is not None:
        mask = as_bool_mask(to_numpy(mask))
    shape, lead = _mha_mask_shape(mask, bias, batch_size)
    n = batch_size if batch_size is not None else lead[0]
    needs_n = lead[0] == 1 and batch_size is None
    if bias is None and len(shape) == 4 and shape[1:3] == (1, 1):         # (N, 1, 1, S)
        if needs_n:
            raise ValueError(f"mask of shape {shape} is a key padding mask shared by the batch: "
                             "torch wants it as (N, S), pass batch_size")
        blocked = ~np.broadcast_to(mask[:, 0, 0, :], (n, shape[-1]))      # True = blocked
        return {"key_padding_mask": torch.from_numpy(np.ascontiguousarray(blocked))}
    if lead != (1, 1) and needs_n:
        raise ValueError(f"mask/bias of shape {shape} differs between heads: torch wants it "
                         "as (N*h, L, S), pass batch_size")
    full = (1, 1, *shape[-2:]) if lead == (1, 1) else (n, num_heads, *shape[-2:])
    attn = _blocked_or_bias(mask, bias, full).reshape(-1, *shape[-2:])    # (N*h, L, S)
    attn = attn[0] if lead == (1, 1) else attn                          # the same (L, S) for all
    return {"attn_mask": torch.from_numpy(np.ascontiguousarray(attn))}


def _mha_mask_shape(mask, bias, batch_size) -> tuple:
    """The broadcast shape of ``mask`` and ``bias`` (at most 4-D) and its leading ``(N or 1,
    h or 1)``; a batch other than 1 or ``batch_size`` refused."""
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in (mask, bias) if a is not None))
    except ValueError:
        raise ValueError(f"mask {np.shape(mask)} and bias {np.shape(bias)} do not broadcast "
                         f"together") from None
    if len(shape) > 4:
        raise ValueError(f"mask/bias of shape {shape}: torch MHA takes at most (N, h, L, S)")
    lead = (1,) * (4 - len(shape)) + shape[:-2]                          # (N or 1, h or 1)
    if batch_size is not None and lead[0] not in (1, batch_size):
        raise ValueError(f"mask/bias of shape {shape} has batch {lead[0]}, not batch_size={batch_size}")
    return shape, lead


def _blocked_or_bias(mask, bias, full: tuple) -> np.ndarray:
    """torch's ``attn_mask`` over ``full``: bool True = blocked, or with a bias the float bias
    where allowed and ``-inf`` where masked."""
    if bias is None:
        return ~np.broadcast_to(mask, full)
    attn = np.broadcast_to(np.asarray(bias), full).copy()
    if mask is not None:
        attn[~np.broadcast_to(mask, full)] = -np.inf
    return attn


# ---------------------------------------------------------------- scaled_dot_product_attention

def to_torch_sdpa(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None,
                  enable_gqa: bool = False) -> dict:
    """Keyword arguments for ``torch.nn.functional.scaled_dot_product_attention`` that compute
    what ``sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)`` does.

    Layouts agree (``(..., H, L, E)``) and a bool mask has the same polarity. Two choices keep
    the call portable across torch's backends:

    - ``is_causal`` together with a mask or bias is folded into ``attn_mask``: torch's math
      backend refuses ``attn_mask`` with ``is_causal``, the default CPU backend ANDs them.
    - mask and bias together become one float ``attn_mask``: ``bias`` where allowed, ``-inf``
      where masked (torch SDPA gives a fully ``-inf`` row 0, as we do).

    ``enable_gqa`` is passed through: torch's query head ``n`` uses key/value head
    ``n // (H / H_kv)``.

    Returns
    -------
    dict with ``query, key, value`` (torch tensors) and ``attn_mask, is_causal, scale,
    enable_gqa``; call ``F.scaled_dot_product_attention(**kwargs)``.
    """
    torch = _torch()
    q, k, v = (check_array(to_numpy(a), n, min_ndim=2, layout="(..., H, L or S, E)")
               for n, a in (("q", q), ("k", k), ("v", v)))
    check_flag(is_causal, "is_causal")
    check_flag(enable_gqa, "enable_gqa")
    scale = check_number(scale, "scale", optional=True)
    if bias is not None:
        check_array(to_numpy(bias), "bias")
    L, S = q.shape[-2], k.shape[-2]
    if mask is not None:
        mask = as_bool_mask(mask)
    if is_causal and (mask is not None or bias is not None):
        causal = causal_mask(L, S)
        mask, is_causal = (causal if mask is None else mask & causal), False
    attn_mask = mask
    if bias is not None:
        bias = np.asarray(bias, dtype=q.dtype)
        attn_mask = bias if mask is None else np.where(mask, bias, q.dtype.type(-np.inf))
    kwargs = {name: torch.from_numpy(np.ascontiguousarray(a))
              for name, a in (("query", q), ("key", k), ("value", v))}
    kwargs["attn_mask"] = None if attn_mask is None else torch.from_numpy(
        np.ascontiguousarray(attn_mask))
    kwargs.update(is_causal=bool(is_causal), scale=scale, enable_gqa=enable_gqa)
    return kwargs


def from_torch_sdpa(attn_mask=None, is_causal: bool = False, scale=None) -> dict:
    """``scaled_dot_product_attention``'s mask arguments as keyword arguments for ``sdpa_forward``.

    A bool ``attn_mask`` is our ``mask`` unchanged (same polarity); a float one is split into
    ``mask`` (its ``-inf`` or ``finfo.min`` entries, :func:`split_float_mask`) and ``bias``
    (the rest). A ``CausalBias`` from
    ``torch.nn.attention.bias`` (``causal_upper_left`` / ``causal_lower_right``) becomes the
    matching :func:`causal_mask`.
    """
    check_flag(is_causal, "is_causal")
    scale = check_number(scale, "scale", optional=True)
    kwargs = {"mask": None, "bias": None, "is_causal": bool(is_causal), "scale": scale}
    if attn_mask is None:
        return kwargs
    variant = getattr(attn_mask, "variant", None)
    if variant is not None:                                   # torch.nn.attention.bias.CausalBias
        from torch.nn.attention.bias import CausalVariant
        align = "bottom_right" if variant == CausalVariant.LOWER_RIGHT else "top_left"
        kwargs["mask"] = causal_mask(attn_mask.seq_len_q, attn_mask.seq_len_kv, align=align)
        return kwargs
    m = to_numpy(attn_mask)
    if m.dtype != np.bool_ and not np.issubdtype(m.dtype, np.floating):
        raise TypeError(f"attn_mask must be bool (True = may attend) or floating (added to the "
                        f"scores), got dtype {m.dtype}")
    if m.dtype == np.bool_:
        kwargs["mask"] = m
    else:
        kwargs["mask"], kwargs["bias"] = split_float_mask(m)
    return kwargs
