# exercise: softmax
# slip: subtracts the max of the whole array, not of each row: rows ~1e3 below the top row underflow to 0/0
import numpy as np


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=-1, keepdims=True)
