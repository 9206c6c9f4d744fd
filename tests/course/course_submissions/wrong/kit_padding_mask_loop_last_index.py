# exercise: padding_mask
# the student's slip: loop with [: lengths[b] - 1] (treats the length as the last index); a length 0 gives
#   [:-1]
# diagnosis: padding mask off by one (the last real key left out)
import numpy as np


def padding_mask(lengths, S):
    B = len(lengths)
    mask = np.zeros((B, 1, S), dtype=bool)
    for b in range(B):
        mask[b, 0, :lengths[b] - 1] = True
    return mask
