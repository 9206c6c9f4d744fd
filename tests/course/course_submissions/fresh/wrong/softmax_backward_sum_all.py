# exercise: softmax_backward
# slip: sums dp * p over the whole array instead of over each row, right only for a single row.
import numpy as np


def softmax_backward(dp, p):
    return p * (dp - np.sum(dp * p))
