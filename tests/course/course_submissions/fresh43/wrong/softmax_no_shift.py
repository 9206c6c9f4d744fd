# exercise: softmax
# slip: no max subtracted: exp overflows for logits ~1e3
import numpy as np


def softmax(x):
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)
