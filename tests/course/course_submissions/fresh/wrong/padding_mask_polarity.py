# exercise: padding_mask
# slip: marks the padding positions True (True = padded) instead of the positions that may be attended.
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S)[None, :] >= lengths[:, None])[:, None, :]
