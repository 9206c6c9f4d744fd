# exercise: softmax_backward
# the student's slip: squeezes the row sums, which also drops a leading axis of size 1
import numpy as np


def softmax_backward(dp, p):
    inner = np.sum(dp * p, axis=-1, keepdims=True).squeeze()    # (..., 1) -> (...)
    return p * (dp - inner[..., None])
