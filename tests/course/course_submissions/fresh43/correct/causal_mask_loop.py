# exercise: causal_mask
# style: two loops over queries and keys, the rule written out
import numpy as np


def causal_mask(L, S, align):
    out = np.zeros((L, S), dtype=bool)
    for i in range(L):
        last = i if align == "top_left" else i + S - L
        for j in range(S):
            out[i, j] = j <= last
    return out
