# exercise: softmax
# slip: shifts the logits in place with x -= max, writing into the caller's array.
import numpy as np


def softmax(x):
    x -= x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)
