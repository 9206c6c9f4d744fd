"""Tasks and trainers for the models of :mod:`attention_np.nn` (every gradient by hand).

- :mod:`.adam`            the Adam optimizer and the paper's learning-rate schedule, Eq. (3), §5.3
- :mod:`.tasks`           toy tasks where attention must route information (sequence reversal)
- :mod:`.trainer`         training the encoder on a task
- :mod:`.dates`           a seq2seq task: dates in a dozen formats -> ISO 8601
- :mod:`.seq2seq_trainer` training the encoder-decoder (label smoothing, §5.4)
"""

from attention_np.training.adam import AdamState, adam_init, adam_step, transformer_lr
from attention_np.training.tasks import ReversalTask
from attention_np.training.trainer import TrainResult, evaluate, train

__all__ = ["AdamState", "adam_init", "adam_step", "transformer_lr", "ReversalTask", "TrainResult",
           "evaluate", "train"]
