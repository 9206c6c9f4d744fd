# exercise: softmax_backward
# slip: float64 inside and no cast back: float32 inputs give float64
import numpy as np


def softmax_backward(dp, p):
    p64, dp64 = p.astype(np.float64), dp.astype(np.float64)
    return p64 * (dp64 - (dp64 * p64).sum(axis=-1, keepdims=True))
