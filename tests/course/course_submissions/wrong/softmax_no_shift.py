# exercise: softmax
# the student's slip: no shift at all
import numpy as np


def softmax(x):
    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)
