# exercise: causal_mask
# the student's slip: clamps the bottom-right offset at 0 (max(S - L, 0)), wrong when L > S
# diagnosis: causal mask wrongly aligned when L > S
import numpy as np


def causal_mask(L, S, align):
    k = max(S - L, 0) if align == "bottom_right" else 0
    return np.tril(np.ones((L, S), dtype=bool), k=k)
