# exercise: softmax
# the student's slip: one max for the whole array
import numpy as np


def softmax(x):
    z = x - x.max()
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
