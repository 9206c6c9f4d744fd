# exercise: causal_mask
# the student's slip: j >= i
import numpy as np


def causal_mask(L, S, align):
    off = 0 if align == "top_left" else S - L
    return np.arange(S)[None, :] >= np.arange(L)[:, None] + off
