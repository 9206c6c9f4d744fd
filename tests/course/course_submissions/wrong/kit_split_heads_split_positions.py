# exercise: split_heads
# the student's slip: splits along the positions (axis -2) instead of the features
# diagnosis: split along the positions
import numpy as np


def split_heads(x, num_heads):
    parts = np.split(x, num_heads, axis=-2)
    return np.stack(parts, axis=-3)
