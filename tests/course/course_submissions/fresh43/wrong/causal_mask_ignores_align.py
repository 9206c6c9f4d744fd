# exercise: causal_mask
# slip: ignores align (always top-left): right only when L == S or for top_left
import numpy as np


def causal_mask(L, S, align):
    return np.tril(np.ones((L, S), dtype=bool))
