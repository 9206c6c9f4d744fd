# exercise: causal_mask
# slip: uses the diagonal offset L - S for bottom_right instead of S - L.
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else L - S
    return np.tril(np.ones((L, S), dtype=bool), k)
