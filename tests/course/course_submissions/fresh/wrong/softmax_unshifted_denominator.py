# exercise: softmax
# slip: shifts the numerator by the row max but sums the unshifted exponentials in the denominator.
import numpy as np


def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return np.exp(x - m) / np.exp(x).sum(axis=-1, keepdims=True)
