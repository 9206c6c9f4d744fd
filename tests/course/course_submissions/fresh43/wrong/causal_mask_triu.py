# exercise: causal_mask
# slip: np.triu: the upper triangle, the future instead of the past
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.triu(np.ones((L, S), dtype=bool), k=k)
