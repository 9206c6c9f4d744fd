# exercise: softmax
# the student's slip: accumulates the sum in float64 for accuracy
import numpy as np


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True, dtype=np.float64)
