# exercise: causal_mask
# slip: np.tri without dtype=bool: returns float 0/1
import numpy as np


def causal_mask(L, S, align):
    return np.tri(L, S, k=0 if align == "top_left" else S - L)
