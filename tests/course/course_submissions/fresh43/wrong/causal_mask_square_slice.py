# exercise: causal_mask
# slip: slices a square (S, S) lower triangle: bottom_right takes its last L rows, too few when L > S
import numpy as np


def causal_mask(L, S, align):
    full = np.tril(np.ones((max(L, S), max(L, S)), dtype=bool))
    if align == "top_left":
        return full[:L, :S]
    return np.tril(np.ones((S, S), dtype=bool))[-L:, :]
