# exercise: softmax_backward
# the student's slip: sums over axis 0
import numpy as np


def softmax_backward(dp, p):
    return p * (dp - np.sum(dp * p, axis=0, keepdims=True))
