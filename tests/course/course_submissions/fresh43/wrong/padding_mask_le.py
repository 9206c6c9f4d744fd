# exercise: padding_mask
# slip: j <= length, one key too many (off by one)
import numpy as np


def padding_mask(lengths, S):
    return np.arange(S)[None, None, :] <= np.asarray(lengths)[:, None, None]
