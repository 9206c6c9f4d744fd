# exercise: causal_mask
# the student's slip: crops a square lower triangle of side max(L, S); for bottom_right takes the last L rows
# diagnosis: causal mask wrongly aligned when L > S
import numpy as np


def causal_mask(L, S, align):
    n = max(L, S)
    full = np.tril(np.ones((n, n), dtype=bool))
    if align == "top_left":
        return full[:L, :S]
    return full[n - L:, :S]
