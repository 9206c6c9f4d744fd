# exercise: padding_mask
# slip: uses j <= lengths[b], letting each row attend one padding position.
import numpy as np


def padding_mask(lengths, S):
    return (np.arange(S)[None, :] <= lengths[:, None])[:, None, :]
