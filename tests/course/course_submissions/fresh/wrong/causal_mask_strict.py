# exercise: causal_mask
# slip: uses j < i (np.tril with k - 1), so a query never sees its own position.
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.tril(np.ones((L, S), dtype=bool), k - 1)
