# exercise: softmax
# slip: converts to float64 for accuracy and forgets to cast the result back to the input's dtype.
import numpy as np


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
