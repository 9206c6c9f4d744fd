# exercise: softmax_backward
# the student's slip: accumulates the row sum in float64 (dtype=np.float64), so float32 comes back float64
# diagnosis: dtype not kept
import numpy as np


def softmax_backward(dp, p):
    inner = np.sum(dp * p, axis=-1, keepdims=True, dtype=np.float64)
    return p * (dp - inner)
