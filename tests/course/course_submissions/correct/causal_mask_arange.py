# exercise: causal_mask
import numpy as np


def causal_mask(L, S, align):
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    if align == "bottom_right":
        i = i + (S - L)
    return j <= i
