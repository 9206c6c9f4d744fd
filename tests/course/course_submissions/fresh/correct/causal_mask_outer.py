# exercise: causal_mask
# style: np.greater_equal.outer of each query's last visible key against the key positions.
import numpy as np


def causal_mask(L, S, align):
    last = np.arange(L) + (S - L if align == "bottom_right" else 0)
    return np.greater_equal.outer(last, np.arange(S))
