# exercise: causal_mask
# the student's slip: offset L - S
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else L - S
    return np.tril(np.ones((L, S), dtype=bool), k=k)
