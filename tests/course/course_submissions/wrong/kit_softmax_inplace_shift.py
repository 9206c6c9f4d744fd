# exercise: softmax
# the student's slip: subtracts the max in place (x -= ...), changing the caller's array
# diagnosis: wrote into an input
import numpy as np


def softmax(x):
    x -= x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)
