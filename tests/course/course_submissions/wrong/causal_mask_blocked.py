# exercise: causal_mask
# the student's slip: True = blocked
import numpy as np


def causal_mask(L, S, align):
    k = 0 if align == "top_left" else S - L
    return np.triu(np.ones((L, S), dtype=bool), k=k + 1)
