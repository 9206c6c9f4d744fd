# exercise: split_heads
# the student's slip: np.stack(np.split(x, h, axis=-1)) stacks the heads on axis 0, in front of the batch axes
# diagnosis: does not work with batch axes
import numpy as np


def split_heads(x, num_heads):
    return np.stack(np.split(x, num_heads, axis=-1))
