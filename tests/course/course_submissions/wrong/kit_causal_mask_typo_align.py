# exercise: causal_mask
# the student's slip: compares align with 'bottom-right' (a hyphen), so it is always top-left
# diagnosis: causal mask wrongly aligned (always top-left)
import numpy as np


def causal_mask(L, S, align):
    off = S - L if align == "bottom-right" else 0
    return np.arange(S)[None, :] <= np.arange(L)[:, None] + off
