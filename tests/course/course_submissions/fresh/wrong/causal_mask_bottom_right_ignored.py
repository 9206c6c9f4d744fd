# exercise: causal_mask
# slip: ignores align and always returns the top-left mask, right only when L == S.
import numpy as np


def causal_mask(L, S, align):
    return np.arange(S)[None, :] <= np.arange(L)[:, None]
