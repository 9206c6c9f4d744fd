# exercise: causal_mask
# slip: bottom_right shifts the diagonal by L - S instead of S - L (the same when L == S)
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else L - S
    return np.tri(L, S, k=k, dtype=bool)
