# exercise: softmax
# the student's slip: shifts each row by its first entry instead of its max (overflows when a later entry is far larger)
import numpy as np


def softmax(x):
    z = x - x[..., :1]                       # "any constant per row works"
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
