"""A small Transformer encoder, trained end to end in NumPy (every backward by hand).

One module per layer, each a forward/backward pair with a cache, as in the core package:

- :mod:`.embedding`   token embedding, §3.4
- :mod:`.positional`  sinusoidal positional encoding, §3.5
- :mod:`.layernorm`   layer normalization (Ba et al., 2016), used around every sub-layer, §3.1
- :mod:`.activations` ReLU and the exact (erf) GELU
- :mod:`.feedforward` the position-wise feed-forward network, Eq. (2), §3.3
- :mod:`.encoder`     one encoder layer, LN(x + MHA(x)) then LN(x + FFN(x)), §3.1
- :mod:`.loss`        softmax cross-entropy
- :mod:`.adam`        the Adam optimizer and the paper's learning-rate schedule, Eq. (3), §5.3
- :mod:`.model`       the encoder built from those layers and :func:`attention_np.mha_forward`
- :mod:`.tasks`       toy tasks where attention must route information (sequence reversal)
- :mod:`.decoder`     one decoder layer: masked self-attention, encoder-decoder attention, FFN, §3.1
- :mod:`.seq2seq`     the paper's whole encoder-decoder model, shared embeddings, tied output, §3.4
- :mod:`.dates`       a seq2seq task: dates in a dozen formats -> ISO 8601
- :mod:`.decoding`    greedy and beam search with the KV cache
- :mod:`.seq2seq_trainer` training the encoder-decoder (label smoothing, §5.4)
- :mod:`.trainer`     the training loop
- :mod:`.threads`     run BLAS on one thread (tiny matrices train faster that way)
"""

from attention_np.nn.activations import erf, gelu_backward, gelu_forward, relu_backward, relu_forward
from attention_np.nn.adam import AdamState, adam_init, adam_step, transformer_lr
from attention_np.nn.embedding import embedding_backward, embedding_forward
from attention_np.nn.feedforward import ffn_backward, ffn_forward, init_ffn_params
from attention_np.nn.layernorm import layernorm_backward, layernorm_forward
from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
from attention_np.nn.model import ModelConfig, init_model, model_backward, model_forward
from attention_np.nn.positional import sinusoidal_encoding
from attention_np.nn.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_backward, seq2seq_forward
from attention_np.nn.tasks import ReversalTask
from attention_np.nn.trainer import TrainResult, evaluate, train

__all__ = [
    "erf", "gelu_forward", "gelu_backward", "relu_forward", "relu_backward",
    "AdamState", "adam_init", "adam_step", "transformer_lr",
    "embedding_forward", "embedding_backward",
    "ffn_forward", "ffn_backward", "init_ffn_params",
    "layernorm_forward", "layernorm_backward",
    "cross_entropy_forward", "cross_entropy_backward",
    "ModelConfig", "init_model", "model_forward", "model_backward",
    "Seq2SeqConfig", "init_seq2seq", "seq2seq_forward", "seq2seq_backward",
    "sinusoidal_encoding", "ReversalTask", "TrainResult", "evaluate", "train",
]
