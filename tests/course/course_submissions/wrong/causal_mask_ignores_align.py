# exercise: causal_mask
# the student's slip: ignores align
import numpy as np


def causal_mask(L, S, align):
    return np.arange(S)[None, :] <= np.arange(L)[:, None]
