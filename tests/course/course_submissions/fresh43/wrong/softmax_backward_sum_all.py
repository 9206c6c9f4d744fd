# exercise: softmax_backward
# slip: np.sum(dp * p) over the whole array, not per row: right only for a single row
import numpy as np


def softmax_backward(dp, p):
    return p * (dp - np.sum(dp * p))
