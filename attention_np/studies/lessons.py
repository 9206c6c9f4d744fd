"""The lessons' example data, shared by the notebooks and ``python -m attention_np figures``.

The sentence of notebook 1 and the d_k sweeps of notebook 2 live here (not in the CLI) so that
a notebook and the figure it matches show the same numbers.
"""

from __future__ import annotations

import numpy as np

# The sweeps behind the figures, shared with notebook 2 so the numbers agree.
SCALING_D_KS = (1, 4, 16, 64, 256, 1024)
COMPARE_D_KS = (4, 16, 64, 256)
SEED = 0

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]
_FEATURES = ["determiner", "animal", "verb", "preposition", "object"]
_ROLE = {"the": "determiner", "cat": "animal", "sat": "verb", "on": "preposition",
         "mat": "object"}


def example_sentence(d_k: int = 8, seed: int = SEED):
    """The toy sentence of notebook 1: tokens and one embedding per token, ``(L, d_k)``.

    Each word gets a strong feature for its role (determiner, animal, verb, preposition,
    object) plus a little seeded noise in every dimension; the same word gets the same
    vector, so its two occurrences attend identically. Hand-made on purpose: a student can
    predict which dot products are large.
    """
    if d_k < len(_FEATURES):
        raise ValueError(f"d_k must be at least {len(_FEATURES)} (one dim per role), got {d_k}")
    rng = np.random.default_rng(seed)
    vocab = sorted(set(TOKENS))
    table = {w: 0.3 * rng.standard_normal(d_k) for w in vocab}
    for w in vocab:
        table[w][_FEATURES.index(_ROLE[w])] += 2.0
    # "cat" and "mat" share an object-like feature: a noun that the verb and "on" relate to
    table["cat"][_FEATURES.index("object")] += 1.0
    table["sat"][_FEATURES.index("animal")] += 1.0    # a verb that looks for its subject
    return list(TOKENS), np.stack([table[w] for w in TOKENS])          # (L, d_k)
