# exercise: merge_heads
# style: concatenates the heads along the feature axis
import numpy as np


def merge_heads(x):
    return np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-1)
