# exercise: merge_heads
# the student's slip: np.hstack(x): concatenates along the FIRST axis's items (the batch when there is one)
# diagnosis: does not work with batch axes
import numpy as np


def merge_heads(x):
    return np.hstack(x)
