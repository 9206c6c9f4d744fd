# exercise: causal_mask
import numpy as np


def causal_mask(L, S, align):
    return np.tri(L, S, k=S - L if align == "bottom_right" else 0, dtype=bool)
