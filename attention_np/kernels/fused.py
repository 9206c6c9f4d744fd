r"""Eq. (1), fused: the same numbers as :mod:`attention_np.kernels.reference` in fewer passes.

This is what ``attention_np.sdpa_forward`` / ``sdpa_backward`` and multi-head attention run.
Read :mod:`attention_np.kernels.reference` first; this file changes *how* Eq. (1) is computed,
never *what*, and the tests hold the two equal to float64 rounding. What it changes:

- **deferred normalisation**: the softmax's division by the row sums ``l`` moves after the
  product with ``v`` (``out = (e @ v) / l``), dividing L*d_v numbers instead of L*S;
- **one (L, S) buffer** reused in place for the scores, their exponentials and ``dscores``;
- **grouped-query attention** (``spec.enable_gqa``, see :mod:`attention_np.variants.gqa`) by
  broadcasting, never copying the key/value heads;
- **attention dropout**, its ``1/(1-p)`` folded onto the (L, d_v) output;
- **attention sinks** (``plan.sinks``, :mod:`attention_np.variants.sinks`): one more term in each
  row's max and sum, never an extra key.

Forward and hand-written backward, as a pair: ``out, cache = sdpa_forward(...)`` then
``dq, dk, dv = sdpa_backward(dout, cache)``.

Shapes: ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)`` -> ``out (..., L, d_v)``;
leading batch dims broadcast, and each gradient is summed back to its input's shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import (
    as_bool_mask,
    check_bool,
    check_cache,
    check_dout,
    check_dropout_p,
    check_qkv,
    check_rng,
    sum_to_shape,
)
from attention_np.kernels import blocked
from attention_np.kernels.grads import Grads
from attention_np.kernels.guard import (
    all_finite,
    attended,
    drop_masked,
    mask_and_bias,
    masked_matmul,
    zero_masked,
)
from attention_np.kernels.plan import Plan, plan_from
from attention_np.kernels.row_sums import rows_product
from attention_np.kernels.scores import add_bias, bias_gradient, grow_to, overflowed, scaled_scores
from attention_np.kernels.softmax_inplace import softmax_numerator_, softmax_numerator_with_sink_
from attention_np.variants.dropout import dropout_keep
from attention_np.variants.gqa import group_heads, group_kv, group_queries, kv_groups, ungroup_queries
from attention_np.variants.sinks import check_sinks
from attention_np.variants.softcap import check_softcap, softcap_backward, softcap_forward
from attention_np.variants.spec import refuse_elsewhere


@dataclass(frozen=True, kw_only=True)
class SDPACache:
    """What :func:`sdpa_backward` needs from the forward pass, and nothing else.

    Keyword-only: ``SDPACache(q=q, k=k, v=v, out=out, scale=s, e=e, l=l)`` is a plain forward's
    cache; each option the forward used sets its own field (None, or 1, when it was not used).

    The inputs and the output are kept as the caller has them. What the kernel computed between
    them is kept in the layout it computed it in: with grouped-query attention (``kv_groups = G >
    1``) every per-query-head array is grouped, ``(..., H_kv, G, L, .)``
    (:mod:`attention_np.variants.gqa`), and the backward reads it as it is. The properties below
    (``weights``, ``exp_scores``, ``rowsum``, ``softcap_tanh``, ``sink_weight``,
    ``dropout_mask``) give those arrays in the caller's layout, ``(..., H, L, .)`` (views; the
    blocked path's ``weights`` and ``exp_scores`` unpack its ``e`` into a new array).

    Attributes
    ----------
    q, k, v : the inputs (unscaled ``q``; keys no query attends and queries that attend no key
        zeroed)
    out : (..., L, d_v) the output (its row sums with ``dout`` shortcut the softmax backward)
    scale : the factor applied to ``QKᵀ``
    e : (..., L, S) ``exp(scores - rowmax)``, the softmax before its division (grouped); on the
        blocked path each block's span of keys alone, packed, and a block's shift may be 0 instead
        of the row max (:mod:`attention_np.kernels.blocked`): ``exp_scores`` reads it as (..., L, S)
    l : (..., L, 1) the row sums of ``e`` (1 for a fully masked row; with sinks, their term
        included) (grouped)
    mask : bool, broadcastable to ``e``, True = attended (a -inf bias removed when an input is
        NaN or inf), or None; the backward uses it only when an input is NaN or inf (see
        :func:`masked_matmul`) (grouped)
    kv_groups : query heads per key/value head, ``H / H_kv`` (1 without grouped-query attention)
    blocks : the query blocks of the blocked path (:mod:`attention_np.kernels.blocked`), or None
    softcap : the cap ``c`` of soft-capping, or None
    tanh : (..., L, S) ``tanh(QKᵀ·scale / c)``, or None without soft-capping (grouped)
    bias_shape : the shape of the ``bias`` given to the forward (None without one): the shape
        ``sdpa_backward(..., return_dbias=True)`` sums its gradient to
    p_sink : (..., L, 1) the weight of the attention sink in each row (its term of ``l``, divided
        by ``l``), or None without sinks (:mod:`attention_np.variants.sinks`) (grouped)
    keep : bool, broadcastable to ``e``, the dropout keep-mask (True = kept), or None without
        dropout (grouped)
    dropout_scale : ``1 / (1 - dropout_p)``, applied to kept weights (1.0 without dropout)
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    out: np.ndarray
    scale: float
    e: np.ndarray
    l: np.ndarray
    mask: np.ndarray | None = None
    kv_groups: int = 1
    blocks: tuple | None = None
    softcap: float | None = None
    tanh: np.ndarray | None = None
    bias_shape: tuple | None = None
    p_sink: np.ndarray | None = None
    keep: np.ndarray | None = None
    dropout_scale: float = 1.0

    made_by = "attention_np.sdpa_forward (attention_np.kernels.fused)"

    def per_head(self, x):
        """An array of the kernel's layout in the caller's: ``(..., H_kv, G, L, .)`` ->
        ``(..., H, L, .)`` (a view); as it is without grouped-query attention, or when it has no
        head axis to ungroup (a keep-mask given as ``(L, S)``)."""
        if x is None or self.kv_groups == 1 or x.ndim < 4:
            return x
        return ungroup_queries(x)

    @property
    def weights(self) -> np.ndarray:
        """(..., H, L, S) the attention weights ``softmax(scores)`` before dropout, ``e / l``."""
        if self.blocks is not None:
            return self.per_head(blocked.spans(self.e, self.blocks, self.l, self.k.shape[-2], divide=True))
        return self.per_head(self.e / self.l)

    @property
    def exp_scores(self) -> np.ndarray:
        """(..., H, L, S) ``e``, per query head (0 at keys the blocked path skipped)."""
        if self.blocks is not None:
            return self.per_head(blocked.spans(self.e, self.blocks, self.l, self.k.shape[-2]))
        return self.per_head(self.e)

    @property
    def rowsum(self) -> np.ndarray:
        """(..., H, L, 1) ``l``, per query head."""
        return self.per_head(self.l)

    @property
    def softcap_tanh(self) -> np.ndarray | None:
        """(..., H, L, S) ``tanh``, per query head (None without soft-capping)."""
        return self.per_head(self.tanh)

    @property
    def sink_weight(self) -> np.ndarray | None:
        """(..., H, L, 1) ``p_sink``, per query head (None without sinks)."""
        return self.per_head(self.p_sink)

    @property
    def dropout_mask(self) -> np.ndarray | None:
        """``keep`` per query head, as ``dropout_mask=`` takes it to replay (None without dropout)."""
        return self.per_head(self.keep)


def sdpa_forward(q, k, v, mask=None, *, bias=None, is_causal: bool = False, scale=None, rng=None,
                 dropout_mask=None, spec=None, **elsewhere):
    r"""Scaled dot-product attention, Eq. (1), forward pass.

    .. math:: \text{scores} = QK^\top \cdot \text{scale} + \text{bias},\quad
              \text{weights} = \mathrm{softmax}(\text{scores}),\quad
              \text{out} = \text{weights}\, V

    Parameters
    ----------
    q : (..., L, d_k) queries
    k : (..., S, d_k) keys
    v : (..., S, d_v) values
    mask : bool, broadcastable to (..., L, S), optional
        True = this query may attend to this key (PyTorch SDPA's bool ``attn_mask``).
    bias : float, broadcastable to (..., L, S), optional
        Added to the scaled scores (ALiBi, relative positions, PyTorch's float ``attn_mask``).
    is_causal : bool
        Query ``i`` attends keys ``j <= i`` (top-left aligned); ANDed with ``mask``.
    scale : float, optional
        Default ``1 / sqrt(d_k)``; ``scale=1.0`` is unscaled dot-product attention.
    rng : int seed or np.random.Generator, optional
        Source of the dropout keep-mask (with ``spec.dropout_p``).
    dropout_mask : bool, broadcastable to (..., L, S), optional
        An explicit keep-mask (True = kept) instead of drawing one, e.g. to replay a framework's.
    spec : AttentionSpec, optional
        Beyond the paper: ``spec.window`` (sliding-window attention, top-left aligned, as
        ``is_causal``; see :func:`attention_np.sliding_window_mask`), ``spec.softcap`` (logit
        soft-capping ``c·tanh(QKᵀ·scale / c)``, before the bias and the mask, as Gemma 2),
        ``spec.dropout_p`` (attention dropout: each weight is zeroed with probability ``p``,
        kept ones scaled by ``1 / (1 - p)``; the keep-mask is saved in the cache so that the
        backward replays it) and ``spec.enable_gqa`` (grouped-query attention, see
        :mod:`attention_np.variants.gqa`: ``k`` and ``v`` may have fewer heads than ``q``,
        ``(..., H_kv, S, d)`` with ``H % H_kv == 0``; query head ``n`` uses key/value head
        ``n // (H / H_kv)``, as PyTorch SDPA's ``enable_gqa=True``).
    **elsewhere
        Nothing: an option whose home is the spec (``dropout_p=``, ``enable_gqa=``, ``window=``)
        is a ``TypeError`` naming that home.

    Returns
    -------
    out : (..., L, d_v)
    cache : SDPACache
        ``cache.weights`` is the (..., L, S) weight array. A query row with every key masked
        gets weights 0 and output 0 (never NaN).
    """
    caller = "sdpa_forward"
    refuse_elsewhere(caller, elsewhere)
    if spec is not None and getattr(spec, "kernel", "fused") != "fused":
        raise ValueError(f"sdpa_forward is the fused kernel: spec.kernel={spec.kernel!r} runs "
                         f"through attention_np.mha_forward or attention_np.kernels.registry.attend")
    plan = plan_from(caller, spec, q, k, mask, bias=bias, is_causal=is_causal, scale=scale, rng=rng)
    return sdpa_plan(q, k, v, plan, dropout_mask)


def sdpa_plan(q, k, v, plan: Plan, dropout_mask=None):
    """:func:`sdpa_forward` for a :class:`~attention_np.kernels.plan.Plan` (the kernel registry's
    entry; ``dropout_mask`` fixes the dropout keep-mask, as in :func:`sdpa_forward`).

    ``plan.sinks`` (h,) (gpt-oss, :mod:`attention_np.variants.sinks`) join each row's max and
    softmax denominator as one more term, never as a key; ``cache.sink_weight`` keeps their
    weights for :func:`attention_np.kernels.sink_logits.sdpa_sinks_backward`. Not with dropout.

    Each option is one guarded step, and what it saves for the backward is a field of the cache.
    """
    q, k, v, scale = check_qkv(q, k, v, plan.scale)
    dropout_p, softcap, sink = checked_options(q, plan, dropout_mask)
    given, mask, bias = (q, k, v), plan.mask, plan.bias
    groups = kv_groups(q, k, v) if plan.enable_gqa else 1
    if groups > 1:
        # Group the query heads, (..., H_kv, G, L, d), so that k and v broadcast over each group;
        # every array laid out per query head goes the same way. Views, kept so in the cache.
        mask, bias, dropout_mask, sink = grouped_heads(q.shape[-3], groups, mask=mask, bias=bias,
                                                       dropout_mask=dropout_mask, sink=sink)
        q, k, v = group_queries(q, groups), group_kv(k), group_kv(v)
    inputs = given
    if not plan.prepared:          # else the caller built the mask and dropped the inputs, once
        mask, bias = mask_and_bias(q, k, v, mask, bias, is_causal=plan.is_causal, window=plan.window)
        # Masked keys never reach the answer: 0 * NaN = NaN in the products (see drop_masked).
        q, k, v, inputs = masked_inputs(q, k, v, mask=mask, given=given, groups=groups)
    kept = {"q": inputs[0], "k": inputs[1], "v": inputs[2], "scale": scale, "kv_groups": groups}

    if blocked.wanted(q, k, mask, bias=bias, softcap=softcap, dropout_p=dropout_p,
                      dropout_mask=dropout_mask):
        # Big scores, plain Eq. (1): the same numbers, block by block (kernels/blocked.py).
        return attend_blocked(q, k, v, mask=mask, sink=sink, kept=kept)

    # Scale q (L*d_k numbers) rather than the scores (L*S numbers): same product, less work.
    scores = scaled_scores(q, k, scale)                                 # (..., L, S)
    tanh = None
    if softcap is not None:
        # (beyond the paper) soft-capping: scores -> c tanh(scores / c), the tanh kept for backward
        scores, tanh = softcap_forward(scores, softcap)                  # (..., L, S) each
    if bias is not None:
        scores = add_bias(scores, bias)
    if mask is not None:
        # -inf gets exactly weight 0; an all -inf row becomes zeros, not NaN.
        scores = grow_to(scores, np.broadcast_shapes(scores.shape, mask.shape))
        np.copyto(scores, -np.inf, where=~mask)
    # The softmax, with its division moved to the end: weights = e / l, so
    # out = weights @ v = (e @ v) / l divides L*d_v numbers instead of the L*S weights.
    # (The tiled path ends the same way.) cache.weights forms e / l when asked.
    e, l, p_sink = softmax_numerator(scores, sink)       # (..., L, S), (..., L, 1), (..., L, 1)
    keep, dropout_scale = dropout_keep(dropout_p, plan.rng, dropout_mask, e.shape, e.dtype)
    garbage = garbage_mask(q, k, v, l, mask, bias)
    out = weighted_values(e, keep, dropout_scale, v, l, garbage)        # (..., L, d_v)
    # Back to one axis of H query heads for the caller: (..., H_kv, G, L, .) -> (..., H, L, .).
    out = ungroup_queries(out) if groups > 1 else out
    # The cache keeps its own copy of out (L*d_v numbers): the backward needs it unchanged,
    # whatever the caller does to the returned array.
    return out, SDPACache(**kept, out=out.copy(), e=e, l=l, mask=mask if garbage is None else garbage,
                          softcap=softcap, tanh=tanh, bias_shape=bias_shape(plan), p_sink=p_sink,
                          keep=keep, dropout_scale=dropout_scale)


def checked_options(q, plan: Plan, dropout_mask) -> tuple:
    """``plan``'s dropout rate, soft-cap and sink logits (``(h, 1, 1)`` in ``q``'s dtype, or
    None), checked; sinks do not combine with dropout."""
    dropout_p = check_dropout_p(plan.dropout_p)
    check_rng(plan.rng)                           # refused by name even where no dropout draws from it
    softcap = check_softcap(plan.softcap)
    if plan.sinks is None:
        return dropout_p, softcap, None
    if dropout_p or dropout_mask is not None:
        raise ValueError("the fused kernel cannot combine sinks with dropout")
    return dropout_p, softcap, check_sinks(plan.sinks, q).astype(q.dtype)[:, None, None]


def grouped_heads(heads: int, groups: int, *, mask, bias, dropout_mask, sink) -> tuple:
    """Grouped-query attention's regrouping of the arrays laid out per query head (views):
    ``mask, bias, dropout_mask, sink``, each ``(..., H_kv, G, L, .)`` (or as given, without a
    head axis)."""
    mask = group_heads(None if mask is None else as_bool_mask(mask), heads, groups, "mask")
    bias = group_heads(None if bias is None else np.asarray(bias), heads, groups, "bias")
    if dropout_mask is not None:
        dropout_mask = group_heads(as_bool_mask(dropout_mask, "dropout_mask"), heads, groups,
                                   "dropout_mask")
    return mask, bias, dropout_mask, group_heads(sink, heads, groups, "sinks")


def attend_blocked(q, k, v, *, mask, sink, kept: dict):
    """The forward by :func:`attention_np.kernels.blocked.forward`, and its cache (``kept``: the
    cache's inputs, scale and groups)."""
    mask, blocks = blocked.blocks_for(q, k, mask)
    out, e, l, p_sink = blocked.forward(q, k, v, mask=mask, blocks=blocks, sink=sink,
                                        scale=kept["scale"])
    out = ungroup_queries(out) if kept["kv_groups"] > 1 else out
    return out, SDPACache(**kept, out=out.copy(), e=e, l=l, mask=mask, blocks=tuple(blocks),
                          p_sink=p_sink)


def softmax_numerator(scores, sink) -> tuple:
    """``e, l, p_sink``: the softmax's numerator in place of ``scores``, its row sums and (with a
    sink, one more term in each row's max and sum) the sink's weight, its term over ``l``, else
    None."""
    if sink is None:
        return (*softmax_numerator_(scores), None)                       # (..., L, S), (..., L, 1)
    e, l, e_sink = softmax_numerator_with_sink_(scores, sink)
    return e, l, e_sink / l


def bias_shape(plan: Plan) -> tuple | None:
    """The shape of the plan's bias (None without one), the shape its gradient is summed to."""
    return None if plan.bias is None else np.shape(plan.bias)


def masked_inputs(q, k, v, *, mask, given: tuple, groups: int) -> tuple:
    """``q, k, v`` with the keys no query attends and the queries that attend no key zeroed
    (:func:`~attention_np.kernels.guard.drop_masked`), and the inputs as the cache keeps them
    (in the caller's layout, as given when nothing is masked)."""
    if mask is None:
        return q, k, v, given
    q, k, v = drop_masked(q, k, v, mask)
    return q, k, v, (ungroup_queries(q) if groups > 1 else q, k.reshape(given[1].shape),
                     v.reshape(given[2].shape))


def garbage_mask(q, k, v, l, mask, bias):
    """The attended pairs when an input is NaN or inf under a mask or a bias, else None.

    A key masked for row i but attended by others is not zeroed: if k, v or q holds a NaN or
    inf, 0 * NaN would carry it to row i. Only then (an O((L+S)d) check, no (L, S) pass) sum
    over the attended pairs alone (masked_matmul); the backward does the same.
    """
    if (mask is None and bias is None) or all_finite(q, k, v, l):
        return None
    return attended(mask, bias)


def weighted_values(e, keep, dropout_scale: float, v, l, garbage):
    """``out = ((e * keep) @ v) / l * dropout_scale``, ``(..., L, d_v)``, summed over the attended
    pairs alone when ``garbage`` (the attended mask) is given."""
    kept = e if keep is None else e * keep                               # (..., L, S)
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is caught and redone below
        out = masked_matmul(kept, v, garbage)                            # (..., L, d_v)
    out /= l                                                             # = weights @ v
    if not np.isfinite(out).all():
        # e @ v sums up to S values before dividing: it may overflow where weights @ v does
        # not (v ~ 3e38 in float32). Only then, divide the (L, S) array first (for those entries).
        with np.errstate(invalid="ignore"):
            np.copyto(out, masked_matmul(kept / l, v, garbage), where=~np.isfinite(out))
    if keep is not None:
        out *= e.dtype.type(dropout_scale)     # 1/(1-p) on L*d_v numbers, not on the L*S weights
    return out


def sdpa_backward(dout, cache: SDPACache, *, return_dbias: bool = False):
    """Backward of :func:`sdpa_forward`: gradients of the loss w.r.t. ``q``, ``k`` and ``v``.

    Parameters
    ----------
    dout : (..., L, d_v) gradient w.r.t. ``out``
    cache : SDPACache from the forward pass
    return_dbias : bool
        Also return the gradient w.r.t. the forward's ``bias`` (opt-in, so that
        ``dq, dk, dv = sdpa_backward(dout, cache)`` stays as it was).

    Returns
    -------
    dq, dk, dv : each with the shape of its input (broadcast batch dims summed back)
    dbias : the shape of ``bias``, summed over the dims it was broadcast along; None when the
        forward had no bias. Only with ``return_dbias=True``.
    """
    return_dbias = check_bool(return_dbias, "return_dbias")
    grads = backward(dout, cache, dbias=return_dbias)
    return (*grads.qkv, grads.dbias) if return_dbias else grads.qkv


def backward(dout, cache: SDPACache, *, dbias: bool = False) -> Grads:
    """:func:`sdpa_backward` as one :class:`~attention_np.kernels.grads.Grads` (``dbias`` only when
    asked for: it costs a pass over the (L, S) gradient; ``dsinks`` is
    :func:`attention_np.kernels.sink_logits.sdpa_sinks_backward`'s)."""
    check_cache(cache, SDPACache, SDPACache.made_by)
    c = cache
    dout = check_dout(dout, c.out.shape, c.out.dtype)
    # The caller's arrays in the kernel's layout (views); the cache's own arrays already are.
    q, k, v = grouped_inputs(c)
    out, dout = grouped_rows(c, c.out), grouped_rows(c, dout)
    scale = q.dtype.type(c.scale)
    if c.blocks is not None:
        # The forward walked query blocks (kernels/blocked.py): so does the backward (no bias).
        dq, dk, dv = blocked.backward(q, k, v, e=c.e, l=c.l, out=out, dout=dout, scale=scale,
                                      blocks=c.blocks, mask=c.mask)
        return summed(c, (q, k, v), (dq, dk, dv))
    # As in the forward: only when something is NaN or inf, every product sums over the attended
    # pairs alone (a masked pair's 0 * NaN would be NaN); else m is None and they are plain.
    m = None if c.mask is None or all_finite(q, k, v, c.l, dout) else c.mask
    dscores, dv = softmax_backward(c, v=v, out=out, dout=dout, m=m)         # (..., L, S), (..., S, d_v)
    # The steps that made the scores, in reverse (dropout was undone in softmax_backward, the
    # sinks' gradient is sinks.py's, and grouped-query attention's sum over heads is summed()'s).
    # forward: scores = ... + bias  ->  dbias = dscores, summed to the bias's broadcast shape
    dbias_ = bias_gradient(dscores, c.bias_shape, c.kv_groups) if dbias else None
    if c.tanh is not None:
        # forward: scores = c tanh(raw / c) + bias  ->  draw = dscores * (1 - tanh^2)
        dscores = softcap_backward(dscores, c.tanh)
    dq, dk = scores_backward(dscores, q, k, scale=scale, m=m)
    return summed(c, (q, k, v), (dq, dk, dv), dbias_)


def quiet(m):
    """Silence NaN and inf warnings when ``m`` is set (an input is NaN or inf: they are expected)."""
    ignore = "ignore" if m is not None else None
    return np.errstate(invalid=ignore, over=ignore)


def softmax_backward(c: SDPACache, *, v, out, dout, m) -> tuple:
    """``dscores, dv``: the backward of ``out = (softmax(scores) * keep * s) @ v`` (grouped arrays;
    ``m`` the attended pairs when an input is NaN or inf, else None)."""
    e, l, keep = c.e, c.l, c.keep
    # The weights are P = e / l (see sdpa_forward). Dividing dout, an (L, d_v) array, by l
    # replaces every division of an (L, S) array: P.T @ dout = e.T @ (dout / l), and the
    # gradient w.r.t. P arrives already divided by l. The suffix _l marks "divided by l".
    dout_l = dout / l                                                    # (..., L, d_v)
    # With dropout, out = (P * keep * s) @ v, s = 1/(1-p): s rides on the (L, d_v) dout_l.
    kept, dout_ls = e, dout_l
    if keep is not None:
        kept, dout_ls = e * keep, dout_l * dout_l.dtype.type(c.dropout_scale)
    # forward: out = ((e * keep) / l * s) @ v  ->  dv = (e * keep).T @ (dout / l * s),
    #          dP = (dout @ v.T) * keep * s,  so dP_l = (dout_ls @ v.T) * keep
    with quiet(m):
        dv = rows_product(kept, dout_ls, m)                              # (..., S, d_v)
        dP_l = zero_masked(dout_ls @ np.swapaxes(v, -1, -2), m)          # (..., L, S)
    if keep is not None:
        dP_l *= keep
    # forward: P = softmax(scores)  ->  dscores = P * (dP - D),  D = rowsum(dP * P)
    # D = rowsum(dout * out), because out = sum_j P_j keep_j s v_j: an (L, d_v) sum, not (L, S).
    # With P = e / l:  dscores = e * (dP_l - D_l).
    with quiet(m):
        D_l = (dout_l * out).sum(axis=-1, keepdims=True)                 # (..., L, 1)
        dP_l -= D_l
        dP_l *= e
    return dP_l, dv


def scores_backward(dscores, q, k, *, scale, m) -> tuple:
    """``dq, dk`` of ``scores = (q * scale) @ k.T``: ``dq = dscores @ k * scale``,
    ``dk = dscores.T @ (q * scale)`` (``q`` unscaled, ``m`` as in :func:`softmax_backward`)."""
    with quiet(m):
        dq = masked_matmul(dscores, k, m) * scale                        # (..., L, d_k)
    with np.errstate(over="ignore", invalid="ignore"):   # caught below
        qs = q * scale
        dk = rows_product(dscores, qs, m)                                # (..., S, d_k)
    if overflowed(qs, q):
        with quiet(m):                                     # q * scale overflowed: scale after
            dk = rows_product(dscores, q, m) * scale
    return dq, dk


def grouped_rows(c: SDPACache, x):
    """``x (..., H, L, .)``, an array of the caller's laid out per query head, in the kernel's
    layout ``(..., H_kv, G, L, .)`` (a view; ``x`` itself without grouped-query attention)."""
    return group_queries(x, c.kv_groups) if c.kv_groups > 1 else x


def grouped_inputs(c: SDPACache) -> tuple:
    """``q, k, v`` of the cache as the forward computed with them (views): query heads
    ``(..., H_kv, G, L, d_k)``, ``k``, ``v`` ``(..., H_kv, 1, S, .)``."""
    if c.kv_groups == 1:
        return c.q, c.k, c.v
    return group_queries(c.q, c.kv_groups), group_kv(c.k), group_kv(c.v)


def summed(c: SDPACache, inputs: tuple, grads: tuple, dbias=None) -> Grads:
    """The gradients ``grads`` of the (grouped) ``inputs`` summed back to the cache's inputs:
    broadcast batch dims, and with grouped-query attention the G query heads of a group into
    their shared key/value head (k was (..., H_kv, 1, S, d))."""
    dq, dk, dv = (sum_to_shape(g, x.shape) for g, x in zip(grads, inputs, strict=True))
    return Grads(dq=dq.reshape(c.q.shape), dk=dk.reshape(c.k.shape), dv=dv.reshape(c.v.shape),
                 dbias=dbias)


def scaled_dot_product_attention(q, k, v, mask=None, *, bias=None, is_causal: bool = False,
                                 scale=None):
    """Eq. (1), returning the weights instead of the backward's cache: ``(out, weights)``.

    Same arguments and conventions as :func:`sdpa_forward`; ``weights`` is (..., L, S).
    """
    out, cache = sdpa_forward(q, k, v, mask, bias=bias, is_causal=is_causal, scale=scale)
    return out, cache.weights
