# exercise: causal_mask
# the student's slip: puts the key index on the rows: arange(S)[:, None] vs arange(L)[None, :], an (S, L) mask
# diagnosis: causal mask transposed
import numpy as np


def causal_mask(L, S, align):
    off = S - L if align == "bottom_right" else 0
    j = np.arange(S)[:, None]
    i = np.arange(L)[None, :]
    return j <= i + off
