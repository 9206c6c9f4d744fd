# exercise: padding_mask
# slip: ignores S and pads to the longest length: wrong width when no sequence fills S
import numpy as np


def padding_mask(lengths, S):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    return np.arange(width)[None, None, :] < lengths[:, None, None]
