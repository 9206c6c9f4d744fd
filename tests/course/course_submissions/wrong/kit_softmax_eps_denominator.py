# exercise: softmax
# the student's slip: adds 1e-8 to the denominator 'for safety', so rows no longer sum to 1
# diagnosis: the rows do not sum to 1
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / (e.sum(axis=-1, keepdims=True) + 1e-8)
