# exercise: softmax
# the student's slip: centres each row on its mean
import numpy as np


def softmax(x):
    z = x - x.mean(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
