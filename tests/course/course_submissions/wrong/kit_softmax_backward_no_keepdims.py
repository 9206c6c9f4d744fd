# exercise: softmax_backward
# the student's slip: row sum without keepdims, so it broadcasts along the last axis
# diagnosis: the row sum does not broadcast back (keepdims missing)
import numpy as np


def softmax_backward(dp, p):
    s = np.sum(dp * p, axis=-1)
    return p * (dp - s)
