# exercise: causal_mask
# style: np.tri with the diagonal offset 0 or S - L
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.tri(L, S, k=k, dtype=bool)
