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

    Keyword-only: ``SDPACache(q=q, k=k, v=v, exp_scores=e, rowsum=l, out=out, scale=s)`` is a
    plain forward's cache; each option the forward used adds one named step to ``steps``.

    Attributes
    ----------
    q, k, v : the inputs (unscaled ``q``)
    exp_scores : (..., L, S) ``exp(scores - rowmax)``, the softmax before its division
    rowsum : (..., L, 1) the row sums of ``exp_scores`` (1 for a fully masked row)
    out : (..., L, d_v) the output (its row sums with ``dout`` shortcut the softmax backward)
    scale : the factor applied to ``QKᵀ``
    mask : bool, broadcastable to (..., L, S) (grouped with ``kv_groups``), True = attended (a -inf
        bias removed when an input is NaN or inf), or None; the backward uses it only when an
        input is NaN or inf (see :func:`masked_matmul`)
    steps : tuple of ``(name, saved)``, the forward's optional steps in the order it took them,
        walked in reverse by the backward: ``("gqa", G)``, ``("blocked", blocks)``,
        ``("softcap", (c, tanh))``, ``("bias", bias_shape)``, ``("sinks", sink_weight)``,
        ``("dropout", (keep, 1 / (1 - p)))``; each is also read by its own name below.
    weights : (..., L, S) the attention weights ``softmax(scores)`` before dropout, formed on
        access as ``exp_scores / rowsum``
    kv_groups : query heads per key/value head, ``H / H_kv`` (1 without grouped-query attention)
    blocks : the query blocks of the blocked path (:mod:`attention_np.kernels.blocked`), or None
    softcap, softcap_tanh : the cap ``c`` and ``tanh(QKᵀ·scale / c)`` (..., L, S), or None
    bias_shape : the shape of the ``bias`` given to the forward (None without one): the shape
        ``sdpa_backward(..., return_dbias=True)`` sums its gradient to
    sink_weight : (..., L, 1) the weight of the attention sink in each row (its term of
        ``rowsum``, divided by it), or None without sinks (:mod:`attention_np.variants.sinks`)
    dropout_mask : (..., L, S) bool, True = kept, or None without dropout
    dropout_scale : ``1 / (1 - dropout_p)``, applied to kept weights (1.0 without dropout)
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    exp_scores: np.ndarray
    rowsum: np.ndarray
    out: np.ndarray
    scale: float
    mask: np.ndarray | None = None
    steps: tuple = ()

    made_by = "attention_np.sdpa_forward (attention_np.kernels.fused)"

    def saved(self, name: str, default=None):
        """What the step ``name`` saved, or ``default`` when the forward did not take it."""
        return dict(self.steps).get(name, default)

    @property
    def weights(self) -> np.ndarray:
        return self.exp_scores / self.rowsum

    @property
    def kv_groups(self) -> int:
        return self.saved("gqa", 1)

    @property
    def blocks(self) -> list | None:
        return self.saved("blocked")

    @property
    def softcap(self) -> float | None:
        return self.saved("softcap", (None, None))[0]

    @property
    def softcap_tanh(self) -> np.ndarray | None:
        return self.saved("softcap", (None, None))[1]

    @property
    def bias_shape(self) -> tuple | None:
        return self.saved("bias")

    @property
    def sink_weight(self) -> np.ndarray | None:
        return self.saved("sinks")

    @property
    def dropout_mask(self) -> np.ndarray | None:
        return self.saved("dropout", (None, 1.0))[0]

    @property
    def dropout_scale(self) -> float:
        return self.saved("dropout", (None, 1.0))[1]


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

    Each option is one guarded step, ``steps.append((name, saved))``; the cache keeps the steps
    and :func:`backward` walks them in reverse.
    """
    q, k, v, scale = check_qkv(q, k, v, plan.scale)
    dropout_p, softcap, sink = checked_options(q, plan, dropout_mask)
    inputs, mask, bias, keep_given = (q, k, v), plan.mask, plan.bias, dropout_mask
    steps = []                                     # (name, saved), in the order they are taken
    groups = kv_groups(q, k, v) if plan.enable_gqa else 1
    if groups > 1:
        # Group the query heads, (..., H_kv, G, L, d), so that k and v broadcast over each group.
        q, k, v, mask, bias, dropout_mask, sink = grouped(q, k, v, mask, bias, dropout_mask, sink,
                                                          groups)
        steps.append(("gqa", groups))
    if not plan.prepared:          # else the caller built the mask and dropped the inputs, once
        mask, bias = mask_and_bias(q, k, v, mask, bias, plan.is_causal, plan.window)
        # Masked keys never reach the answer: 0 * NaN = NaN in the products (see drop_masked).
        q, k, v, inputs = masked_inputs(q, k, v, mask, inputs, groups)

    if blocked.wanted(q, k, mask, bias, dropout_p, dropout_mask, softcap):
        # Big scores, plain Eq. (1): the same numbers, block by block (kernels/blocked.py).
        return attend_blocked(q, k, v, inputs, mask, scale, sink, steps)

    # Scale q (L*d_k numbers) rather than the scores (L*S numbers): same product, less work.
    scores = scaled_scores(q, k, scale)                                 # (..., L, S)
    if softcap is not None:
        # (beyond the paper) soft-capping: scores -> c tanh(scores / c), the tanh kept for backward
        scores, capped = softcap_forward(scores, softcap)                # (..., L, S) each
        steps.append(("softcap", (softcap, capped)))
    if bias is not None:
        scores = add_bias(scores, bias)
        steps.append(("bias", np.shape(plan.bias)))
    if mask is not None:
        # -inf gets exactly weight 0; an all -inf row becomes zeros, not NaN.
        scores = grow_to(scores, np.broadcast_shapes(scores.shape, mask.shape))
        np.copyto(scores, -np.inf, where=~mask)
    # The softmax, with its division moved to the end: weights = e / l, so
    # out = weights @ v = (e @ v) / l divides L*d_v numbers instead of the L*S weights.
    # (The tiled path ends the same way.) cache.weights forms e / l when asked.
    e, l, e_sink = softmax_numerator(scores, sink)       # (..., L, S), (..., L, 1), (..., L, 1)
    if sink is not None:
        steps.append(("sinks", e_sink / l))
    keep, dropout_scale = dropout_keep(dropout_p, plan.rng, dropout_mask, e.shape, e.dtype)
    if keep is not None:
        steps.append(("dropout", (keep, dropout_scale)))
    garbage = garbage_mask(q, k, v, l, mask, bias)
    out = weighted_values(e, keep, dropout_scale, v, l, garbage)        # (..., L, d_v)
    if groups > 1:
        # Back to one axis of H query heads: (..., H_kv, G, L, .) -> (..., H, L, .), views.
        out, e, l = ungroup_queries(out), ungroup_queries(e), ungroup_queries(l)
        steps = ungrouped_steps(steps, keep_given)
    # The cache keeps its own copy of out (L*d_v numbers): the backward needs it unchanged,
    # whatever the caller does to the returned array.
    return out, SDPACache(q=inputs[0], k=inputs[1], v=inputs[2], exp_scores=e, rowsum=l,
                          out=out.copy(), scale=scale, mask=mask if garbage is None else garbage,
                          steps=tuple(steps))


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


def grouped(q, k, v, mask, bias, dropout_mask, sink, groups: int) -> tuple:
    """Grouped-query attention's regrouping (views): query heads, and every per-head array,
    ``(..., H_kv, G, L, .)``; ``k``, ``v`` ``(..., H_kv, 1, S, .)``."""
    H = q.shape[-3]
    mask = group_heads(None if mask is None else as_bool_mask(mask), H, groups, "mask")
    bias = group_heads(None if bias is None else np.asarray(bias), H, groups, "bias")
    if dropout_mask is not None:
        dropout_mask = group_heads(as_bool_mask(dropout_mask, "dropout_mask"), H, groups,
                                   "dropout_mask")
    sink = group_heads(sink, H, groups, "sinks")                        # (H_kv, G, 1, 1)
    return group_queries(q, groups), group_kv(k), group_kv(v), mask, bias, dropout_mask, sink


def ungrouped_steps(steps: list, given_keep) -> list:
    """The saved arrays of ``steps`` back to one axis of H query heads (views); the cache keeps
    the dropout keep-mask per query head too (:func:`backward` regroups it)."""
    def ungroup(name, saved):
        if name == "softcap":
            return saved[0], ungroup_queries(saved[1])
        if name == "sinks":
            return ungroup_queries(saved)
        if name == "dropout":
            keep = ungroup_queries(saved[0]) if given_keep is None else as_bool_mask(given_keep)
            return keep, saved[1]
        return saved
    return [(name, ungroup(name, saved)) for name, saved in steps]


def attend_blocked(q, k, v, inputs, mask, scale, sink, steps: list):
    """The forward by :func:`attention_np.kernels.blocked.attend`, and its cache."""
    out, e, l, blocks, mask, sink_weight = blocked.attend(q, k, v, mask, scale, sink)
    if dict(steps).get("gqa", 1) > 1:
        out, e, l = ungroup_queries(out), ungroup_queries(e), ungroup_queries(l)
        sink_weight = None if sink is None else ungroup_queries(sink_weight)
    steps.append(("blocked", blocks))
    if sink is not None:
        steps.append(("sinks", sink_weight))
    return out, SDPACache(q=inputs[0], k=inputs[1], v=inputs[2], exp_scores=e, rowsum=l,
                          out=out.copy(), scale=scale, mask=mask, steps=tuple(steps))


def softmax_numerator(scores, sink) -> tuple:
    """``e, l, e_sink``: the softmax's numerator in place of ``scores``, its row sums and (with a
    sink, one more term in each row's max and sum) the sink's term, else None."""
    if sink is None:
        return (*softmax_numerator_(scores), None)                       # (..., L, S), (..., L, 1)
    return softmax_numerator_with_sink_(scores, sink)


def masked_inputs(q, k, v, mask, inputs: tuple, groups: int) -> tuple:
    """``q, k, v`` with the keys no query attends and the queries that attend no key zeroed
    (:func:`~attention_np.kernels.guard.drop_masked`), and the inputs as the cache keeps them
    (ungrouped, as given when nothing is masked)."""
    if mask is None:
        return q, k, v, inputs
    q, k, v = drop_masked(q, k, v, mask)
    return q, k, v, (ungroup_queries(q) if groups > 1 else q, k.reshape(inputs[1].shape),
                     v.reshape(inputs[2].shape))


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
    q, k, v, e, l, out, dout, steps = regrouped(c, dout)
    # The weights are P = e / l (see sdpa_forward). Dividing dout, an (L, d_v) array, by l
    # replaces every division of an (L, S) array: P.T @ dout = e.T @ (dout / l), and the
    # gradient w.r.t. P arrives already divided by l. The suffix _l marks "divided by l".
    if c.blocks is not None:
        # The forward walked query blocks (kernels/blocked.py): so does the backward (no bias).
        dq, dk, dv = blocked.backward(q, k, v, e, l, out, dout, scale=q.dtype.type(c.scale),
                                      blocks=c.blocks, mask=c.mask)
        return summed(c, (q, k, v), (dq, dk, dv))
    keep, dropout_scale = dict(steps).get("dropout", (None, 1.0))
    dout_l = dout / l                                                    # (..., L, d_v)
    # With dropout, out = (P * keep * s) @ v, s = 1/(1-p): s rides on the (L, d_v) dout_l.
    kept, dout_ls = e, dout_l
    if keep is not None:
        kept, dout_ls = e * keep, dout_l * dout_l.dtype.type(dropout_scale)
    # As in the forward: only when something is NaN or inf, every product sums over the attended
    # pairs alone (a masked pair's 0 * NaN would be NaN); else m is None and they are plain.
    m = None if c.mask is None or all_finite(q, k, v, l, dout) else c.mask
    ignore = "ignore" if m is not None else None           # NaN, inf expected: no warnings

    def err():
        return np.errstate(invalid=ignore, over=ignore)

    # forward: out = ((e * keep) / l * s) @ v  ->  dv = (e * keep).T @ (dout / l * s),
    #          dP = (dout @ v.T) * keep * s,  so dP_l = (dout_ls @ v.T) * keep
    with err():
        dv = rows_product(kept, dout_ls, m)                              # (..., S, d_v)
        dP_l = zero_masked(dout_ls @ np.swapaxes(v, -1, -2), m)          # (..., L, S)
    if keep is not None:
        dP_l *= keep

    # forward: P = softmax(scores)  ->  dscores = P * (dP - D),  D = rowsum(dP * P)
    # D = rowsum(dout * out), because out = sum_j P_j keep_j s v_j: an (L, d_v) sum, not (L, S).
    # With P = e / l:  dscores = e * (dP_l - D_l).
    with err():
        D_l = (dout_l * out).sum(axis=-1, keepdims=True)                 # (..., L, 1)
        dP_l -= D_l
        dP_l *= e
    dscores, dbias_ = dP_l, None                                         # (..., L, S)
    # The steps that made the scores, in reverse (dropout was undone above, the sinks' gradient
    # is sinks.py's, and grouped-query attention's sum over heads is summed()'s).
    for name, saved in reversed(steps):
        if name == "bias" and dbias:
            # forward: scores = ... + bias  ->  dbias = dscores, summed to the bias's broadcast shape
            dbias_ = bias_gradient(dscores, saved, c.kv_groups)
        elif name == "softcap":
            # forward: scores = c tanh(raw / c) + bias  ->  draw = dscores * (1 - tanh^2)
            dscores = softcap_backward(dscores, saved[1])

    # forward: scores = (q * scale) @ k.T + bias  ->  dq = dscores @ k * scale,
    #                                                 dk = dscores.T @ (q * scale)
    scale = q.dtype.type(c.scale)
    with err():
        dq = masked_matmul(dscores, k, m) * scale                        # (..., L, d_k)
    with np.errstate(over="ignore", invalid="ignore"):   # caught below
        qs = q * scale
        dk = rows_product(dscores, qs, m)                                # (..., S, d_k)
    if overflowed(qs, q):
        with err():                                        # q * scale overflowed: scale after
            dk = rows_product(dscores, q, m) * scale
    return summed(c, (q, k, v), (dq, dk, dv), dbias_)


def regrouped(c: SDPACache, dout) -> tuple:
    """``q, k, v, e, l, out, dout, steps`` of the cache, grouped again as the forward computed
    them (views): query heads and their arrays ``(..., H_kv, G, L, .)``, ``k``, ``v``
    ``(..., H_kv, 1, S, .)``."""
    G = c.kv_groups
    if G == 1:
        return c.q, c.k, c.v, c.exp_scores, c.rowsum, c.out, dout, c.steps

    def regroup(name, saved):
        if name == "softcap":
            return saved[0], group_queries(saved[1], G)
        if name == "dropout":
            return group_heads(saved[0], c.q.shape[-3], G, "dropout_mask"), saved[1]
        return saved

    q, e, l, out, dout = (group_queries(x, G) for x in (c.q, c.exp_scores, c.rowsum, c.out, dout))
    steps = tuple((name, regroup(name, saved)) for name, saved in c.steps)
    return q, group_kv(c.k), group_kv(c.v), e, l, out, dout, steps


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
