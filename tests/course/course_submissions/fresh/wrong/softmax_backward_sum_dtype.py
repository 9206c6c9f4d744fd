# exercise: softmax_backward
# slip: accumulates the row sum with dtype=np.float64 and so returns float64 for float32 inputs.
import numpy as np


def softmax_backward(dp, p):
    s = np.sum(dp * p, axis=-1, keepdims=True, dtype=np.float64)
    return p * (dp - s)
