# exercise: softmax
# slip: shifts the input in place (x -= max) to save memory: the caller's array is changed
import numpy as np


def softmax(x):
    x -= x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)
