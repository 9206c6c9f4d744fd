# exercise: causal_mask
# the student's slip: np.triu instead of np.tril (keeps the future, diagonal included)
# diagnosis: True on the future keys (polarity flipped)
import numpy as np


def causal_mask(L, S, align):
    offset = 0 if align == "top_left" else S - L
    return np.triu(np.ones((L, S), dtype=bool), k=offset)
