# exercise: causal_mask
# slip: returns True for the future keys (the keys to block) instead of True = may attend.
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.triu(np.ones((L, S), dtype=bool), k + 1)
