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
}

#: a cache class -> one made by its forward from the arrays above
CACHES = {
    "SDPACache": lambda: an.sdpa_forward(Q, K, V)[1],
    "AttentionCache": lambda: an.paper.sdpa_forward(Q, K, V)[1],
    "MHACache": lambda: an.mha_forward(X, MEM, MEM, PARAMS["init_mha_params"](), num_heads=2)[1],
    "FlashCache": lambda: an.flash_attention_forward(Q, K, V, block_size=2)[1],
    "SinksCache": lambda: an.sdpa_sinks_forward(QH, KH, VH, np.zeros(2))[1],
    "AdditiveCache": lambda: an.additive_attention_forward(Q, K, V, PARAMS["init_additive_params"]())[1],
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
    "attention_np.compose.cross_decode.mha_cross_decode_step":
        lambda: ((X[:, :1], PARAMS["init_mha_params"](),
                  an.cross_kv_cache(MEM, PARAMS["init_mha_params"](), num_heads=2)), {"num_heads": 2}),
}


def _tiny_model():
    from attention_np.nn import ModelConfig
    return ModelConfig(vocab_size=5, max_len=4, d_model=8, num_heads=2, d_ff=8, num_layers=1)


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
