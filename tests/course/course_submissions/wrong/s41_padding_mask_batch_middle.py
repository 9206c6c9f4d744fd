# exercise: padding_mask
# the student's slip: puts the batch axis in the middle, (1, B, S)
# diagnosis: padding mask of the wrong shape
import numpy as np


def padding_mask(lengths, S):
    lengths = np.asarray(lengths)
    return np.arange(S)[None, None, :] < lengths[None, :, None]
