# exercise: softmax_backward
# the student's slip: sums dp without p
import numpy as np


def softmax_backward(dp, p):
    return p * dp - p * dp.sum(axis=-1, keepdims=True)
