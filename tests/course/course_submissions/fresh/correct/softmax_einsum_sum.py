# exercise: softmax
# style: np.subtract into a fresh buffer, row sums by einsum, division by broadcasting.
import numpy as np


def softmax(x):
    shifted = np.subtract(x, x.max(axis=-1, keepdims=True))
    e = np.exp(shifted)
    z = np.einsum("...n->...", e)
    return e / z[..., None]
