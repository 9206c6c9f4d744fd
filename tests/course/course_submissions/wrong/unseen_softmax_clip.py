# exercise: softmax
# the student's slip: clips logits to [-50, 50] to avoid overflow
import numpy as np


def softmax(x):
    z = np.clip(x, -50, 50)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
