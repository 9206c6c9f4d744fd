"""The weights of a transformers attention layer in attention_np's layout, read by structure.

Projections are found by the names transformers uses (``q_proj``/``query``/``q_lin``/
``query_proj``/``q``/``Wq``, ... and ``o_proj``/``out_proj``/``dense``/``out_lin``/``o``/
``c_proj``/``Wo``/``proj``/``projection``/``projection_layer``/``output``), as ``nn.Linear``
(``x @ W.T + b``) or GPT-2's ``Conv1D`` (``x @ W + b``), or fused into one ``qkv`` projection
whose output columns are laid out in one of three ways:

- ``"contiguous"``: ``[q (h*d) | k (h_kv*d) | v (h_kv*d)]`` (GPT-2's ``c_attn``, Phi-3's
  ``qkv_proj``, Falcon with ``multi_query``, the ``qkv`` of BLIP-2's and TimeSformer's vision
  layers, torch's ``nn.MultiheadAttention``'s ``in_proj_weight``: :class:`InProjection`);
- ``"per_head"``: ``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``, ``d`` each (GPT-NeoX, Falcon without
  ``multi_query``);
- ``"grouped"``: per key/value head ``j``, its ``h/h_kv`` query heads then ``k_j``, ``v_j``
  (Falcon's ``new_decoder_architecture``).

A fused layout is a permutation of columns: the weights (and their gradients) are read by index,
no variant math is involved. The QK-norm's kind is probed (:func:`read_qk_norm`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from attention_np.interop.torch import to_numpy
from attention_np.interop.transformers.refusal import UnsupportedLayer, refuse

NAMES = {"q": ("q_proj", "query", "q_lin", "query_proj", "q", "Wq"),
         "k": ("k_proj", "key", "k_lin", "key_proj", "k", "Wk"),
         "v": ("v_proj", "value", "v_lin", "value_proj", "v", "Wv"),
         "o": ("o_proj", "out_proj", "dense", "out_lin", "o", "c_proj", "Wo", "proj", "projection",
               "projection_layer", "output")}   # the last two: InternVL's and Qianfan-OCR's,
#                                                 Kosmos-2.5's and Pix2Struct's vision towers
FUSED = ("qkv_proj", "query_key_value", "c_attn", "Wqkv", "qkv")
QK_NORMS = (("q_norm", "k_norm"), ("q_layernorm", "k_layernorm"))


def stored_dtypes(module, buffers: bool = False) -> list:
    """The dtypes (names, sorted) of ``module``'s floating parameters (and ``buffers``) as
    stored: ``["bfloat16"]`` for a layer of a bf16 checkpoint, ``["bfloat16", "float32"]`` for
    a model that keeps some weights in float32."""
    tensors = [*module.parameters(), *(module.buffers() if buffers else ())]
    return sorted({str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()})


def stored_weights_line(dtypes: list) -> str:
    """What a report says of the weights: their dtype as stored, and that both sides ran in
    float64 on them, upcast exactly (every bfloat16 and float16 number is a float64 one)."""
    what = ", ".join(dtypes) if dtypes else "none floating"
    return (f"weights: {what} as stored, read exactly as float64; transformers' side and "
            "attention_np both ran in float64 on them (a verdict on the formula, not on the "
            "rounding of the stored dtype)")


def rounded_buffers(model) -> list:
    """Notes on the floating buffers of ``model`` stored in a dtype narrower than float32
    (``model.to(torch.bfloat16)`` rounds a rotary embedding's ``inv_freq`` too, where
    ``from_pretrained(..., dtype=)`` keeps it float32): the model computes with the rounded
    values, and so does its float64 copy."""
    return [f"{name} is stored in {str(t.dtype).removeprefix('torch.')} (model.to() rounds "
            "buffers; from_pretrained(..., dtype=) keeps them float32): the model computes with "
            "the rounded values, its float64 copy too, so a row that uses them differs by that "
            "rounding" for name, t in model.named_buffers()
            if t.is_floating_point() and str(t.dtype) not in ("torch.float32", "torch.float64")]


def float64_view(module):
    """``module`` itself when its floating parameters and buffers are float32 or float64, else a
    float64 deep copy (a bfloat16 or float16 checkpoint): the probes that read a layer's kind
    (its QK-norm's formula, a measured scale, whether its output moves with the angles) then
    run with float64 rounding, not the stored dtype's, and the values read are the stored ones
    upcast exactly. Gradients are copied and upcast with the parameters."""
    if set(stored_dtypes(module, buffers=True)) <= {"float32", "float64"}:
        return module
    copied = copy.deepcopy(module).double()           # (a Parameter's deepcopy drops its .grad)
    for theirs, ours in zip(module.parameters(), copied.parameters(), strict=True):
        if theirs.grad is not None:
            ours.grad = theirs.grad.detach().double()
    return copied


def _islinear_tensors(m) -> bool:
    w = getattr(m, "weight", None)
    return w is not None and getattr(w, "ndim", 0) == 2 and not hasattr(m, "num_embeddings")


def _conv1d(m) -> bool:
    return type(m).__name__ == "Conv1D"        # GPT-2: weight (in, out), x @ W + b


def _out(m) -> int:
    return int(m.weight.shape[0 if not _conv1d(m) else 1])


@dataclass
class InProjection:
    """torch.nn.MultiheadAttention's ``in_proj_weight`` ``(3E, E)`` and ``in_proj_bias``
    ``(3E,)``, read as one fused ``nn.Linear`` ``[q | k | v]`` (its parameters themselves:
    their ``.grad`` is read the same way)."""

    weight: object
    bias: object = None


def torch_mha(module) -> bool:
    """Whether ``module`` is (or is built as) ``torch.nn.MultiheadAttention``: its input
    projection is a parameter ``in_proj_weight``, not a child module."""
    return hasattr(module, "in_proj_weight") and hasattr(module, "batch_first") and \
        hasattr(module, "out_proj")


@dataclass
class Projections:
    """Where q, k, v, o come from: modules, or a fused module and its layout."""

    q: object = None
    k: object = None
    v: object = None
    o: object = None
    fused: object = None
    layout: str | None = None
    kv_fused: bool = False            # GPT-2 cross-attention: q_attn, c_attn packs [k | v]

    @property
    def has_o(self) -> bool:
        return self.o is not None

    def widths(self, h: int, d: int) -> dict:
        if self.fused is None:
            return {n: _out(getattr(self, n)) for n in "qkv"}
        total = _out(self.fused) // d
        q = _out(self.q) // d if self.kv_fused else h
        h_kv = total // 2 if self.kv_fused else (total - h) // 2
        return {"q": q * d, "k": h_kv * d, "v": h_kv * d}


def _unwrapped(child):
    """The ``nn.Linear`` inside Moshi's and Kyutai's ``MoshiLinear`` (``use_flexible_linear``
    False: one ``nn.Linear`` for every position, ``x @ W.T``), else ``child`` itself."""
    inner = getattr(child, "linear", None)
    if getattr(child, "use_flexible_linear", None) is False and inner is not None and \
            _islinear_tensors(inner):
        return inner
    return child


def find_projections(module) -> Projections:
    """The q, k, v, o projections of ``module``; refuses a module without them."""

    children = {n: _unwrapped(c) for n, c in module.named_children()}
    found = {n: next((children[a] for a in names if a in children and _islinear_tensors(children[a])),
                     None) for n, names in NAMES.items()}
    fused = next((children[a] for a in FUSED if a in children and _islinear_tensors(children[a])), None)
    p = Projections(o=found["o"])
    if torch_mha(module) and getattr(module, "in_proj_weight", None) is not None:
        p.fused, p.layout = InProjection(module.in_proj_weight, module.in_proj_bias), "contiguous"
    elif all(found[n] is not None for n in "qkv"):
        p.q, p.k, p.v = found["q"], found["k"], found["v"]
    elif fused is not None and "q_attn" in children and getattr(module, "is_cross_attention", 0):
        p.q, p.fused, p.layout, p.kv_fused = children["q_attn"], fused, "contiguous", True
    elif fused is not None:
        p.fused, p.layout = fused, _fused_layout(module, children, fused)
    else:
        raise UnsupportedLayer(
            f"{type(module).__name__} is not an attention layer attention_np can read: no q, k, "
            f"v projections (one of {NAMES['q']}, ... as nn.Linear) and no fused one {FUSED} "
            f"among its children {sorted(children)}")
    return p


def _fused_layout(module, children: dict, fused) -> str:
    """How a fused q/k/v projection's output columns are laid out: "grouped" (Falcon's new
    decoder architecture), "contiguous" ``[q | k | v]`` or "per_head" ``[q_n | k_n | v_n]``."""
    if getattr(module, "new_decoder_architecture", False):
        return "grouped"
    if getattr(module, "multi_query", False) or _conv1d(fused) or \
            any(fused is children.get(n) for n in ("qkv_proj", "Wqkv", "qkv")):    # MPT: chunk(3);
        # qkv: BLIP-2, TimeSformer, MGP-STR, the Qwen-VL towers (reshape(..., 3, h, d))
        return "contiguous"
    return "per_head"


def unread_projections(module, projections: Projections) -> list:
    """The names of the layer's 2-D-weight children that are not among its projections read,
    when no output projection was found (an empty list otherwise, or when there are none).
    A layer without a ``W^O`` is read as BERT's self-attention, which stops at the concatenated
    heads; a projection under a name :data:`NAMES` does not list (an output projection, or
    another input to the scores) would then be left out of the comparison."""
    if projections.o is not None:
        return []
    read = {id(m) for m in (projections.q, projections.k, projections.v, projections.fused)
            if m is not None}
    return sorted(n for n, m in module.named_children()
                  if _islinear_tensors(m) and id(m) not in read)


def qkv_columns(layout: str, h: int, h_kv: int, d: int, kv_only: bool = False) -> dict:
    """The output columns of a fused projection that hold q, k, v, in head order."""
    ar = np.arange(d)
    if kv_only:                                            # [k | v]
        return {"k": np.arange(h_kv * d), "v": h_kv * d + np.arange(h_kv * d)}
    if layout == "contiguous":
        return {"q": np.arange(h * d), "k": h * d + np.arange(h_kv * d),
                "v": (h + h_kv) * d + np.arange(h_kv * d)}
    if layout == "per_head":                               # head n: [q_n | k_n | v_n]
        base = 3 * d * np.arange(h)[:, None]
        return {n: (base + i * d + ar).reshape(-1) for i, n in enumerate("qkv")}
    g = h // h_kv                                          # grouped: [q_jg .. q_jg+g-1, k_j, v_j]
    base = (g + 2) * d * np.arange(h_kv)[:, None, None]
    q = (base + d * np.arange(g)[None, :, None] + ar).reshape(-1)
    return {"q": q, "k": (base[:, 0] + g * d + ar).reshape(-1),
            "v": (base[:, 0] + (g + 1) * d + ar).reshape(-1)}


def linear_tensors(lin, get) -> tuple:
    """``(W (in, out), b)`` of an ``nn.Linear`` (weight (out, in)) or a ``Conv1D``."""
    W = get(lin.weight)
    W = W if _conv1d(lin) else W.T
    bias = getattr(lin, "bias", None)
    return W, None if bias is None else get(bias)


@dataclass
class NormRead:
    kind: str                 # "rms" or "layer"
    eps: float
    q: object                 # the q norm module (or a list of per-head LayerNorms)
    k: object
    offset: float = 0.0       # Gemma: the RMSNorm multiplies by (1 + w)
    scope: str = "head"       # "all": over the h*d features before the split (OLMo 2)


def _norm_modules(module):
    for qn, kn in QK_NORMS:
        q, k = getattr(module, qn, None), getattr(module, kn, None)
        if q is not None and k is not None:
            flag = [getattr(module, a) for a in ("qk_layernorm", "use_qk_norm")
                    if isinstance(getattr(module, a, None), bool)]
            return None if flag and not flag[0] else (q, k)
    return None


def read_qk_norm(module, h: int, h_kv: int, d: int) -> NormRead | None:
    """The layer's QK-norm, its kind probed on a test input: None when it has none."""
    mods = _norm_modules(module)
    if mods is None:
        return None
    q, k = mods
    if type(q).__name__ == "Identity" and type(k).__name__ == "Identity":   # QK-norm switched off
        return None
    if hasattr(q, "norms"):                    # StableLM: one nn.LayerNorm per head
        q, k = list(q.norms), list(k.norms)
        inner = q[0]
        if type(inner).__name__ != "LayerNorm":
            refuse(module, f"a per-head QK-norm of {type(inner).__name__}")
        return NormRead("layer", float(inner.eps), q, k)
    if getattr(q, "weight", None) is None:
        refuse(module, f"a QK-norm without a learned weight ({type(q).__name__}: attention_np's "
                        "QK-norm takes its weight as a parameter)")
    shape, k_shape = tuple(q.weight.shape), tuple(k.weight.shape)
    # OLMo 2: one norm over the h*d features of the projection, before the split into heads
    scope = "all" if h > 1 and (shape, k_shape) == ((h * d,), (h_kv * d,)) else "head"
    if scope == "head" and (shape not in ((d,), (h, d)) or k_shape not in ((d,), (h_kv, d))):
        refuse(module, f"a QK-norm with weights of shapes {shape} and {k_shape} (neither each "
                        f"head's {d} features nor all heads' {h}x{d} and {h_kv}x{d})")
    eps = float(next(getattr(q, a) for a in ("variance_epsilon", "eps", "epsilon")
                     if hasattr(q, a)))
    if type(q).__name__ == "LayerNorm":       # torch.nn.LayerNorm (Phi): with its bias
        return NormRead("layer", eps, q, k, scope=scope)
    kind, offset = _probe_norm(module, q, eps)
    return NormRead(kind, eps, q, k, offset, scope)


def _probe_norm(module, norm, eps: float) -> tuple:
    """Which formula ``norm`` computes: RMSNorm by ``w`` or ``1 + w``, or a bias-free
    mean-centred LayerNorm (float32 inside is allowed for: compared within 1e-4)."""
    import torch

    w = to_numpy(norm.weight, np.float64)
    x = np.random.default_rng(0).standard_normal((2,) + w.shape) + 0.5        # mean != 0
    with torch.no_grad():
        y = to_numpy(norm(torch.from_numpy(x).to(norm.weight.dtype))).astype(np.float64)
    rms = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    xc = x - x.mean(axis=-1, keepdims=True)
    ln = xc / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + eps)
    for kind, xhat, offset in (("rms", rms, 0.0), ("rms", rms, 1.0), ("layer", ln, 0.0)):
        if np.max(np.abs(y - xhat * (offset + w))) < 1e-4 * max(1.0, np.max(np.abs(y))):
            return kind, offset
    refuse(module, f"a QK-norm ({type(norm).__name__}) that is neither an RMSNorm nor a "
                    "mean-centred LayerNorm without bias")


def norm_tensors(norm: NormRead, get) -> dict:
    out = {}
    for name, m in (("q_norm", norm.q), ("k_norm", norm.k)):
        mods = m if isinstance(m, list) else [m]
        out[name] = np.stack([get(x.weight) for x in mods]) if isinstance(m, list) \
            else get(m.weight)
        biases = [getattr(x, "bias", None) for x in mods]
        if all(b is not None for b in biases) and norm.kind == "layer":
            out[f"{name}_bias"] = (np.stack([get(b) for b in biases]) if isinstance(m, list)
                                   else get(biases[0]))
    return out
