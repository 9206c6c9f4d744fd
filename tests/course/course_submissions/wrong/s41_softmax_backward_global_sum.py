# exercise: softmax_backward
# the student's slip: the weighted sum is taken over the whole array, not per row
# diagnosis: the sum is not over each row alone
import numpy as np


def softmax_backward(dp, p):
    return p * (dp - np.sum(dp * p))
