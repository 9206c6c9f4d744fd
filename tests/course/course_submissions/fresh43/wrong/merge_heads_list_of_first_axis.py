# exercise: merge_heads
# slip: np.concatenate(list(x), -1) iterates over the FIRST axis: right only with no leading axis
import numpy as np


def merge_heads(x):
    return np.concatenate(list(x), axis=-1)
