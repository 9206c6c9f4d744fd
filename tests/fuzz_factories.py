"""What the docstrings cannot tell the fuzzer (tests/fuzz_signatures.py): params from their
``init_*`` function, a cache from its forward, a valid instance of a class, and a valid call
where the arguments depend on each other in a way no shape says. Keep these tables small: a
function whose valid call its numpydoc shapes give needs no entry.

Every array here has the sizes of ``tests.fuzz_signatures.SIZES`` (batch 2, L=3, S=5, d_k=4,
d_v=6, d_model=8, h=2), so that a cache made here fits a ``dout`` made from the shapes.
"""

from __future__ import annotations

import numpy as np

import attention_np as an

R = np.random.default_rng(0)
Q, K, V = R.standard_normal((2, 3, 4)), R.standard_normal((2, 5, 4)), R.standard_normal((2, 5, 6))
X, MEM = R.standard_normal((2, 3, 8)), R.standard_normal((2, 5, 8))
QH, KH, VH = Q[:, None].repeat(2, 1), K[:, None].repeat(2, 1), V[:, None].repeat(2, 1)  # (2, h=2, ., .)


#: ``dict from :func:`NAME``` -> the dict, with the sizes above
PARAMS = {
    "init_mha_params": lambda: an.init_mha_params(8, 2, rng=0),
    "init_additive_params": lambda: an.init_additive_params(4, kdim=4, d_hidden=5, rng=0),
    "init_scoring_mha_params": lambda: an.init_scoring_mha_params(8, 2, 4, "scaled", rng=0),
    "init_ffn_params": lambda: _nn().init_ffn_params(8, 6, rng=0),
    "init_model": lambda: _nn().init_model(_tiny_model(), rng=0),
    "attention_np.nn.init_model": lambda: _nn().init_model(_tiny_model(), rng=0),
    "init_seq2seq": lambda: _nn().init_seq2seq(_tiny_seq2seq(), rng=0),
    "attention_np.nn.init_seq2seq": lambda: _nn().init_seq2seq(_tiny_seq2seq(), rng=0),
    "load_weights": lambda: _bert_params(),
}


def _nn():
    from attention_np import nn
    return nn


def _bert_params(vocab=7, positions=6, d=8, d_ff=6):
    """A one-layer BERT in :func:`load_weights`' layout (random, small): no checkpoint needed."""
    nn, r = _nn(), np.random.default_rng(0)
    p = {"embed.word": r.standard_normal((vocab, d)), "embed.position": r.standard_normal((positions, d)),
         "embed.token_type": r.standard_normal((2, d)), "embed.ln.gamma": np.ones(d),
         "embed.ln.beta": np.zeros(d)}
    p.update({f"layers.0.attn.{k}": v for k, v in an.init_mha_params(d, 2, rng=1).items()})
    p.update({f"layers.0.ffn.{k}": v for k, v in nn.init_ffn_params(d, d_ff, rng=2).items()})
    for ln in ("ln1", "ln2"):
        p[f"layers.0.{ln}.gamma"], p[f"layers.0.{ln}.beta"] = np.ones(d), np.zeros(d)
    return p

#: a cache class -> one made by its forward from the arrays above
CACHES = {
    "SDPACache": lambda: an.sdpa_forward(Q, K, V)[1],
    "AttentionCache": lambda: an.paper.sdpa_forward(Q, K, V)[1],
    "MHACache": lambda: an.mha_forward(X, MEM, MEM, PARAMS["init_mha_params"](), num_heads=2)[1],
    "FlashCache": lambda: an.flash_attention_forward(Q, K, V, block_size=2)[1],
    "SinksCache": lambda: an.sdpa_sinks_forward(QH, KH, VH, np.zeros(2))[1],
    "AdditiveCache": lambda: an.additive_attention_forward(Q, K, V, PARAMS["init_additive_params"]())[1],
    # (..., d_model) and (..., d): "..." is one batch dim of 2
    "FFNCache": lambda: _nn().ffn_forward(X[:, 0], PARAMS["init_ffn_params"]())[1],
    "LayerNormCache": lambda: _nn().layernorm_forward(Q[:, 0], np.ones(4), np.zeros(4))[1],
    "EmbeddingCache": lambda: _nn().embedding_forward(np.array([[0, 1, 2], [3, 4, 5]]),
                                                      R.standard_normal((7, 8)))[1],
    "CrossEntropyCache": lambda: _nn().cross_entropy_forward(R.standard_normal((2, 3, 7)),
                                                             np.array([[0, 1, 2], [3, 4, 5]]))[1],
    "ModelCache": lambda: _nn().model_forward(PARAMS["init_model"](), np.array([[0, 1, 2], [3, 4, 5]]),
                                              _tiny_model())[1],
    "Seq2SeqCache": lambda: _nn().seq2seq_forward(PARAMS["init_seq2seq"](), np.ones((2, 5), np.int64),
                                                  np.ones((2, 1), np.int64), _tiny_seq2seq())[1],
    "ScoringMHACache": lambda: an.studies.scoring_attention.scoring_mha_forward(
        X, PARAMS["init_scoring_mha_params"](), num_heads=2, scoring="scaled")[1],
}


def _cache_for(label: str):
    """The cache a backward's valid call takes: the one its own module's forward makes."""
    from attention_np.kernels import reference
    return {
        "attention_np.kernels.reference.sdpa_backward": lambda: reference.sdpa_forward(Q, K, V)[1],
        "attention_np.paper.multihead.mha_backward":
            lambda: an.paper.mha_forward(X, MEM, MEM, an.paper.init_mha_params(8, 2, rng=0),
                                         num_heads=2)[1],
    }.get(label)


#: label -> () -> (args, kwargs): a valid call the shapes cannot give
FACTORIES = {
    "attention_np.paper.gradcheck.gradcheck":
        lambda: ((an.softmax, an.softmax_backward, (R.standard_normal((2, 3)),)), {}),
    "attention_np.paper.gradcheck.numerical_gradient":
        lambda: _numerical_gradient_call(),
    "attention_np.paper.params.glorot_uniform":
        lambda: ((np.random.default_rng(0), 3, 4), {}),
    "attention_np.paper.multihead.mha_forward":
        lambda: ((X, MEM, MEM, an.paper.init_mha_params(8, 2, rng=0)), {"num_heads": 2}),
    "attention_np.variants.lengths.lengths_mask":
        lambda: ((), {"q_lengths": np.array([2, 3]), "kv_lengths": np.array([4, 5]), "L": 3, "S": 5}),
    "attention_np.variants.window.sliding_window_mask":
        lambda: ((3, 5), {"left": 1, "right": 0}),
    "attention_np.variants.position_bias.relative_position_bias_backward":
        lambda: ((R.standard_normal((2, 3, 5)), np.zeros((3, 5), np.int64) + 1, 8), {}),
    "attention_np.compose.decode.mha_decode_step":
        lambda: ((X[:, :1], PARAMS["init_mha_params"](), an.KVCache(8)), {"num_heads": 2}),
    # the trainers: one step of a tiny model (every other argument at its default)
    "attention_np.training.trainer.train": lambda: _train_call(),
    "attention_np.training.seq2seq_trainer.train_seq2seq": lambda: _train_seq2seq_call(),
    "attention_np.studies.compare_scoring.train_retrieval":
        lambda: (([2],), {"steps": 2, "batch": 2, "n_keys": 2, "d_v": 2, "n_eval": 4}),
    "attention_np.studies.positions.train_with_and_without_positions":
        lambda: (((0,),), {"config": _tiny_model(), "steps": 1, "batch_size": 2}),
    "attention_np.pretrained.minilm.encode":
        lambda: ((PARAMS["load_weights"](), np.array([[0, 1, 2], [3, 4, 5]])), {"num_heads": 2}),
    "attention_np.pretrained.minilm.tokenize": lambda: (("a sentence",), {}),
    # the framework comparisons: the smallest module of each kind (torch, flax, transformers)
    "attention_np.interop.compare.compare_mha": lambda: ((_torch_mha(), X), {}),
    "attention_np.interop.compare.compare_flax_mha": lambda: _flax_call(),
    "attention_np.interop.transformers.layer_diff.compare_transformers_attention":
        lambda: ((_bert_layer(), X), {}),
    "attention_np.interop.transformers.layer_reading.layer_spec": lambda: ((_bert_layer(),), {}),
    "attention_np.interop.transformers.layer_reading.qkv_inputs": lambda: ((_torch_mha(),), {}),
    "attention_np.interop.transformers.layer_reading.params_from_transformers":
        lambda: ((_bert_layer(),), {}),
    "attention_np.interop.transformers.refusal.refuse": lambda: ((_bert_layer(), "a feature"), {}),
    "attention_np.interop.transformers.model_diff.compare_transformers_model": lambda: _bert_model_call(),
    "attention_np.interop.transformers.kernel_diff.compare_attention_kernels": lambda: _bert_model_call(),
    # the exercises' definitions (the checker engine's records): one of each, the smallest
    "attention_np.exercises.checker.Case": lambda: (("a case", (np.ones(2),)), {}),
    "attention_np.exercises.checker.Mistake": lambda: (("a mistake", an.softmax, "a hint"), {}),
    "attention_np.exercises.checker.Exercise": lambda: (
        ("softmax", "softmax(x)", "§3.2.1", an.softmax, lambda seed=0: [], [_mistake()]), {}),
    "attention_np.exercises.check": lambda: (("softmax", an.softmax), {}),
    "attention_np.training.adam.adam_init": lambda: (({"w": np.ones(3), "b": np.zeros(2)},), {}),
    "attention_np.training.adam.adam_step": lambda: _adam_call(),
    "attention_np.training.seq2seq_trainer.decode_texts": lambda: (_dates(), {}),
    "attention_np.training.seq2seq_trainer.exact_match": lambda: (_dates(), {}),
    "attention_np.studies.scoring_attention.init_scoring_mha_params": lambda: ((8, 2, 4, "scaled"), {}),
    "attention_np.compose.cross_decode.mha_cross_decode_step":
        lambda: ((X[:, :1], PARAMS["init_mha_params"](),
                  an.cross_kv_cache(MEM, PARAMS["init_mha_params"](), num_heads=2)), {"num_heads": 2}),
}


def _mistake():
    from attention_np.exercises import Mistake
    return Mistake("a mistake", an.softmax, "a hint")


def _torch_mha():
    import torch
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(8, 2, batch_first=True).double()


def _bert_config():
    from transformers import BertConfig
    return BertConfig(hidden_size=8, num_attention_heads=2, intermediate_size=6, num_hidden_layers=1,
                      vocab_size=7, max_position_embeddings=8)


def _bert_layer():
    import torch
    from transformers.models.bert.modeling_bert import BertSelfAttention
    torch.manual_seed(0)
    return BertSelfAttention(_bert_config())


def _bert_model_call():
    import torch
    from transformers import BertModel
    torch.manual_seed(0)
    return (BertModel(_bert_config()).eval(),), {"input_ids": torch.tensor([[0, 1, 2], [3, 4, 5]])}


def _flax_call():
    import flax.linen as fnn
    import jax
    x = X.astype(np.float32)
    module = fnn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)
    return (module, module.init(jax.random.PRNGKey(0), x, x), x), {}


def _layer_spec():
    from attention_np.interop.transformers.layer_reading import layer_spec
    return layer_spec(_bert_layer())


def _tiny_model():
    from attention_np.nn import ModelConfig
    return ModelConfig(vocab_size=7, max_len=4, d_model=8, num_heads=2, d_ff=6, num_layers=1)


def _tiny_seq2seq():
    from attention_np.nn import Seq2SeqConfig
    return Seq2SeqConfig(src_vocab=6, tgt_vocab=7, max_src_len=5, max_tgt_len=4, d_model=8, num_heads=2,
                         d_ff=6, num_encoder_layers=1, num_decoder_layers=1)


def _dates():
    from attention_np.training.dates import DatesTask
    from attention_np.training.seq2seq_trainer import dates_config
    config = dates_config(d_model=8, num_heads=2, d_ff=8, num_encoder_layers=1, num_decoder_layers=1)
    return _nn().init_seq2seq(config, rng=0), config, DatesTask(heldout_size=3).heldout()


def _adam_call():
    from attention_np import training
    params = {"w": np.ones(3), "b": np.zeros(2)}
    return (params, {"w": np.full(3, 0.5), "b": np.ones(2)}, training.adam_init(params)), {"lr": 0.1}


def _train_call():
    from attention_np.training import ReversalTask
    return (), {"config": _tiny_model(), "task": ReversalTask(length=4, vocab_size=5), "steps": 1,
                "batch_size": 2, "warmup": 1}


def _train_seq2seq_call():
    from attention_np.training.dates import DatesTask
    from attention_np.training.seq2seq_trainer import dates_config
    config = dates_config(d_model=8, num_heads=2, d_ff=8, num_encoder_layers=1, num_decoder_layers=1)
    return (), {"config": config, "task": DatesTask(heldout_size=4), "steps": 1, "batch_size": 2,
                "warmup": 1}


def _numerical_gradient_call():
    x = R.standard_normal((2, 3))
    return (lambda: float((x ** 2).sum()), x), {}


#: a valid instance of each class a parameter names (``plan : Plan``), or whose methods or
#: attributes are fuzzed
INSTANCES = {
    "KVCache": lambda: _filled_cache(),
    "Plan": lambda: _plan(),
    "RoPE": lambda: an.RoPE(),
    "ModelConfig": lambda: _tiny_model(),
    "Seq2SeqConfig": lambda: _tiny_seq2seq(),
    "DateBatch": lambda: _dates()[2],
    "LayerSpec": lambda: _layer_spec(),
    "Mistake": lambda: _mistake(),
}


def _plan():
    from attention_np.kernels.plan import Plan
    return Plan()


def _filled_cache():
    cache = an.KVCache(8)
    cache.append(KH[..., :2, :], VH[..., :2, :])
    return cache


#: settable attributes of classes, by the kind of their values (a plain attribute that must stay
#: consistent with the rest of the object is a failure: every bad value must be refused)
ATTRIBUTES = {
    "attention_np.compose.decode.KVCache": {"length": "count", "max_len": "count", "k": "float_array",
                                            "v": "float_array"},
}


def instance(cls):
    make = INSTANCES.get(cls.__name__)
    if make is None:
        raise LookupError(f"no instance of {cls.__name__}: add it to tests/fuzz_factories.INSTANCES")
    return make()
