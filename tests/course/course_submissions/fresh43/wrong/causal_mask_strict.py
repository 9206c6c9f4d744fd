# exercise: causal_mask
# slip: j < i: a query may not see its own key
import numpy as np


def causal_mask(L, S, align):
    shift = 0 if align == "top_left" else S - L
    return np.arange(S)[None, :] < np.arange(L)[:, None] + shift
