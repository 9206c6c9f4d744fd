# exercise: softmax
# the student's slip: casts the result to float32 "to save memory", whatever the input dtype
# diagnosis: dtype not kept
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
