# exercise: softmax
# slip: subtracts the row mean instead of the row max: overflow when one logit is far above the mean
import numpy as np


def softmax(x):
    e = np.exp(x - x.mean(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
