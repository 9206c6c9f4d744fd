# exercise: softmax
# the student's slip: shifts each row by its first entry, not its max (a later entry far larger overflows)
import numpy as np


def softmax(x):
    z = x - x[..., :1]                       # "any constant per row works"
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
