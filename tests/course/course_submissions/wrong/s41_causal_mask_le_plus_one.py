# exercise: causal_mask
# the student's slip: writes j < i + offset + 2 thinking "strictly below the next row"
# diagnosis: causal mask off by one (one future key allowed)
import numpy as np


def causal_mask(L, S, align):
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    offset = 0 if align == "top_left" else S - L
    return j < i + offset + 2
