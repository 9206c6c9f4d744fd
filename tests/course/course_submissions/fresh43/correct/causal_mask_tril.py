# exercise: causal_mask
# style: np.tril of a ones matrix
import numpy as np


def causal_mask(L, S, align):
    offset = {"top_left": 0, "bottom_right": S - L}[align]
    return np.tril(np.ones((L, S), dtype=bool), k=offset)
