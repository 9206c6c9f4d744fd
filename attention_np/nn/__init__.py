"""The model's layers, each a forward/backward pair by hand; trained by :mod:`attention_np.training`.

One module per layer, each a forward/backward pair with a cache, as in :mod:`attention_np.paper`:

- :mod:`.embedding`   token embedding, §3.4
- :mod:`.positional`  sinusoidal positional encoding, §3.5
- :mod:`.layernorm`   layer normalization (Ba et al., 2016), used around every sub-layer, §3.1
- :mod:`.activations` ReLU and the exact (erf) GELU
- :mod:`.feedforward` the position-wise feed-forward network, Eq. (2), §3.3
- :mod:`.encoder`     one encoder layer, LN(x + MHA(x)) then LN(x + FFN(x)), §3.1
- :mod:`.loss`        softmax cross-entropy
- :mod:`.model`       the encoder built from those layers and :func:`attention_np.mha_forward`
- :mod:`.decoder`     one decoder layer: masked self-attention, encoder-decoder attention, FFN, §3.1
- :mod:`.seq2seq`     the paper's whole encoder-decoder model, shared embeddings, tied output, §3.4
- :mod:`.decoding`    greedy and beam search with the KV cache
"""

from attention_np.nn.activations import erf, gelu_backward, gelu_forward, relu_backward, relu_forward
from attention_np.nn.embedding import embedding_backward, embedding_forward
from attention_np.nn.feedforward import ffn_backward, ffn_forward, init_ffn_params
from attention_np.nn.layernorm import layernorm_backward, layernorm_forward
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.model import ModelConfig, init_model, model_backward, model_forward
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.nn.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_backward, seq2seq_forward

__all__ = [
    "erf", "gelu_forward", "gelu_backward", "relu_forward", "relu_backward",
    "embedding_forward", "embedding_backward",
    "ffn_forward", "ffn_backward", "init_ffn_params",
    "layernorm_forward", "layernorm_backward",
    "cross_entropy_forward", "cross_entropy_backward",
    "ModelConfig", "init_model", "model_forward", "model_backward",
    "Seq2SeqConfig", "init_seq2seq", "seq2seq_forward", "seq2seq_backward",
    "sinusoidal_encoding",
]

# Names 0.3 moved to attention_np.training (the tasks and trainers), kept here as attributes for
# one release with a DeprecationWarning. Imported by name on first use only: nn sits below
# training and imports nothing from it.
MOVED_TO_TRAINING = ("AdamState", "adam_init", "adam_step", "transformer_lr", "ReversalTask",
                     "TrainResult", "evaluate", "train", "adam", "tasks", "trainer", "dates",
                     "seq2seq_trainer")


def __getattr__(name):
    if name in MOVED_TO_TRAINING:
        from importlib import import_module

        from attention_np._checks import warn_deprecated

        warn_deprecated(f"attention_np.nn.{name} is deprecated since 0.3.0: it is "
                        f"attention_np.training.{name} (removed from attention_np.nn in 0.4)")
        training = import_module("attention_np.training")
        if hasattr(training, name):
            return getattr(training, name)
        return import_module(f"attention_np.training.{name}")
    raise AttributeError(f"module 'attention_np.nn' has no attribute {name!r}")
