# exercise: softmax
# slip: computes in float64 for safety and forgets to cast back: a float32 input gives float64
import numpy as np


def softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
