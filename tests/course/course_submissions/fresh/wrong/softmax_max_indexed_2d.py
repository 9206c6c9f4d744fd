# exercise: softmax
# slip: takes the row max as x.max(axis=-1)[:, None], which is right only for 2-D inputs.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1)[:, None])
    return e / e.sum(axis=-1, keepdims=True)
