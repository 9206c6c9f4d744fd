# exercise: softmax_backward
# the student's slip: np.asarray(..., dtype=np.float64) on the inputs, never cast back
# diagnosis: dtype not kept
import numpy as np


def softmax_backward(dp, p):
    dp = np.asarray(dp, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    return p * (dp - (dp * p).sum(-1, keepdims=True))
