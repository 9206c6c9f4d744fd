# exercise: causal_mask
# slip: returns np.tril of a float ones array (0.0/1.0) instead of a bool array.
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.tril(np.ones((L, S)), k)
