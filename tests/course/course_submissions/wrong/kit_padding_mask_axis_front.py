# exercise: padding_mask
# the student's slip: adds the broadcast axis in front (mask[None]), giving (1, B, S)
# diagnosis: padding mask of the wrong shape
import numpy as np


def padding_mask(lengths, S):
    mask = np.arange(S)[None, :] < lengths[:, None]
    return mask[None]
