# exercise: softmax
# slip: np.atleast_2d to treat a single row like a batch, never undone: a 1-D input comes back (1, n)
import numpy as np


def softmax(x):
    x = np.atleast_2d(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
