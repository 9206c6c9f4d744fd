# exercise: padding_mask
import numpy as np


def padding_mask(lengths, S):
    counts = np.cumsum(np.ones((len(lengths), S), dtype=int), axis=1)   # 1, 2, ..., S
    return (counts <= np.asarray(lengths)[:, None])[:, None, :]
