# exercise: causal_mask
# the student's slip: np.tril of an (L, S) block, no offset
import numpy as np


def causal_mask(L, S, align):
    return np.tril(np.ones((L, S), dtype=bool))
