# exercise: causal_mask
# the student's slip: bottom-right offset S - L - 1 (the query 'cannot see the current key')
# diagnosis: causal mask off by one on bottom_right only
import numpy as np


def causal_mask(L, S, align):
    if align == "top_left":
        return np.tril(np.ones((L, S), dtype=bool))
    return np.tril(np.ones((L, S), dtype=bool), k=S - L - 1)
