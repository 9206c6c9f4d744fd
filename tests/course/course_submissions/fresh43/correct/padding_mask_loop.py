# exercise: padding_mask
# style: a loop over the batch filling a zero mask with a slice per sequence
import numpy as np


def padding_mask(lengths, S):
    m = np.zeros((len(lengths), 1, S), dtype=bool)
    for b, n in enumerate(lengths):
        m[b, 0, :n] = True
    return m
