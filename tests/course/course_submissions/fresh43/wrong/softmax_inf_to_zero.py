# exercise: softmax
# slip: replaces infinities by 0 "to avoid NaN": a -inf logit then gets weight exp(0 - m), not 0
import numpy as np


def softmax(x):
    x = np.where(np.isinf(x), 0.0, x).astype(x.dtype)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
