# exercise: padding_mask
# slip: keeps the first entries with a negative slice :-(S - n): a length equal to S gives :-0, no key at all
import numpy as np


def padding_mask(lengths, S):
    m = np.zeros((len(lengths), 1, S), dtype=bool)
    for b, n in enumerate(lengths):
        m[b, 0, :-(S - n)] = True
    return m
