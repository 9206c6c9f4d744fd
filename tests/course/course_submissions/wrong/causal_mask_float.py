# exercise: causal_mask
# the student's slip: np.tril of ones (floats)
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.tril(np.ones((L, S)), k=k)
