# exercise: softmax
# slip: subtracts the max of the whole array, not each row's max, so a far lower row underflows to 0/0.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)
