# exercise: merge_heads
# the student's slip: concatenates the list of heads
import numpy as np


def merge_heads(x):
    return np.concatenate(list(x), axis=-1)
