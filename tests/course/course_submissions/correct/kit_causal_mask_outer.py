# exercise: causal_mask
import numpy as np


def causal_mask(L, S, align):
    shift = S - L if align == "bottom_right" else 0
    return np.greater_equal.outer(np.arange(L) + shift, np.arange(S))
