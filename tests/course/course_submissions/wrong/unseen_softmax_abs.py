# exercise: softmax
# the student's slip: subtracts the max of |x|
import numpy as np


def softmax(x):
    e = np.exp(x - np.abs(x).max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
