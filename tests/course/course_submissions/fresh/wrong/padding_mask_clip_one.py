# exercise: padding_mask
# slip: clips the lengths to at least 1 to avoid an empty row, so a length-0 row gets one allowed key.
import numpy as np


def padding_mask(lengths, S):
    n = np.maximum(lengths, 1)
    return (np.arange(S)[None, :] < n[:, None])[:, None, :]
