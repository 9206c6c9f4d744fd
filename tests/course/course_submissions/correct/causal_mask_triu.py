# exercise: causal_mask
import numpy as np


def causal_mask(L, S, align):
    offset = 0 if align == "top_left" else S - L
    return ~np.triu(np.ones((L, S), dtype=bool), k=offset + 1)
