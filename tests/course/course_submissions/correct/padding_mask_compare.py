# exercise: padding_mask
import numpy as np


def padding_mask(lengths, S):
    keys = np.arange(S)
    return (keys[None, :] < np.asarray(lengths)[:, None])[:, None, :]
