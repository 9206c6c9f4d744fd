# exercise: softmax
# the student's slip: converts to float64 for accuracy and never casts back
# diagnosis: dtype not kept
import numpy as np


def softmax(x):
    x = np.array(x, dtype=np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
