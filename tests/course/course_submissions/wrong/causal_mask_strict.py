# exercise: causal_mask
# the student's slip: strict inequality
import numpy as np


def causal_mask(L, S, align):
    shift = 0 if align == "top_left" else S - L
    return np.arange(S)[None, :] < np.arange(L)[:, None] + shift
