# exercise: softmax
# the student's slip: keeps the sum's axis by hand with [:, None], which only works for 2-D input
# diagnosis: shapes that do not broadcast
import numpy as np


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1)[:, None]
