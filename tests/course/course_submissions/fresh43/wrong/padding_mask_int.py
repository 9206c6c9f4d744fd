# exercise: padding_mask
# slip: returns 0/1 integers, not a bool array
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S)[None, None, :] < np.asarray(lengths)[:, None, None]).astype(np.int64)
