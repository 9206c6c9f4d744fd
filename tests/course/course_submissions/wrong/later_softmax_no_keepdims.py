# exercise: softmax
# the student's slip: divides by a sum without keepdims
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)
