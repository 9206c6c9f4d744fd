# exercise: padding_mask
# slip: counts positions from 1 (j + 1 < length): the last real key is masked
import numpy as np


def padding_mask(lengths, S):
    return np.arange(1, S + 1)[None, None, :] < np.asarray(lengths)[:, None, None]
