# exercise: softmax
# the student's slip: saves memory by working in place
import numpy as np


def softmax(x):
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x
