# exercise: softmax
# the student's slip: one sum for everything
import numpy as np


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e)
